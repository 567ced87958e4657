"""The systems "echo-http" and "echo-grpc": what the server libraries under
our frontends allow, with no Triton behind them.

A child process (``python benchmarks/tsbench/echo_server.py --http-port P
--grpc-port Q``) serves the few calls tritonclient's workers make, on the
same server code our frontends run on, and answers an inference by echoing
its input as ``OUTPUT0``:

- HTTP: our HTTP/1.1 server (``frontends.httpbase.server``, through the
  ``HttpService`` the KServeHttp frontend uses, one event loop) with a small
  ASGI app: the two readiness endpoints and ``infer`` with binary tensors
  (the JSON inference header parsed, the reply's header written);
- gRPC: grpcio's server with the thread pool and message limits of
  KServeGrpc's defaults, and handlers that parse ``ModelInferRequest`` and
  build ``ModelInferResponse`` from our compiled protos.

The same client against this process and against the ``tritonserver``
executable gives the most a frontend on these libraries could reach:
``echo-* / tritonclient-*`` is that ceiling, next to ``serve-* /
tritonclient-*``. ``EchoServer`` starts and stops the process for run.py.

With ``--core-repository DIR`` (the systems "echo-core-*") the same process
also runs an in-process ``tritonserver.Server`` on DIR and answers each
inference with the model's output for the request's input: one
``model.async_infer`` (HTTP) or ``model.infer`` (gRPC) per request, and
nothing else of our frontends. That is the floor of any Python frontend
over the in-process API on these libraries: ``serve-* / echo-core-*`` is
how close ours come to it, ``echo-core-* / mlserver-*`` the most a Python
frontend over this core could reach against MLServer. HTTP takes JSON
tensors too (no ``Inference-Header-Content-Length``: ``data`` lists).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from typing import Any, Optional

if not __package__:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tsbench.server_process import HOST, MODEL, ServerProcess  # noqa: E402

READY_PATHS = ("/v2/health/ready", f"/v2/models/{MODEL}/ready")
INFER_PATH = f"/v2/models/{MODEL}/infer"
SERVICE = "inference.GRPCInferenceService"


class EchoServer(ServerProcess):
    """A running echo_server.py; use as a context manager. With
    ``core_repository``, every inference goes through that repository's
    model in an in-process Server."""

    def __init__(self, log_path: str, core_repository: Optional[str] = None):
        super().__init__(log_path)
        self.core_repository = core_repository
        self.label = "the echo server" + (" through the core" if core_repository else "")

    def _command(self) -> list:
        return [sys.executable, os.path.abspath(__file__), f"--host={HOST}",
                f"--http-port={self.http_port}", f"--grpc-port={self.grpc_port}"] + \
            ([f"--core-repository={self.core_repository}"] if self.core_repository else [])


class _Core:
    """The model of the in-process Server that echo-core-* answers through
    (None: plain echo)."""

    model: Any = None

    @classmethod
    def start(cls, repository: str) -> Any:
        import tritonserver

        server = tritonserver.Server(model_repository=repository)
        server.start(wait_until_ready=True, timeout=60)
        cls.model = server.model(MODEL)
        return server

    @classmethod
    def infer(cls, data: bytes) -> bytes:
        import numpy as np

        if cls.model is None:
            return data
        response = next(cls.model.infer(inputs={"INPUT0": np.frombuffer(data, np.float32)}))
        return bytes(memoryview(np.from_dlpack(response.outputs["OUTPUT0"])).cast("B"))

    @classmethod
    async def async_infer(cls, values: Any) -> Any:
        """values: bytes of FP32 (binary tensors) or a list (JSON); the same kind back."""
        import numpy as np

        if cls.model is None:
            return values
        binary = isinstance(values, bytes)
        x = np.frombuffer(values, np.float32) if binary else np.asarray(values, np.float32)
        async for response in cls.model.async_infer(inputs={"INPUT0": x}):
            y = np.from_dlpack(response.outputs["OUTPUT0"])
        return bytes(memoryview(y).cast("B")) if binary else y.tolist()


# ---- HTTP ------------------------------------------------------------------------------


async def _reply(send: Any, status: int, body: bytes, headers: list) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-length", str(len(body)).encode())] + headers})
    await send({"type": "http.response.body", "body": body})


async def _echo_http(body: bytes, header_length: int) -> tuple:
    """(reply body, its JSON header's length) for a binary-tensor request."""
    request = json.loads(body[:header_length])
    tensor = request["inputs"][0]
    size = int(tensor["parameters"]["binary_data_size"])
    data = body[header_length:header_length + size]
    if len(data) != size:
        raise ValueError("the body is shorter than binary_data_size")
    data = await _Core.async_infer(data)
    header = json.dumps({
        "model_name": MODEL, "model_version": "1",
        "outputs": [{"name": "OUTPUT0", "datatype": tensor["datatype"],
                     "shape": tensor["shape"], "parameters": {"binary_data_size": size}}],
    }, separators=(",", ":")).encode()
    return header + data, len(header)


async def _echo_json(body: bytes) -> bytes:
    """The reply to a request with JSON tensors."""
    tensor = json.loads(body)["inputs"][0]
    return json.dumps({
        "model_name": MODEL, "model_version": "1",
        "outputs": [{"name": "OUTPUT0", "datatype": tensor["datatype"], "shape": tensor["shape"],
                     "data": await _Core.async_infer(tensor["data"])}],
    }, separators=(",", ":")).encode()


async def echo_app(scope: dict, receive: Any, send: Any) -> None:
    """ASGI: the readiness endpoints, and ``infer`` echoing INPUT0."""
    if scope["type"] != "http":
        return
    path, method = scope["path"], scope["method"]
    if method == "GET" and path in READY_PATHS:
        await _reply(send, 200, b"", [])
        return
    if method != "POST" or path != INFER_PATH:
        await _reply(send, 404, b'{"error":"not found"}', [(b"content-type", b"application/json")])
        return
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    body = b"".join(chunks)
    length = dict(scope["headers"]).get(b"inference-header-content-length")
    try:
        if length is None:
            await _reply(send, 200, await _echo_json(body),
                         [(b"content-type", b"application/json")])
            return
        reply, header_length = await _echo_http(body, int(length))
    except (ValueError, KeyError, IndexError, TypeError) as e:
        await _reply(send, 400, json.dumps({"error": str(e)}).encode(),
                     [(b"content-type", b"application/json")])
        return
    await _reply(send, 200, reply, [(b"content-type", b"application/octet-stream"),
                                    (b"inference-header-content-length",
                                     str(header_length).encode())])


# ---- gRPC ------------------------------------------------------------------------------


def _grpc_server(host: str, port: int) -> Any:
    import concurrent.futures

    import grpc  # type: ignore[import-untyped]

    from tritonserver.frontends import KServeGrpc
    from tritonserver.frontends.grpc.protos import messages

    m = messages()
    defaults = KServeGrpc.Options()

    def model_ready(data: bytes, context: Any) -> Any:
        return m.ModelReadyResponse(ready=m.ModelReadyRequest.FromString(data).name == MODEL)

    def model_infer(data: bytes, context: Any) -> Any:
        request = m.ModelInferRequest.FromString(data)
        tensor = request.inputs[0]
        response = m.ModelInferResponse(model_name=MODEL, model_version="1", id=request.id)
        output = response.outputs.add()
        output.name = "OUTPUT0"
        output.datatype = tensor.datatype
        output.shape.extend(tensor.shape)
        response.raw_output_contents.append(_Core.infer(request.raw_input_contents[0]))
        return response

    handlers = {
        "ModelReady": grpc.unary_unary_rpc_method_handler(
            model_ready, response_serializer=m.ModelReadyResponse.SerializeToString),
        "ModelInfer": grpc.unary_unary_rpc_method_handler(
            model_infer, response_serializer=m.ModelInferResponse.SerializeToString),
    }
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=defaults.infer_thread_count)
    server = grpc.server(pool, options=[
        ("grpc.max_receive_message_length", defaults.max_input_size),
        ("grpc.max_send_message_length", -1)])
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, handlers)])
    if not server.add_insecure_port(f"{host}:{port}"):
        raise SystemExit(f"echo server: cannot listen on {host}:{port}")
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=HOST)
    parser.add_argument("--http-port", type=int, required=True)
    parser.add_argument("--grpc-port", type=int, required=True)
    parser.add_argument("--core-repository",
                        help="answer through this repository's model in an in-process Server")
    args = parser.parse_args()
    core = _Core.start(args.core_repository) if args.core_repository else None

    from tritonserver.frontends._runner import HttpService

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    grpc_server = _grpc_server(args.host, args.grpc_port)
    grpc_server.start()
    http = HttpService("echo-http", echo_app, args.host, args.http_port, False, 1, 1.0)
    http.start()
    try:
        while not stop.wait(0.5):
            pass
    finally:
        http.stop()
        grpc_server.stop(1.0).wait(5.0)
        if core is not None:
            core.stop()


if __name__ == "__main__":
    main()
