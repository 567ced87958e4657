"""InferenceResponse and the iterators that deliver responses in order."""

from __future__ import annotations

import asyncio
import collections
import functools
import itertools
import queue
import threading
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from tritonserver._c import triton_bindings as _bindings
from tritonserver._enums import DATA_TYPES, MEMORY_TYPES, RESPONSE_COMPLETE_FINAL
from tritonserver._errors import InvalidArgumentError, TritonError, error_from_code
from tritonserver._tensor import MemoryBuffer, Tensor

if TYPE_CHECKING:
    from tritonserver._model import Model


@dataclass
class InferenceResponse:
    """One response of a request: outputs, or the error that replaced them.

    The last response of a request has ``final=True``. A decoupled model may
    end with a final response that carries nothing else. classification_label
    is filled when the request asked for it (parameter "classification":
    True): the label of the first output's top class, from the model's label
    file (None without one).
    """

    model: "Model"
    request_id: Optional[str] = None
    parameters: dict[str, Union[str, int, bool, float]] = field(default_factory=dict)
    outputs: dict[str, Tensor] = field(default_factory=dict)
    error: Optional[TritonError] = None
    classification_label: Optional[str] = None
    final: bool = False

    @staticmethod
    def _from_c(model: "Model", flags: int, payload: Any,
                request_id: Optional[str]) -> "InferenceResponse":
        """Build from what the binding read out of a core response."""
        final = bool(flags & RESPONSE_COMPLETE_FINAL)
        if payload is None:
            return InferenceResponse(model=model, request_id=request_id, final=final)
        error, c_id, _, _, parameters, outputs, label = payload
        response = InferenceResponse(model=model, request_id=c_id or request_id,
                                     parameters=parameters, final=final,
                                     classification_label=label)
        if error is not None:
            response.error = error_from_code(*error)
        for name, dtype, shape, ptr, size, mtype, mtype_id, owner in outputs:
            # `owner` holds the output memory: each tensor keeps it alive.
            buffer = MemoryBuffer(ptr, MEMORY_TYPES[mtype], mtype_id, size, owner)
            response.outputs[name] = Tensor(DATA_TYPES[dtype], shape, buffer)
        return response


class _Forwarder:
    """Delivers a request's responses on arrival: into the user's queue (as
    the reference asks: there as well as to the iterator) and into a list
    the iterator reads. Called by the sink on a core thread, with the GIL;
    the lock keeps the user's queue in arrival order."""

    def __init__(self, model: "Model", sink: Any, user_queue: Any, request_id: Optional[str],
                 loop: Optional[asyncio.AbstractEventLoop]):
        self._model = model
        self._sink = sink
        self._queue = user_queue
        self._request_id = request_id
        self._loop = loop
        self.ready = threading.Condition()
        self.pending: collections.deque = collections.deque()
        self.on_item: Optional[Callable[[], None]] = None
        self.queue_error: Optional[BaseException] = None  # from the user's queue
        self._error_taken = False
        # asyncio.Queue: filled on the loop's thread, by flush().
        self._unqueued: Optional[collections.deque] = (
            collections.deque() if isinstance(user_queue, asyncio.Queue) else None)

    def __call__(self) -> None:
        with self.ready:
            while True:
                item = self._sink.try_get()
                if item is None:
                    break
                response = InferenceResponse._from_c(self._model, *item, self._request_id)
                self.pending.append(response)  # first: a failing queue loses nothing
                if self._unqueued is not None:
                    self._unqueued.append(response)
                    loop = self._loop or _queue_loop(self._queue)
                    loop.call_soon_threadsafe(self.flush)
                else:
                    self._put(response)
                if response.final:
                    self._sink.set_notifier(None)  # the sink no longer needs us
            self.ready.notify_all()
        if self.on_item is not None:
            self.on_item()

    def flush(self) -> None:
        """Move arrivals into the asyncio.Queue (on the loop's thread). The
        iterator calls it too, so a response is in the queue no later than
        the iterator yields it."""
        unqueued = self._unqueued
        while unqueued:
            self._put(unqueued.popleft())

    def _put(self, response: "InferenceResponse") -> None:
        # Never blocks (a full bounded queue would stall the core's thread,
        # and stop() with it) and never raises here: the first failure (a
        # full or closed queue) is kept for the iterator to raise, and the
        # queue gets nothing more; the iterator still has every response.
        if self.queue_error is not None:
            return
        try:
            put = getattr(self._queue, "put_nowait", None) or self._queue.put
            put(response)
        except Exception as e:
            self.queue_error = e.with_traceback(None)  # no frames kept alive

    def take_error(self) -> Optional[BaseException]:
        """The queue's failure, once (then None)."""
        if self.queue_error is None or self._error_taken:
            return None
        self._error_taken = True
        return self.queue_error


