"""Triton's CUDA shared memory extension on a device: regions made by
another process (CuPy: cudaMalloc, then cudaIpcGetMemHandle; a CUDA IPC
handle cannot be opened in the process that made it), registered over HTTP
and gRPC by tritonclient and in-process on Server; inputs read from them and
outputs written into them as GPU memory of the region's device, values
checked from the exporting process; status, unregister, and Triton's errors.

Every test is marked ``gpu`` and skips where no GPU is seen (tests/conftest.py);
tests/frontends/dataplane/test_shared_memory.py covers what runs without one."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from typing import Any, Iterator

import numpy as np
import pytest

import tritonserver
from tritonserver import MemoryType, _cuda

from conftest import failure_output, run_python, start_server, stop_within
from frontends import support

pytestmark = pytest.mark.gpu

cupy = pytest.importorskip("cupy")
pytest.importorskip("tritonclient.http")
pytest.importorskip("tritonclient.grpc")


def _devices() -> list[int]:
    """GPU 0 and, on a machine with more, the last one."""
    count = _cuda.device_count()
    return sorted({0, count - 1}) if count else [0]


# What both child processes share: device memory from cudaMalloc (not CuPy's
# pool, whose arrays may lie inside a larger allocation: an IPC handle names a
# whole allocation, and the server opens it at the allocation's base).
REGION = """
import numpy as np
from cupy.cuda import runtime


class Region:
    def __init__(self, size):
        self.size = size
        self.ptr = runtime.malloc(size)
        runtime.memset(self.ptr, 0, size)
        self.handle = runtime.ipcGetMemHandle(self.ptr)
        assert len(self.handle) == 64

    def write(self, offset, array):
        array = np.ascontiguousarray(array)
        runtime.memcpy(self.ptr + offset, array.ctypes.data, array.nbytes,
                       runtime.memcpyHostToDevice)

    def read(self, offset, dtype, count):
        out = np.empty(count, dtype)
        runtime.memcpy(out.ctypes.data, self.ptr + offset, out.nbytes,
                       runtime.memcpyDeviceToHost)
        return out

    def clear(self):
        runtime.memset(self.ptr, 0, self.size)

    def free(self):
        runtime.free(self.ptr)
"""


@pytest.fixture(scope="module")
def served(example_repo: str) -> Iterator[tuple[tritonserver.Server, Any, Any]]:
    server = start_server(model_repository=example_repo)
    try:
        with support.client_shm_frontends(server) as (http, grpc):
            yield server, http, grpc
    finally:
        server.unregister_cuda_shared_memory()
        stop_within(server)


# ---- In-process, on a region another process exported ---------------------------------

EXPORTER = REGION + """
import json
import os
import sys

runtime.setDevice(int(os.environ["CUDASHM_DEVICE"]))
regions = {"in": Region(128), "out": Region(128)}
regions["in"].write(0, np.arange(16, dtype=np.int32))
regions["in"].write(64, np.full(16, 3, dtype=np.int32))
print(json.dumps({name: r.handle.hex() for name, r in regions.items()}), flush=True)
for line in sys.stdin:
    words = line.split()
    if words[0] == "read":  # read <region> <offset>: 16 INT32
        values = regions[words[1]].read(int(words[2]), np.int32, 16)
        print(json.dumps(values.tolist()), flush=True)
    elif words[0] == "quit":
        break
for region in regions.values():
    region.free()
