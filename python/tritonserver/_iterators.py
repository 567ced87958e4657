"""ResponseIterator and AsyncResponseIterator: the responses of one request,
in the order they arrive.

Both read the responses the binding's request collects. The sync iterator
waits on it without the GIL. The async one is woken through its event loop:
an eventfd the loop watches (a LoopNotifier, no GIL on the core's threads),
or call_soon_threadsafe on loops that cannot watch one. With a
response_queue, a forwarder (called on the core's thread, with the GIL)
moves every response into that queue on arrival as well.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import queue
import threading
import weakref
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Optional

from tritonserver._c import triton_bindings as _bindings
from tritonserver._errors import InvalidArgumentError, raise_taken
from tritonserver._request import InferenceRequest, submission_of
from tritonserver._submit import Submission
from tritonserver._response import InferenceResponse

if TYPE_CHECKING:
    from tritonserver._model import Model


class _Forwarder:
    """Delivers a request's responses on arrival: into the user's queue (as
    the reference asks: there as well as to the iterator) and into a deque
    the iterator reads. Called by the binding's queue on a core thread, with
    the GIL; the lock keeps the user's queue in arrival order."""

    def __init__(self, model: "Model", request: Any, user_queue: Any,
                 request_id: Optional[str], loop: Optional[asyncio.AbstractEventLoop]):
        self._model = model
        self._request = request
        self._user_queue = user_queue
        self._request_id = request_id
        self._loop = loop
        self.ready = threading.Condition()
        self.pending: collections.deque[InferenceResponse] = collections.deque()
        self.on_item: Optional[Callable[[], None]] = None
        # The user's queue failed: it gets nothing more. Its error waits in
        # _queue_error until the iterator raises it (once).
        self._queue_failed = False
        self._queue_error: Optional[BaseException] = None
        # An asyncio.Queue is filled on its loop's thread, by flush().
        self._unqueued: Optional[collections.deque[InferenceResponse]] = (
            collections.deque() if isinstance(self._user_queue, asyncio.Queue) else None)

    def __call__(self) -> None:
        with self.ready:
            while True:
                response = self._request.try_pop_response(self._model, self._request_id)
                if response is None:
                    break
                self.pending.append(response)  # first: a failing queue loses nothing
                if self._unqueued is not None:
                    self._unqueued.append(response)
                    loop = self._loop or _queue_loop(self._user_queue)
                    loop.call_soon_threadsafe(self.flush)
                else:
                    self._put(response)
                if response.final:
                    self._request.set_python_waker(None)  # the request no longer needs us
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

    def _put(self, response: InferenceResponse) -> None:
        # Never blocks (a full bounded queue would stall the core's thread,
        # and stop() with it) and never raises here: the first failure (a
        # full or closed queue) is kept for the iterator to raise, and the
        # queue gets nothing more; the iterator still has every response.
        if self._queue_failed:
            return
        try:
            put = getattr(self._user_queue, "put_nowait", None) or self._user_queue.put
            put(response)
        except Exception as e:
            self._queue_failed = True
            self._queue_error = e.with_traceback(None)  # no frames kept alive

    def raise_error(self) -> None:
        """Raise the queue's failure, once (then nothing), keeping no
        reference to it (raise_taken)."""
        raise_taken(self, "_queue_error")


def _queue_loop(q: asyncio.Queue[InferenceResponse]) -> asyncio.AbstractEventLoop:
    loop: Optional[asyncio.AbstractEventLoop] = (
        getattr(q, "_loop", None) or getattr(q, "_get_loop", lambda: None)())
    if loop is None:
        raise RuntimeError("an asyncio.Queue given as response_queue needs async_infer")
    return loop


def _public_submission(request: Any, user_queue: Any) -> Submission:
    """The submission of an iterator built by the user around a request."""
    if not isinstance(request, InferenceRequest):
        raise InvalidArgumentError(
            f"request must be an InferenceRequest, not {type(request).__name__} "
            "(or call Model.infer / Model.async_infer)")
    c_request, request_queue, request_id = submission_of(request)
    return c_request, user_queue if user_queue is not None else request_queue, request_id


class ResponseIterator(_bindings.SyncResponseStream):
    """Iterates the responses of one request, in the order they arrive.

    Model.infer returns one. Built directly, as the reference's signature
    allows, ``request`` is an InferenceRequest and the constructor sends it
    (exactly as ``model.infer(request)`` would), with ``user_queue``, when
    given, in place of the request's response_queue.
    """

    __slots__ = ()

    def __init__(self, model: "Model", request: Any,
                 user_queue: Optional[queue.SimpleQueue[InferenceResponse]] = None,
                 raise_on_error: bool = False):
        self._start(model, *_public_submission(request, user_queue), raise_on_error)

    def _start(self, model: "Model", request: Any, user_queue: Any, request_id: Optional[str],
               raise_on_error: bool) -> None:
        forwarder = None
        if user_queue is not None:
            forwarder = _Forwarder(model, request, user_queue, request_id, None)
            request.set_python_waker(forwarder)
        self._setup(model, request, request_id, raise_on_error, forwarder)
        request.send()  # the waker is in place first

    # __iter__ and __next__ are SyncResponseStream's: with no response_queue,
    # __next__ waits for the next response without the GIL and the binding
    # makes it; with one, it takes what the forwarder delivered (below).

    def _next_forwarded(self) -> InferenceResponse:
        forwarder: _Forwarder = self._forwarder
        with forwarder.ready:
            while not forwarder.pending:
                forwarder.ready.wait(0.1)  # short waits: Ctrl-C stays possible
            forwarder.raise_error()  # the queue refused a response: the caller hears of it
            return forwarder.pending.popleft()