def _queue_loop(q: asyncio.Queue) -> asyncio.AbstractEventLoop:
    loop = getattr(q, "_loop", None) or getattr(q, "_get_loop", lambda: None)()
    if loop is None:
        raise RuntimeError("an asyncio.Queue given as response_queue needs async_infer")
    return loop


class _Responses:
    """What both iterators share: turning binding data into responses in
    order, marking the end, raising errors, cancelling."""

    def __init__(self, model: "Model", request: Any, sink: Any, forwarder: Optional[_Forwarder],
                 raise_on_error: bool, request_id: Optional[str]):
        self._model = model
        self._request = request
        self._sink = sink
        self._forwarder = forwarder
        self._raise_on_error = raise_on_error
        self._request_id = request_id
        self._complete = False

    def _make(self, flags: int, payload: Any) -> InferenceResponse:
        return InferenceResponse._from_c(self._model, flags, payload, self._request_id)

    def _deliver(self, response: InferenceResponse) -> InferenceResponse:
        if response.final:
            self._complete = True
        if self._raise_on_error and response.error is not None:
            _raise_without_cycle(response)
        return response

    def cancel(self) -> None:
        """Ask the core to cancel the request (best effort)."""
        if not self._complete:
            self._request.cancel()

    def __del__(self) -> None:
        # Dropped before the end, with no queue still reading: stop the work
        # nobody will read.
        try:
            if self._forwarder is None:
                self.cancel()
        except Exception:
            pass


class ResponseIterator(_Responses):
    """Iterates the responses of one request, in the order they arrive.

    Model.infer returns one. Built directly, as the reference's signature
    allows, ``request`` is an InferenceRequest and the constructor sends it
    (exactly as ``model.infer(request)`` would), with ``user_queue``, when
    given, in place of the request's response_queue.
    """

    def __init__(self, model: "Model", request: Any,
                 user_queue: Optional[queue.SimpleQueue] = None,
                 raise_on_error: bool = False, *, _sink: Any = None,
                 _request_id: Optional[str] = None):
        to_send = None
        if _sink is None:
            request, _sink, user_queue, _request_id = _prepare_public(model, request, user_queue)
            to_send = request
        forwarder = None
        if user_queue is not None:
            forwarder = _Forwarder(model, _sink, user_queue, _request_id, None)
            _sink.set_notifier(forwarder)
        super().__init__(model, request, _sink, forwarder, raise_on_error, _request_id)
        if to_send is not None:
            to_send.send(_sink)

    def __iter__(self) -> "ResponseIterator":
        return self

    def __next__(self) -> InferenceResponse:
        if self._complete:
            raise StopIteration
        forwarder = self._forwarder
        if forwarder is None:
            return self._deliver(self._make(*self._sink.get(-1.0)))  # waits without the GIL
        with forwarder.ready:
            while not forwarder.pending:
                forwarder.ready.wait(0.1)  # short waits: Ctrl-C stays possible
            error = forwarder.take_error()
            if error is not None:
                raise error  # the queue refused a response: the caller hears of it
            response = forwarder.pending.popleft()
        return self._deliver(response)


