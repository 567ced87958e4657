"""InferenceResponse and the iterators that deliver responses in order."""

from __future__ import annotations

import asyncio
import functools
import queue
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Union

from tritonserver._enums import DATA_TYPES, MEMORY_TYPES, RESPONSE_COMPLETE_FINAL
from tritonserver._errors import TritonError, error_from_code
from tritonserver._tensor import MemoryBuffer, Tensor

if TYPE_CHECKING:
    from tritonserver._model import Model


@dataclass
class InferenceResponse:
    """One response of a request: outputs, or the error that replaced them.

    The last response of a request has ``final=True``. A decoupled model may
    end with a final response that carries nothing else.
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
        error, c_id, _, _, parameters, outputs = payload
        response = InferenceResponse(model=model, request_id=c_id or request_id,
                                     parameters=parameters, final=final)
        if error is not None:
            response.error = error_from_code(*error)
        for name, dtype, shape, ptr, size, mtype, mtype_id, owner in outputs:
            # `owner` holds the output memory: each tensor keeps it alive.
            buffer = MemoryBuffer(ptr, MEMORY_TYPES[mtype], mtype_id, size, owner)
            response.outputs[name] = Tensor(DATA_TYPES[dtype], shape, buffer)
        return response


class _Responses:
    """What both iterators share: turning binding data into responses in
    order, marking the end, raising errors, cancelling."""

    def __init__(self, model: "Model", request: Any, sink: Any, user_queue: Any,
                 raise_on_error: bool, request_id: Optional[str]):
        self._model = model
        self._request = request
        self._sink = sink
        self._user_queue = user_queue
        self._raise_on_error = raise_on_error
        self._request_id = request_id
        self._complete = False

    def _make(self, flags: int, payload: Any) -> InferenceResponse:
        response = InferenceResponse._from_c(self._model, flags, payload, self._request_id)
        if response.final:
            self._complete = True
        return response

    def _check(self, response: InferenceResponse) -> InferenceResponse:
        if self._raise_on_error and response.error is not None:
            _raise_without_cycle(response)
        return response

    def cancel(self) -> None:
        """Ask the core to cancel the request (best effort)."""
        if not self._complete:
            self._request.cancel()

    def __del__(self) -> None:
        # Dropped before the end: stop the work nobody will read.
        try:
            self.cancel()
        except Exception:
            pass


class ResponseIterator(_Responses):
    """Iterates the responses of one request, in the order they arrive."""

    def __init__(self, model: "Model", request: Any, sink: Any,
                 user_queue: Optional[queue.SimpleQueue] = None,
                 raise_on_error: bool = False, request_id: Optional[str] = None):
        super().__init__(model, request, sink, user_queue, raise_on_error, request_id)

    def __iter__(self) -> "ResponseIterator":
        return self

    def __next__(self) -> InferenceResponse:
        if self._complete:
            raise StopIteration
        response = self._make(*self._sink.get(-1.0))  # waits without the GIL
        if self._user_queue is not None:
            self._user_queue.put(response)
        return self._check(response)


class AsyncResponseIterator(_Responses):
    """Asyncio iterator over the responses of one request, in arrival order."""

    def __init__(self, model: "Model", request: Any, sink: Any,
                 user_queue: Optional[asyncio.Queue] = None,
                 raise_on_error: bool = False,
                 loop: Optional[asyncio.AbstractEventLoop] = None,
                 request_id: Optional[str] = None):
        super().__init__(model, request, sink, user_queue, raise_on_error, request_id)
        self._loop = loop if loop is not None else asyncio.get_running_loop()
        self._waiter: Optional[asyncio.Future] = None
        # The sink calls the notifier on a core thread; a weak reference keeps
        # the sink from holding this iterator alive.
        sink.set_notifier(functools.partial(_LoopWaker.of(self._loop).notify, weakref.ref(self)))

    def __aiter__(self) -> "AsyncResponseIterator":
        return self

    async def __anext__(self) -> InferenceResponse:
        if self._complete:
            raise StopAsyncIteration
        while True:
            item = self._sink.try_get()
            if item is not None:
                break
            # Woken by _wake, which only runs on this loop's thread, after
            # this coroutine yields: no response can slip between the two.
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        response = self._make(*item)
        if self._user_queue is not None:
            await self._user_queue.put(response)
        return self._check(response)

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


class _LoopWaker:
    """Wakes the iterators of one event loop, batching wake-ups: however many
    responses arrive between two turns of the loop, it is woken once."""

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