class AsyncResponseIterator(_bindings.AsyncResponseStream):
    """Asyncio iterator over the responses of one request, in arrival order.

    Model.async_infer returns one; built directly (in a running loop, or
    given ``loop``), it sends an InferenceRequest as ResponseIterator does.
    """

    __slots__ = ()

    def __init__(self, model: "Model", request: Any,
                 user_queue: Optional[asyncio.Queue[InferenceResponse]] = None,
                 raise_on_error: bool = False,
                 loop: Optional[asyncio.AbstractEventLoop] = None):
        self._start(model, *_public_submission(request, user_queue), raise_on_error, loop)

    def _start(self, model: "Model", request: Any, user_queue: Any, request_id: Optional[str],
               raise_on_error: bool, loop: Optional[asyncio.AbstractEventLoop]) -> None:
        self._set_loop(loop if loop is not None else asyncio.get_running_loop())
        forwarder = None
        if user_queue is not None:
            forwarder = _Forwarder(model, request, user_queue, request_id, self._loop)
            # A weak reference: the request must not hold this iterator alive.
            forwarder.on_item = functools.partial(_LoopWaker.of(self._loop).notify,
                                                  weakref.ref(self))
            request.set_python_waker(forwarder)
        self._setup(model, request, request_id, raise_on_error, forwarder)
        request.send()  # a forwarder is in place first; other wakers when waiting

    # __aiter__ and __anext__ are AsyncResponseStream's: __anext__ returns an
    # awaitable that takes the next response, waiting through the loop's
    # LoopNotifier when it has not come; with a response_queue, or on a loop
    # without add_reader, it asks the two methods below.
    if TYPE_CHECKING:  # what they are to a type checker: the responses' types
        def __aiter__(self) -> "AsyncResponseIterator": ...

        def __anext__(self) -> Coroutine[Any, Any, InferenceResponse]: ...

    def _wait_on(self, waiter: asyncio.Future[None]) -> bool:
        """Have `waiter` completed at the next arrival (on this loop's
        thread); False when a response is already there. For a forwarder
        (its on_item wakes this iterator: _wake) and for loops without
        add_reader (a waker under the GIL)."""
        if self._forwarder is not None:
            return True
        if not self._python_waker:
            self._python_waker = True
            self._request.set_python_waker(
                functools.partial(_LoopWaker.of(self._loop).notify, weakref.ref(self)),
                always=False)
        return bool(self._request.arm())

    def _forwarded(self) -> Optional[InferenceResponse]:
        forwarder = self._forwarder
        assert forwarder is not None
        forwarder.flush()
        forwarder.raise_error()  # the queue refused a response: the caller hears of it
        pending = forwarder.pending
        return pending.popleft() if pending else None

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


def send_submission(model: "Model", submission: Submission, raise_on_error: bool,
                    asynchronous: bool = False) -> Any:
    """Send a prepared submission (tritonserver._submit) and return the
    iterator of its responses: an AsyncResponseIterator on the running loop
    (``asynchronous``), else a ResponseIterator. Model.infer's, Model.async_infer's
    and the frontends' way in."""
    request, user_queue, request_id = submission
    if asynchronous:
        stream = AsyncResponseIterator.__new__(AsyncResponseIterator)
        stream._start(model, request, user_queue, request_id, raise_on_error, None)
        return stream
    iterator = ResponseIterator.__new__(ResponseIterator)
    iterator._start(model, request, user_queue, request_id, raise_on_error)
    return iterator


class _LoopWaker:
    """Wakes the iterators of one event loop. On loops with add_reader (the
    default ones, uvloop) a LoopNotifier completes the waiting futures
    through an eventfd, never taking the GIL on the core's threads;
    otherwise (and for response queues) notify() runs on a core thread with
    the GIL and wakes them through call_soon_threadsafe. Either way, however
    many responses arrive between two turns of the loop, it is woken once."""

    _by_loop: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopWaker]" = \
        weakref.WeakKeyDictionary()

    # The waker last asked for (weakly: it lives as long as its loop), which
    # is nearly always the one asked for next: no WeakKeyDictionary lookup.
    _last: "Optional[weakref.ref[_LoopWaker]]" = None

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> "_LoopWaker":
        last = cls._last
        waker = last() if last is not None else None
        if waker is not None and waker._loop() is loop:
            return waker
        waker = cls._by_loop.get(loop)
        if waker is None:
            waker = cls._by_loop[loop] = cls(loop)
        cls._last = weakref.ref(waker)
        return waker

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self._loop = weakref.ref(loop)
        self._ready: list[weakref.ref[AsyncResponseIterator]] = []
        self._scheduled = False
        self.notifier: Optional[_bindings.LoopNotifier] = None
        try:
            notifier = _bindings.LoopNotifier()
            loop.add_reader(notifier.fd(), notifier.wake)
            self.notifier = notifier
        except NotImplementedError:
            pass  # a loop without add_reader: notified under the GIL instead

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


def _notifier_of(loop: asyncio.AbstractEventLoop) -> Optional[_bindings.LoopNotifier]:
    return _LoopWaker.of(loop).notifier


_bindings.set_loop_notifiers(_notifier_of)