print("freed", flush=True)
"""


class Exporter:
    """A child process holding two regions on a GPU: "in" (INT32 0..15 at 0,
    sixteen 3s at 64) and "out" (zeros), 128 bytes each."""

    def __init__(self, device_id: int):
        env = dict(os.environ, CUDASHM_DEVICE=str(device_id))
        self.process = subprocess.Popen([sys.executable, "-c", textwrap.dedent(EXPORTER)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True, env=env)
        line = self.process.stdout.readline()  # type: ignore[union-attr]
        if not line:
            self.process.wait(timeout=30)
            pytest.fail(f"the exporter exited with {self.process.returncode}")
        self.handles = {name: bytes.fromhex(h) for name, h in json.loads(line).items()}

    def read(self, region: str, offset: int) -> np.ndarray:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"read {region} {offset}\n")
        self.process.stdin.flush()
        return np.array(json.loads(self.process.stdout.readline()), dtype=np.int32)

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                assert self.process.stdin is not None
                self.process.stdin.write("quit\n")
                self.process.stdin.flush()
                self.process.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait(timeout=30)


@pytest.mark.parametrize("device_id", _devices())
def test_in_process_api_on_another_process_region(served: Any, device_id: int) -> None:
    server = served[0]
    a = np.arange(16, dtype=np.int32)
    b = np.full(16, 3, dtype=np.int32)
    exporter = Exporter(device_id)
    try:
        server.register_cuda_shared_memory("ipc_in", exporter.handles["in"], device_id, 128)
        server.register_cuda_shared_memory("ipc_out", exporter.handles["out"], device_id, 128)
        assert server.cuda_shared_memory_status("ipc_in") == [
            {"name": "ipc_in", "device_id": device_id, "byte_size": 128}]
        assert sorted(r["name"] for r in server.cuda_shared_memory_status()) == \
            ["ipc_in", "ipc_out"]
        assert server.system_shared_memory_status() == []
        with pytest.raises(tritonserver.AlreadyExistsError,
                           match="shared memory region 'ipc_in' already in manager"):
            server.register_cuda_shared_memory("ipc_in", exporter.handles["in"], device_id, 128)
        with pytest.raises(tritonserver.AlreadyExistsError, match="already in manager"):
            server.register_system_shared_memory("ipc_in", "/no-such-key", 64)
        # No more than the allocation behind the handle may be named.
        with pytest.raises(tritonserver.InvalidArgumentError,
                           match="failed to register shared memory region 'too_big': invalid args"):
            server.register_cuda_shared_memory("too_big", exporter.handles["in"], device_id,
                                               1 << 40)
        assert "too_big" not in [r["name"] for r in server.cuda_shared_memory_status()]
        with pytest.raises(tritonserver.NotFoundError,
                           match="The region named 'ipc_in' is registered as CUDA shared "
                                 "memory, not system shared memory"):
            server.system_shared_memory_status("ipc_in")

        # Inputs: GPU memory of the region's device, in place.
        t0 = server.cuda_shared_memory_tensor("ipc_in", "INT32", [16])
        t1 = server.cuda_shared_memory_tensor("ipc_in", tritonserver.DataType.INT32, [16],
                                              offset=64)
        assert t0.memory_type == MemoryType.GPU and t0.memory_type_id == device_id
        assert t1.data_ptr == t0.data_ptr + 64
        np.testing.assert_array_equal(np.from_dlpack(t0.to_host()), a)
        with cupy.cuda.Device(device_id):
            np.testing.assert_array_equal(cupy.asnumpy(cupy.from_dlpack(t1)), b)

        # Outputs: written by the core into the other process's memory.
        model = server.model("add_sub_int32")
        allocator = server.cuda_shared_memory_outputs({"OUTPUT0": ("ipc_out", 0, 64),
                                                       "OUTPUT1": ("ipc_out", 64, 64)})
        request = model.create_request(inputs={"INPUT0": t0, "INPUT1": t1},
                                       output_memory_allocator=allocator)
        response = list(model.infer(request))[0]
        total = response.outputs["OUTPUT0"]
        assert total.memory_type == MemoryType.GPU and total.memory_type_id == device_id
        np.testing.assert_array_equal(np.from_dlpack(total.to_host()), a + b)
        np.testing.assert_array_equal(exporter.read("out", 0), a + b)
        np.testing.assert_array_equal(exporter.read("out", 64), a - b)
        del response, total, request, allocator

        # Triton's errors for places that do not fit.
        too_small = server.cuda_shared_memory_outputs({"OUTPUT0": ("ipc_out", 0, 32)})
        with pytest.raises(tritonserver.InternalError,
                           match="\\(32 bytes\\) should be at least 64 bytes"):
            list(model.infer(model.create_request(inputs={"INPUT0": a, "INPUT1": b},
                                                  output_memory_allocator=too_small)))
        with pytest.raises(tritonserver.InvalidArgumentError,
                           match="Invalid offset for shared memory region: 'ipc_out'"):
            server.cuda_shared_memory_outputs({"OUTPUT0": ("ipc_out", 128, 64)})
        with pytest.raises(tritonserver.InvalidArgumentError,
                           match="Invalid offset \\+ byte size for shared memory region"):
            server.cuda_shared_memory_tensor("ipc_in", "INT32", [16], offset=96)
        with pytest.raises(tritonserver.NotFoundError,
                           match="registered as CUDA shared memory, not system"):
            server.system_shared_memory_tensor("ipc_in", "INT32", [16])
        del too_small

        # Unregistered while a tensor over it lives: the name goes at once, the
        # mapping stays open until the tensor goes.
        server.unregister_cuda_shared_memory("ipc_in")
        assert [r["name"] for r in server.cuda_shared_memory_status()] == ["ipc_out"]
        np.testing.assert_array_equal(np.from_dlpack(t0.to_host()), a)
        del t0, t1
        server.register_cuda_shared_memory("ipc_in", exporter.handles["in"], device_id, 128)
        server.unregister_system_shared_memory()  # the other kind's: both stay
        assert len(server.cuda_shared_memory_status()) == 2
        server.unregister_cuda_shared_memory()
        assert server.cuda_shared_memory_status() == []
        with pytest.raises(tritonserver.NotFoundError,
                           match="Unable to find cuda shared memory region: 'ipc_in'"):
            server.cuda_shared_memory_status("ipc_in")
    finally:
        server.unregister_cuda_shared_memory()
        exporter.close()


# ---- HTTP and gRPC, from a client process ------------------------------------------------

CLIENT = REGION + """
import base64
import os
import queue

