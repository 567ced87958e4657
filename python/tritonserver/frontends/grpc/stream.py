"""ModelStreamInfer: the requests of a stream reach the core in the order
they came, and their responses are written in the order the core gave them.
"""

from __future__ import annotations

import collections
import queue
import threading
from typing import TYPE_CHECKING, Any, Iterator, cast

from tritonserver import InferenceRequest
from tritonserver.frontends.dataplane import state as c
from tritonserver.frontends.grpc.codec import call_from_request, infer_response, parse_message
from tritonserver.frontends.dataplane.inference import model_version, select_outputs
from tritonserver.frontends._restricted import Protocols

if TYPE_CHECKING:
    from tritonserver.frontends.grpc.service import _Service

_READ_DONE = object()


class _Sent:
    """One request of a stream, as its response queue: the core's callback
    puts each response here, and this puts itself on the stream's queue, so
    the stream writes responses in the order they came, with their request."""

    __slots__ = ("number", "out", "call", "empty_final", "entry", "version", "responses")

    def __init__(self, number: int, out: "queue.SimpleQueue[Any]", call: Any,
                 empty_final: bool, entry: Any, version: str):
        self.number, self.out, self.call = number, out, call
        self.empty_final, self.entry, self.version = empty_final, entry, version
        self.responses: collections.deque[Any] = collections.deque()

    def put(self, response: Any) -> None:
        self.responses.append(response)
        self.out.put(self)


def stream_infer(self: "_Service", requests: Iterator[bytes], context: Any
                 ) -> Iterator[Any]:
    """The requests of a stream reach the core in the order they came,
    and their responses are written in the order the core gave them, as
    Triton does: a sequence's requests run, and answer, in order. One
    queue per stream takes every request's responses on the core's
    callbacks, each tagged with its request (a thread per request would
    race to write them)."""
    if self.restrictions:
        try:
            self._check_restriction(Protocols.INFERENCE, context)
        except Exception as e:
            self._abort(context, e)
    if self.compress:
        import grpc  # type: ignore[import-untyped, unused-ignore]

        context.set_compression(grpc.Compression.Gzip)
    out: queue.SimpleQueue[Any] = queue.SimpleQueue()
    running: dict[int, Any] = {}  # request number -> its iterator, until final
    lock = threading.Lock()

    def read() -> None:
        try:
            for number, data in enumerate(requests):
                _stream_send(self, number, data, out, running, lock)
        except Exception:  # the stream broke (cancelled): end it
            pass
        finally:
            out.put(_READ_DONE)

    threading.Thread(target=read, name="tritonserver-grpc-stream", daemon=True).start()
    reading = True
    try:
        while True:
            with lock:
                if not reading and not running:
                    break
            item = out.get()
            if item is _READ_DONE:
                reading = False
                continue
            if not isinstance(item, _Sent):
                yield item  # a request that failed before the core had it
                continue
            sent, response = item, item.responses.popleft()
            if response.final:
                with lock:
                    iterator = running.pop(sent.number, None)
                if iterator is not None:
                    self.inflight.discard(iterator)
            message = _stream_message(self, sent, response)
            if message is not None:
                yield message
    finally:
        with lock:
            left = list(running.values())
            running.clear()
        for iterator in left:
            iterator.cancel()
            self.inflight.discard(iterator)


def _stream_send(self: "_Service", number: int, data: bytes, out: "queue.SimpleQueue[Any]",
                 running: dict[int, Any], lock: threading.Lock) -> None:
    """Parses one request of a stream and sends it to the core (on the
    stream's reader, in order); a failure is written in its place."""
    m = self.m
    try:
        call, empty_final = call_from_request(parse_message(m.ModelInferRequest, data))
        entry = self.state.entry(self.server, call.model_name, call.version)
        model = entry.model
        sent = _Sent(number, out, call, empty_final, entry,
                     model_version(entry, call.version))
        request = call.request(model) or InferenceRequest(model=model, inputs=call.inputs)
        request.response_queue = cast("queue.SimpleQueue[Any]", sent)  # it has put()
        with lock:  # in the table before a response can arrive
            running[number] = None
            iterator = model.infer(request, raise_on_error=False)
            running[number] = iterator
        self.inflight.add(iterator)
    except Exception as e:
        with lock:
            running.pop(number, None)
        error = c.unavailable_if_stopped(self.server, e)
        out.put(m.ModelStreamInferResponse(error_message=c.error_message(error)))


def _stream_message(self: "_Service", sent: "_Sent", response: Any) -> Any:
    """The stream message of one response (None: nothing to write)."""
    m, call = self.m, sent.call
    try:
        if response.error is not None:
            return m.ModelStreamInferResponse(error_message=c.error_message(response.error))
        if not response.outputs and not response.parameters and response.final \
                and sent.entry.decoupled:
            if not sent.empty_final:
                return None
            message = m.ModelInferResponse(model_name=call.model_name,
                                           model_version=sent.version, id=call.request_id)
            message.parameters["triton_final_response"].bool_param = True
            return m.ModelStreamInferResponse(infer_response=message)
        select_outputs(response, call.outputs, call.model_name)
        if call.classification is not None:
            call.classification.apply(response)
        message = infer_response(m, response, call, sent.version)
        message.parameters["triton_final_response"].bool_param = response.final
        return m.ModelStreamInferResponse(infer_response=message)
    except Exception as e:
        error = c.unavailable_if_stopped(self.server, e)
        return m.ModelStreamInferResponse(error_message=c.error_message(error))
