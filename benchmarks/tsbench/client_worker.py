"""Worker: the four workloads through tritonclient against the `tritonserver`
executable (systems "tritonclient-http" and "tritonclient-grpc").

Run by benchmarks/run.py with the interpreter of the private client venv
(see tsbench/clientenv.py), against a server it started on 127.0.0.1:

    python benchmarks/tsbench/client_worker.py --protocol http --url 127.0.0.1:PORT

sync, large16MiB and threads4 use the synchronous client (one client per
thread); async64 uses the asyncio client (tritonclient.http.aio or
tritonclient.grpc.aio). Tensors travel as binary data (as JSON with
--json-tensors, HTTP only: the systems "*-http-json"), and every call builds
its InferInput from the numpy array and reads the output with as_numpy, as
an application would. large16MiB-shm registers two regions of
tritonclient.utils.shared_memory and infers with input and output in them. Prints one JSON line on stdout. Imports neither
tritonserver nor anything outside the standard library, numpy and
tritonclient.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Optional

if not __package__:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from tsbench import loops  # noqa: E402

MODEL = "identity_fp32"
TIMEOUT_S = 60.0


class TritonClient(loops.System):
    def __init__(self, protocol: str, url: str, json_tensors: bool = False):
        self.protocol = protocol
        self.url = url
        self.name = f"tritonclient-{protocol}" + ("-json" if json_tensors else "")
        # tritonclient.http's binary_data flags; gRPC has none.
        self.binary = {"binary_data": not json_tensors} if protocol == "http" else {}
        self._shm: Optional[_ShmCall] = None
        if protocol == "http":
            import tritonclient.http as sync_module
            import tritonclient.http.aio as aio_module
        else:
            import tritonclient.grpc as sync_module
            import tritonclient.grpc.aio as aio_module
        self.sync_module = sync_module
        self.aio_module = aio_module
        self._clients: list = []
        self.client = self._new_client()
        limit = time.monotonic() + TIMEOUT_S
        while not self._ready(self.client):
            if time.monotonic() > limit:
                raise SystemExit(f"{self.name}: the server at {url} is not ready")
            time.sleep(0.05)

    def _ready(self, client) -> bool:
        try:
            return bool(client.is_model_ready(MODEL))
        except Exception:
            return False

    def _new_client(self, owned: bool = True):
        if self.protocol == "http":
            client = self.sync_module.InferenceServerClient(
                self.url, connection_timeout=TIMEOUT_S, network_timeout=TIMEOUT_S)
        else:
            client = self.sync_module.InferenceServerClient(self.url)
        if owned:
            self._clients.append(client)
        return client

    def _call_for(self, client, x: np.ndarray) -> "_SyncCall":
        return _SyncCall(self.sync_module, client, x,
                         {} if self.protocol == "http" else {"client_timeout": TIMEOUT_S},
                         self.binary)

    def sync_call(self, x: np.ndarray) -> loops.Call:
        return self._call_for(self.client, x)

    def thread_call_factories(self, x: np.ndarray, n: int) -> list:
        # A client per thread, made on that thread (the HTTP client's gevent
        # sockets belong to the thread that made them) and closed there.
        def factory() -> loops.Call:
            return self._call_for(self._new_client(owned=False), x)

        return [factory] * n

    @contextlib.asynccontextmanager
    async def async_session(self, x: np.ndarray):
        m = self.sync_module  # InferInput and friends are shared with .aio
        shape = list(x.shape)
        if self.protocol == "http":
            client = self.aio_module.InferenceServerClient(
                self.url, conn_limit=loops.ASYNC_IN_FLIGHT, conn_timeout=TIMEOUT_S)
            options: dict = {}  # conn_timeout bounds each call (aiohttp total timeout)
        else:
            client = self.aio_module.InferenceServerClient(self.url)
            options = {"client_timeout": TIMEOUT_S}

        binary = self.binary
        if binary.get("binary_data") is False:
            # tritonclient.http.aio labels every body application/octet-stream, which
            # MLServer refuses; JSON is JSON, for every server.
            options["headers"] = {"Content-Type": "application/json"}

        async def acall() -> np.ndarray:
            inp = m.InferInput("INPUT0", shape, "FP32")
            inp.set_data_from_numpy(x, **binary)
            result = await client.infer(
                MODEL, [inp], outputs=[m.InferRequestedOutput("OUTPUT0", **binary)], **options)
            return result.as_numpy("OUTPUT0")

        try:
            yield acall
        finally:
            await client.close()

    def shm_call(self, x: np.ndarray) -> loops.Call:
        if self._shm is None:  # the regions are made and registered once
            self._shm = _ShmCall(self.sync_module, self.client, x)
        return self._shm

    def verify(self, x: np.ndarray) -> None:
        y = self.sync_call(x)()
        if y is None or y.dtype != np.float32 or not np.array_equal(y, x):
            raise SystemExit(f"{self.name}: the output differs from the input")

    def close(self) -> None:
        if self._shm is not None:
            self._shm.close()
        for client in self._clients:
            with contextlib.suppress(Exception):
                client.close()


class _SyncCall:
    """One inference through a synchronous client: build the input from the
    array, infer, read the output as numpy."""

    def __init__(self, module, client, x: np.ndarray, options: dict, binary: dict):
        self.module = module
        self.client = client
        self.x = x
        self.shape = list(x.shape)
        self.options = options
        self.binary = binary

    def __call__(self) -> np.ndarray:
        m = self.module
        inp = m.InferInput("INPUT0", self.shape, "FP32")
        inp.set_data_from_numpy(self.x, **self.binary)
        result = self.client.infer(
            MODEL, [inp], outputs=[m.InferRequestedOutput("OUTPUT0", **self.binary)],
            **self.options)
        return result.as_numpy("OUTPUT0")

    def close(self) -> None:
        self.client.close()


class _ShmCall:
    """One inference with input and output in system shared memory regions
    of tritonclient.utils.shared_memory, registered with the server. x is
    written into the input region once (a producer would have put it
    there); each call infers and returns the output as a view of its region."""

    def __init__(self, module, client, x: np.ndarray):
        import tritonclient.utils.shared_memory as shm

        self.shm = shm
        self.module = module
        self.client = client
        self.shape = list(x.shape)
        self.nbytes = x.nbytes
        self.names = [f"tsbench_{os.getpid()}_input", f"tsbench_{os.getpid()}_output"]
        self.handles = [shm.create_shared_memory_region(name, "/" + name, x.nbytes)
                        for name in self.names]
        shm.set_shared_memory_region(self.handles[0], [x])
        for name in self.names:
            client.register_system_shared_memory(name, "/" + name, x.nbytes)

    def __call__(self) -> np.ndarray:
        m = self.module
        inp = m.InferInput("INPUT0", self.shape, "FP32")
        inp.set_shared_memory(self.names[0], self.nbytes)
        out = m.InferRequestedOutput("OUTPUT0")
        out.set_shared_memory(self.names[1], self.nbytes)
        self.client.infer(MODEL, [inp], outputs=[out])
        return self.shm.get_contents_as_numpy(self.handles[1], np.float32, self.shape)

    def close(self) -> None:
        for name, handle in zip(self.names, self.handles):
            with contextlib.suppress(Exception):
                self.client.unregister_system_shared_memory(name)
            self.shm.destroy_shared_memory_region(handle)


def main() -> None:
    parser = loops.argument_parser(__doc__)
    parser.add_argument("--protocol", choices=("http", "grpc"), required=True)
    parser.add_argument("--url", required=True, help="host:port of the server")
    parser.add_argument("--json-tensors", action="store_true",
                        help="HTTP only: tensors as JSON, not binary data")
    args = parser.parse_args()
    if args.json_tensors and args.protocol != "http":
        parser.error("--json-tensors is for --protocol http")
    settings = loops.Settings(args)
    system = TritonClient(args.protocol, args.url, args.json_tensors)
    try:
        import tritonclient

        version = getattr(tritonclient, "__version__", None)
        if version is None:
            from importlib import metadata

            version = metadata.version("tritonclient")
        document = loops.run_rounds(system, settings, {"tritonclient_version": version})
    finally:
        system.close()
    loops.emit(document)


if __name__ == "__main__":
    main()