import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

DEVICE = int(os.environ["CUDASHM_DEVICE"])
URLS = {"http": os.environ["CUDASHM_HTTP"], "grpc": os.environ["CUDASHM_GRPC"]}
runtime.setDevice(DEVICE)
A = np.arange(16, dtype=np.int32)
B = np.full(16, 3, dtype=np.int32)


def expect(call, text):
    try:
        call()
    except InferenceServerException as e:
        assert text in e.message(), (text, e.message())
        return
    raise AssertionError("no error, expected: " + text)


def status_of(protocol, status):
    if protocol == "http":
        return {r["name"]: (r["device_id"], r["byte_size"]) for r in status}
    return {n: (r.device_id, r.byte_size) for n, r in status.regions.items()}


def add_sub(m, region_in, region_out, out_size=64, in_offset=0):
    inputs = [m.InferInput("INPUT0", [16], "INT32"), m.InferInput("INPUT1", [16], "INT32")]
    inputs[0].set_shared_memory(region_in, 64, offset=in_offset)
    inputs[1].set_shared_memory(region_in, 64, offset=in_offset + 64)
    outputs = [m.InferRequestedOutput("OUTPUT0"), m.InferRequestedOutput("OUTPUT1")]
    outputs[0].set_shared_memory(region_out, out_size)
    outputs[1].set_shared_memory(region_out, 64, offset=64)
    return inputs, outputs


def assert_no_data(protocol, result, name):
    if protocol == "http":
        output = result.get_output(name)
        assert "data" not in output and "parameters" not in output, output
        assert output["shape"] == [16], output
    else:
        response = result.get_response()
        index = [o.name for o in response.outputs].index(name)
        assert response.raw_output_contents[index] == b""
        assert list(response.outputs[index].shape) == [16]


