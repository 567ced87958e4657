"""InferenceResponse and the iterators that deliver responses in order."""

from __future__ import annotations

import asyncio
import queue
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Union

from tritonserver._enums import RESPONSE_COMPLETE_FINAL, DataType, MemoryType
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
            buffer = MemoryBuffer(ptr, MemoryType(mtype), mtype_id, size, owner)
            response.outputs[name] = Tensor(DataType(dtype), shape, buffer)
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
        self._queue: asyncio.Queue = asyncio.Queue()
        # The sink calls the notifier on a core thread (with the GIL); it only
        # schedules a drain on the loop. A weak reference keeps the sink from
        # holding this iterator alive.
        this = weakref.ref(self)
        loop_ref = self._loop

        def notify() -> None:
            loop_ref.call_soon_threadsafe(_drain, this)

        sink.set_notifier(notify)
        _drain(this)  # anything that arrived before the notifier was set

    def __aiter__(self) -> "AsyncResponseIterator":
        return self

    async def __anext__(self) -> InferenceResponse:
        if self._complete:
            raise StopAsyncIteration
        response = self._make(*await self._queue.get())
        if self._user_queue is not None:
            await self._user_queue.put(response)
        return self._check(response)


def _drain(ref: "weakref.ref[AsyncResponseIterator]") -> None:
    it = ref()
    if it is None:
        return
    while True:
        item = it._sink.try_get()
        if item is None:
            return
        it._queue.put_nowait(item)
        if item[0] & RESPONSE_COMPLETE_FINAL:
            it._sink.set_notifier(None)


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
