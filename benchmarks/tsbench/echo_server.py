"""The systems "echo-http" and "echo-grpc": what the server libraries under
our frontends allow, with no Triton behind them.

A child process (``python benchmarks/tsbench/echo_server.py --http-port P
--grpc-port Q``) serves the few calls tritonclient's workers make, on the
same server code our frontends run on, and answers an inference by echoing
its input as ``OUTPUT0``:

- HTTP: our HTTP/1.1 server (``frontends._httpserver``, through the
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
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from typing import Any

if not __package__:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tsbench.server_process import HOST, MODEL, ServerProcess  # noqa: E402

READY_PATHS = ("/v2/health/ready", f"/v2/models/{MODEL}/ready")
INFER_PATH = f"/v2/models/{MODEL}/infer"
SERVICE = "inference.GRPCInferenceService"


class EchoServer(ServerProcess):
    """A running echo_server.py; use as a context manager."""

    label = "the echo server"

    def _command(self) -> list:
        return [sys.executable, os.path.abspath(__file__), f"--host={HOST}",
                f"--http-port={self.http_port}", f"--grpc-port={self.grpc_port}"]


# ---- HTTP ------------------------------------------------------------------------------


async def _reply(send: Any, status: int, body: bytes, headers: list) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-length", str(len(body)).encode())] + headers})
    await send({"type": "http.response.body", "body": body})


def _echo_http(body: bytes, header_length: int) -> tuple:
    """(reply body, its JSON header's length) for a binary-tensor request."""
    request = json.loads(body[:header_length])
    tensor = request["inputs"][0]
    size = int(tensor["parameters"]["binary_data_size"])
    data = body[header_length:header_length + size]
    if len(data) != size:
        raise ValueError("the body is shorter than binary_data_size")
    header = json.dumps({
        "model_name": MODEL, "model_version": "1",
        "outputs": [{"name": "OUTPUT0", "datatype": tensor["datatype"],
                     "shape": tensor["shape"], "parameters": {"binary_data_size": size}}],
    }, separators=(",", ":")).encode()
    return header + data, len(header)


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
        reply, header_length = _echo_http(body, int(length) if length else len(body))
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
    from tritonserver.frontends._protos import messages

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
        response.raw_output_contents.append(request.raw_input_contents[0])
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
    args = parser.parse_args()

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


if __name__ == "__main__":
    main()