class AsyncResponseIterator(_Responses):
    """Asyncio iterator over the responses of one request, in arrival order.

    Model.async_infer returns one; built directly (in a running loop, or
    given ``loop``), it sends an InferenceRequest as ResponseIterator does.
    """

    def __init__(self, model: "Model", request: Any,
                 user_queue: Optional[asyncio.Queue] = None,
                 raise_on_error: bool = False,
                 loop: Optional[asyncio.AbstractEventLoop] = None, *,
                 _sink: Any = None, _request_id: Optional[str] = None):
        to_send = None
        if _sink is None:
            request, _sink, user_queue, _request_id = _prepare_public(model, request, user_queue)
            to_send = request
        sink = _sink
        self._loop = loop if loop is not None else asyncio.get_running_loop()
        self._waiter: Optional[asyncio.Future] = None
        self._token = 0
        waker = self._waker = _LoopWaker.of(self._loop)
        forwarder = None
        if user_queue is not None:
            forwarder = _Forwarder(model, sink, user_queue, _request_id, self._loop)
            # A weak reference: the sink must not hold this iterator alive.
            forwarder.on_item = functools.partial(waker.notify, weakref.ref(self))
            sink.set_notifier(forwarder)
        elif waker.notifier is not None:
            # Woken through the loop's eventfd: no GIL on the core's threads.
            self._token = waker.register(self)
            sink.set_loop_notifier(waker.notifier, self._token)
        else:
            sink.set_notifier(functools.partial(waker.notify, weakref.ref(self)), always=False)
        super().__init__(model, request, sink, forwarder, raise_on_error, _request_id)
        if to_send is not None:
            to_send.send(sink)

    def __aiter__(self) -> "AsyncResponseIterator":
        return self

    async def __anext__(self) -> InferenceResponse:
        if self._complete:
            raise StopAsyncIteration
        while True:
            response = self._take()
            if response is not None:
                if response.final and self._token:
                    self._waker.unregister(self._token)
                    self._token = 0
                return self._deliver(response)
            # Woken by _wake, which only runs on this loop's thread, after
            # this coroutine yields. Without a forwarder the sink notifies
            # only when armed; arm() refuses when a response already arrived.
            self._waiter = self._loop.create_future()
            try:
                if self._forwarder is not None or self._sink.arm():
                    await self._waiter
            finally:
                self._waiter = None

    def _take(self) -> Optional[InferenceResponse]:
        if self._forwarder is not None:
            self._forwarder.flush()
            error = self._forwarder.take_error()
            if error is not None:
                raise error  # the queue refused a response: the caller hears of it
            pending = self._forwarder.pending
            return pending.popleft() if pending else None
        item = self._sink.try_get()
        return None if item is None else self._make(*item)

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def __del__(self) -> None:
        if self._token:
            self._waker.unregister(self._token)
        super().__del__()


class _LoopWaker:
    """Wakes the iterators of one event loop, batching wake-ups: however many
    responses arrive between two turns of the loop, it is woken once. On
    loops with add_reader (the default ones, uvloop) through a LoopNotifier's
    eventfd, never taking the GIL on the core's threads; otherwise (and for
    response queues) through call_soon_threadsafe, with the GIL."""

    _by_loop: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopWaker]" = \
        weakref.WeakKeyDictionary()

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> "_LoopWaker":
        waker = cls._by_loop.get(loop)
        if waker is None:
            waker = cls._by_loop[loop] = cls(loop)
        return waker

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self._loop = weakref.ref(loop)
        self._ready: list = []
        self._scheduled = False
        self._iterators: dict = {}  # token -> weak reference to the iterator
        self._tokens = itertools.count(1)
        self.notifier = None
        try:
            notifier = _bindings.LoopNotifier()
            loop.add_reader(notifier.fd(), self._run_tokens)
            self.notifier = notifier
        except NotImplementedError:
            pass  # a loop without add_reader: notified under the GIL instead

    def register(self, it: "AsyncResponseIterator") -> int:
        token = next(self._tokens)
        self._iterators[token] = weakref.ref(it)
        return token

    def unregister(self, token: int) -> None:
        self._iterators.pop(token, None)

    def _run_tokens(self) -> None:
        iterators = self._iterators
        for token in self.notifier.take():
            ref = iterators.get(token)
            it = ref() if ref is not None else None
            if it is not None:
                it._wake()

    def notify(self, ref: "weakref.ref[AsyncResponseIterator]") -> None:
        # Runs on a core thread, with the GIL. _run clears the flag before it
        # takes the list, so an entry is always seen by a run.
        self._ready.append(ref)
        if not self._scheduled:
            loop = self._loop()
            if loop is not None and not loop.is_closed():
                self._scheduled = True
                loop.call_soon_threadsafe(self._run)

    def _run(self) -> None:
        self._scheduled = False
        ready, self._ready = self._ready, []
        for ref in ready:
            it = ref()
            if it is not None:
                it._wake()


def _prepare_public(model: "Model", request: Any, user_queue: Any) -> tuple[Any, Any, Any, Any]:
    """(binding request, sink, queue, request id) for an iterator built by
    the user around an InferenceRequest."""
    from tritonserver._request import InferenceRequest

    if not isinstance(request, InferenceRequest):
        raise InvalidArgumentError(
            f"request must be an InferenceRequest, not {type(request).__name__} "
            "(or call Model.infer / Model.async_infer)")
    c_request, sink, request_queue, request_id = model._prepare(request, {})
    return c_request, sink, user_queue if user_queue is not None else request_queue, request_id


def _raise_without_cycle(response: InferenceResponse) -> None:
    """Raise the response's error without a frame that refers to it.

    A raised exception's traceback holds the raising frame; a frame whose
    locals hold the exception (or the response holding it) would make a
    reference cycle that keeps the response alive until the garbage
    collector runs.
    """
    error = response.error
    response.error = None
    try:
        raise error
    finally:
        error = None
        response = None
