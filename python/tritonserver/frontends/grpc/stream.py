"""ModelStreamInfer: the requests of a stream reach the core in the order
they came, and their responses are written in the order the core gave them.
"""

from __future__ import annotations

import collections
import queue
import threading
import time
from typing import Any, Callable, Iterator, Optional

from tritonserver import Server
from tritonserver.frontends.dataplane import state as c
from tritonserver.frontends.dataplane.inference import (model_version, select_outputs,
                                                       send_request, trace_start, tracing)
from tritonserver.frontends.dataplane.headers import forward_headers
from tritonserver.frontends.dataplane.shared_memory import release_shared_memory
from tritonserver.frontends.grpc.codec import call_from_request, infer_response, parse_message
from tritonserver.frontends.grpc.protos import Messages

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


class InferStream:
    """One ModelStreamInfer stream: the requests reach the core in the order
    they came, and their responses are written in the order the core gave
    them, as Triton does: a sequence's requests run, and answer, in order.
    One queue per stream takes every request's responses on the core's
    callbacks, each tagged with its request (a thread per request would
    race to write them). ``inflight``: the service's set of running
    iterators (add, discard), which its stop cancels. ``forward``: the
    header forward pattern, ``headers``: the stream's metadata it is
    matched against, for each request."""

    forward: Any = None
    headers: tuple[tuple[str, Any], ...] = ()
    # Triton's triton_grpc_error mode: called with the first error a
    # response carries, it ends the call with that error's status (raises).
    end_on_error: Optional[Callable[[BaseException], None]] = None

    def __init__(self, server: Server, state: c.ServerState, messages: Messages,
                 inflight: Any, client_shm: bool = False):
        self.server, self.state, self.m, self.inflight = server, state, messages, inflight
        self.client_shm = client_shm  # its clients may use shared memory
        self.out: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.running: dict[int, Any] = {}  # request number -> its iterator, until final
        self.lock = threading.Lock()

    def responses(self, requests: Iterator[bytes]) -> Iterator[Any]:
        """The stream's messages, as the gRPC handler yields them."""
        threading.Thread(target=self._read, args=(requests,),
                         name="tritonserver-grpc-stream", daemon=True).start()
        reading = True
        try:
            while True:
                with self.lock:
                    if not reading and not self.running:
                        break
                item = self.out.get()
                if item is _READ_DONE:
                    reading = False
                    continue
                if not isinstance(item, _Sent):
                    yield item  # a request that failed before the core had it
                    continue
                sent, response = item, item.responses.popleft()
                if response.error is not None and self.end_on_error is not None:
                    release_shared_memory(sent.call)
                    self.end_on_error(response.error)  # raises; the finally cancels the rest
                if response.final:
                    with self.lock:
                        iterator = self.running.pop(sent.number, None)
                    if iterator is not None:
                        self.inflight.discard(iterator)
                    release_shared_memory(sent.call)  # before the client hears the answer
                message = self._message(sent, response)
                if message is not None:
                    yield message
        finally:
            with self.lock:
                left = list(self.running.values())
                self.running.clear()
            for iterator in left:
                if iterator is not None:
                    iterator.cancel()
                    self.inflight.discard(iterator)

    def cancel(self) -> None:
        """The stream ended (the gRPC call's termination callback): the
        client cancelled it (tritonclient's stop_stream(cancel_requests=True))
        or went away. Its running requests are cancelled, as Triton cancels
        them, so a model that watches for it stops; their final responses
        then end the stream. (A client that only stops writing keeps them
        running until they answer.)"""
        with self.lock:
            running = [i for i in self.running.values() if i is not None]
        for iterator in running:
            iterator.cancel()

    def _read(self, requests: Iterator[bytes]) -> None:
        try:
            for number, data in enumerate(requests):
                self._send(number, data)
        except Exception:  # the stream broke (cancelled): end it
            pass
        finally:
            self.out.put(_READ_DONE)

    def _send(self, number: int, data: bytes) -> None:
        """Parses one request of the stream and sends it to the core (on the
        stream's reader, in order); a failure is written in its place."""
        m = self.m
        read = time.monotonic_ns() if tracing(self.server) else 0
        try:
            call, empty_final = call_from_request(parse_message(m.ModelInferRequest, data))
            forward_headers(self.forward, self.headers, call.parameters)
            if read:  # the request's read timestamps, and the stream's trace context
                trace_start(call, self.headers, ("GRPC_WAITREAD_START", read),
                            ("GRPC_WAITREAD_END", time.monotonic_ns()))
            entry = self.state.entry(self.server, call.model_name, call.model_version)
            sent = _Sent(number, self.out, call, empty_final, entry,
                         model_version(entry, call.model_version))
            call.response_queue = sent  # it has put()
            with self.lock:  # in the table before a response can arrive
                self.running[number] = None
                iterator = send_request(call, self.server, entry, asynchronous=False,
                                        raise_on_error=False, client_shm=self.client_shm)
                self.running[number] = iterator
            # Its timestamps are given: the trace needs no more of the request,
            # whose records are exported once it is let go (call and _Sent
            # refer to each other until the stream's collection).
            call.traced = None
            self.inflight.add(iterator)
        except Exception as e:
            with self.lock:
                self.running.pop(number, None)
            error = c.unavailable_if_stopped(self.server, e)
            self.out.put(m.ModelStreamInferResponse(error_message=c.error_message(error)))

    def _message(self, sent: _Sent, response: Any) -> Any:
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
            select_outputs(response, call.requested_outputs, call.model_name)
            if call.classification is not None:
                call.classification.apply(response)
            message = infer_response(m, response, call, sent.version)
            message.parameters["triton_final_response"].bool_param = response.final
            return m.ModelStreamInferResponse(infer_response=message)
        except Exception as e:
            error = c.unavailable_if_stopped(self.server, e)
            return m.ModelStreamInferResponse(error_message=c.error_message(error))