def check(protocol):
    m = httpclient if protocol == "http" else grpcclient
    c = m.InferenceServerClient(URLS[protocol])
    c.unregister_cuda_shared_memory()
    rin, rout = Region(128), Region(128)
    rin.write(0, A)
    rin.write(64, B)
    name_in, name_out = "in_" + protocol, "out_" + protocol
    c.register_cuda_shared_memory(name_in, base64.b64encode(rin.handle), DEVICE, 128)
    c.register_cuda_shared_memory(name_out, base64.b64encode(rout.handle), DEVICE, 128)
    assert status_of(protocol, c.get_cuda_shared_memory_status()) == {
        name_in: (DEVICE, 128), name_out: (DEVICE, 128)}
    assert status_of(protocol, c.get_cuda_shared_memory_status(name_in)) == {
        name_in: (DEVICE, 128)}

    # Inputs and outputs in regions.
    inputs, outputs = add_sub(m, name_in, name_out)
    result = c.infer("add_sub_int32", inputs, outputs=outputs)
    assert_no_data(protocol, result, "OUTPUT0")
    assert_no_data(protocol, result, "OUTPUT1")
    np.testing.assert_array_equal(rout.read(0, np.int32, 16), A + B)
    np.testing.assert_array_equal(rout.read(64, np.int32, 16), A - B)

    # One input and one output in a region, the others on the wire (HTTP:
    # JSON and binary data each way).
    for binary in (False, True):
        rout.clear()
        inputs = [m.InferInput("INPUT0", [16], "INT32"), m.InferInput("INPUT1", [16], "INT32")]
        inputs[0].set_shared_memory(name_in, 64)
        if protocol == "http":
            inputs[1].set_data_from_numpy(B, binary_data=binary)
            plain = m.InferRequestedOutput("OUTPUT1", binary_data=not binary)
        else:
            inputs[1].set_data_from_numpy(B)
            plain = m.InferRequestedOutput("OUTPUT1")
        in_region = m.InferRequestedOutput("OUTPUT0")
        in_region.set_shared_memory(name_out, 64)
        result = c.infer("add_sub_int32", inputs, outputs=[in_region, plain])
        np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), A - B)
        np.testing.assert_array_equal(rout.read(0, np.int32, 16), A + B)

    # gRPC streams place tensors the same way.
    if protocol == "grpc":
        rout.clear()
        answers = queue.Queue()
        c.start_stream(callback=lambda result, error: answers.put((result, error)))
        try:
            inputs, outputs = add_sub(m, name_in, name_out)
            c.async_stream_infer("add_sub_int32", inputs, outputs=outputs)
            result, error = answers.get(timeout=60)
            assert error is None, error
        finally:
            c.stop_stream()
        np.testing.assert_array_equal(rout.read(0, np.int32, 16), A + B)
        np.testing.assert_array_equal(rout.read(64, np.int32, 16), A - B)

    # A larger tensor at offsets in both regions (identity_fp32).
    x = np.linspace(0, 1, 65536, dtype=np.float32)
    big_in, big_out = Region(x.nbytes + 256), Region(x.nbytes + 128)
    big_in.write(256, x)
    c.register_cuda_shared_memory("big_in", base64.b64encode(big_in.handle), DEVICE,
                                  big_in.size)
    c.register_cuda_shared_memory("big_out", base64.b64encode(big_out.handle), DEVICE,
                                  big_out.size)
    tensor = m.InferInput("INPUT0", [x.size], "FP32")
    tensor.set_shared_memory("big_in", x.nbytes, offset=256)
    output = m.InferRequestedOutput("OUTPUT0")
    output.set_shared_memory("big_out", x.nbytes, offset=128)
    c.infer("identity_fp32", [tensor], outputs=[output])
    np.testing.assert_array_equal(big_out.read(128, np.float32, x.size), x)

    # Triton's errors.
    expect(lambda: c.register_cuda_shared_memory(name_in, base64.b64encode(rin.handle),
                                                 DEVICE, 128),
           "shared memory region '" + name_in + "' already in manager")
    expect(lambda: c.register_system_shared_memory(name_in, "/tritonserver-unused", 64),
           "shared memory region '" + name_in + "' already in manager")
    expect(lambda: c.get_system_shared_memory_status(name_in),
           "The region named '" + name_in + "' is registered as CUDA shared memory, "
           "not system shared memory")
    inputs, outputs = add_sub(m, name_in, name_out, out_size=32)
    expect(lambda: c.infer("add_sub_int32", inputs, outputs=outputs),
           "shared memory size specified with the request for output 'OUTPUT0' (32 bytes) "
           "should be at least 64 bytes to hold the results")
    inputs, outputs = add_sub(m, name_in, name_out, in_offset=128)
    expect(lambda: c.infer("add_sub_int32", inputs, outputs=outputs),
           "Invalid offset for shared memory region: '" + name_in + "'")
    inputs, outputs = add_sub(m, name_in, name_out, in_offset=32)
    expect(lambda: c.infer("add_sub_int32", inputs, outputs=outputs),
           "Invalid offset + byte size for shared memory region: '" + name_in + "'")

    # Unregister: by name, then every CUDA region; a request naming one then fails.
    c.unregister_cuda_shared_memory(name_in)
    assert set(status_of(protocol, c.get_cuda_shared_memory_status())) == {
        name_out, "big_in", "big_out"}
    c.unregister_cuda_shared_memory()
    assert status_of(protocol, c.get_cuda_shared_memory_status()) == {}
    expect(lambda: c.get_cuda_shared_memory_status(name_in),
           "Unable to find cuda shared memory region: '" + name_in + "'")
    inputs, outputs = add_sub(m, name_in, name_out)
    expect(lambda: c.infer("add_sub_int32", inputs, outputs=outputs),
           "Unable to find shared memory region: '" + name_in + "'")

    # A handle that opens nothing: Triton's text, no detail (the server logs it).
    expect(lambda: c.register_cuda_shared_memory("made_up", base64.b64encode(bytes(range(64))),
                                                 DEVICE, 64),
           "failed to register shared memory region: invalid args")
    assert c.is_server_live()
    for region in (rin, rout, big_in, big_out):
        region.free()


for protocol in ("http", "grpc"):
    check(protocol)
    print("PASS", protocol, flush=True)
"""


@pytest.mark.parametrize("device_id", _devices())
def test_http_and_grpc_clients_with_cuda_regions(served: Any, device_id: int,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    """tritonclient in a child process: its regions registered over HTTP and
    gRPC, add_sub_int32 and identity_fp32 reading and writing them (HTTP JSON
    and binary beside them, gRPC ModelInfer and a stream), status,
    unregister, Triton's errors; the made-up handle's CUDA error in our log."""
    env = dict(os.environ, CUDASHM_DEVICE=str(device_id), CUDASHM_HTTP=served[1].url,
               CUDASHM_GRPC=served[2].url)
    with caplog.at_level(logging.ERROR, logger="tritonserver.shared_memory"):
        out = run_python(CLIENT, env=env, timeout=300)
    assert out.returncode == 0, failure_output(out, 4000, 8000)
    assert "PASS http" in out.stdout and "PASS grpc" in out.stdout, out.stdout
    assert any("failed to open CUDA IPC handle" in r.getMessage() for r in caplog.records)
    assert served[0].cuda_shared_memory_status() == []
    assert served[0].ready()
