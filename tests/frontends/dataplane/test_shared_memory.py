"""The system shared memory extension, with the real tritonclient: regions
made by tritonclient.utils.shared_memory, registered over HTTP and gRPC,
inputs read from them and outputs written into them for every data type,
status and unregister, Triton's errors for bad input, and the in-process
API on Server. Then the CUDA shared memory extension as far as it goes
without a GPU (registrations refused, as by a Triton without GPUs; every
check made before a handle is opened; status, unregister and inference
naming CUDA regions): tests/gpu/test_cuda_shared_memory.py has the rest."""

from __future__ import annotations

import base64
import json
import os
import tempfile
import uuid
from typing import Any, Iterator

import numpy as np
import pytest

import tritonserver
from conftest import stop_within
from frontends import shm_models, support

pytest.importorskip("tritonclient.http")
pytest.importorskip("tritonclient.grpc")
shm = pytest.importorskip("tritonclient.utils.shared_memory")

import tritonclient.grpc as grpcclient  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402
from tritonclient.utils import InferenceServerException, serialize_byte_tensor  # noqa: E402

from tritonserver import _cuda  # noqa: E402
from tritonserver.frontends import KServeGrpc, KServeHttp  # noqa: E402

pytestmark = pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm")
PROTOCOLS = ["http", "grpc"]


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[tritonserver.Server, KServeHttp, KServeGrpc]]:
    folder = tempfile.mkdtemp(prefix="tritonserver-shm-")
    shm_models.write_repository(folder)
    shm_models.write_all_types(folder)
    server = tritonserver.Server(
        model_repository=folder, log_error=True, exit_timeout=10,
        model_control_mode=tritonserver.ModelControlMode.EXPLICIT,
        startup_models=["simple", "simple_string", "identity_all"],
    ).start(wait_until_ready=True, timeout=120)
    try:
        with support.client_shm_frontends(server) as (http, grpc):
            yield server, http, grpc
    finally:
        stop_within(server)


class Regions:
    """Shared memory objects made for one test, destroyed after it."""

    def __init__(self) -> None:
        self.handles: list[Any] = []

    def make(self, byte_size: int) -> tuple[str, Any]:
        key = f"/tritonserver-test-{uuid.uuid4().hex[:12]}"
        handle = shm.create_shared_memory_region(key[1:], key, byte_size)
        self.handles.append(handle)
        return key, handle

    def close(self) -> None:
        for handle in self.handles:
            shm.destroy_shared_memory_region(handle)


@pytest.fixture
def regions(served: Any) -> Iterator[Regions]:
    made = Regions()
    try:
        yield made
    finally:
        served[0].unregister_system_shared_memory()
        made.close()


def client(protocol: str, served: Any) -> Any:
    if protocol == "http":
        return httpclient.InferenceServerClient(served[1].url)
    return grpcclient.InferenceServerClient(served[2].url)


def lib(protocol: str) -> Any:
    return httpclient if protocol == "http" else grpcclient


def status_names(protocol: str, status: Any) -> list[str]:
    if protocol == "http":
        return sorted(region["name"] for region in status)
    return sorted(status.regions.keys())


def assert_no_data(protocol: str, result: Any, name: str) -> None:
    """An output written into a region comes back without data, as from Triton."""
    if protocol == "http":
        output = result.get_output(name)
        assert "data" not in output and "parameters" not in output, output
    else:
        response = result.get_response()
        index = [o.name for o in response.outputs].index(name)
        assert response.raw_output_contents[index] == b""


def expect_error(call: Any, text: str, http_status: int, grpc_code: str) -> None:
    with pytest.raises(InferenceServerException) as info:
        call()
    error = info.value
    assert text in error.message(), error.message()
    status = str(error.status())
    assert status in (str(http_status), f"StatusCode.{grpc_code}"), status


def simple_request(protocol: str, region_in: str, region_out: str, out_size: int = 64,
                   out_offset: int = 0, in_offset: int = 0) -> tuple[list[Any], list[Any]]:
    m = lib(protocol)
    inputs = [m.InferInput("INPUT0", [1, 16], "INT32"), m.InferInput("INPUT1", [1, 16], "INT32")]
    inputs[0].set_shared_memory(region_in, 64, offset=in_offset)
    inputs[1].set_shared_memory(region_in, 64, offset=in_offset + 64)
    outputs = [m.InferRequestedOutput("OUTPUT0"), m.InferRequestedOutput("OUTPUT1")]
    outputs[0].set_shared_memory(region_out, out_size, offset=out_offset)
    outputs[1].set_shared_memory(region_out, 64, offset=64)
    return inputs, outputs


# ---- Registration, status, unregister ----------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_register_status_unregister(protocol: str, served: Any, regions: Regions) -> None:
    c = client(protocol, served)
    key_a, _ = regions.make(256)
    key_b, _ = regions.make(64)
    c.register_system_shared_memory("a", key_a, 128, offset=64)
    c.register_system_shared_memory("b", key_b, 64)
    assert status_names(protocol, c.get_system_shared_memory_status()) == ["a", "b"]
    one = c.get_system_shared_memory_status("a")
    if protocol == "http":
        assert one == [{"name": "a", "key": key_a, "offset": 64, "byte_size": 128}]
    else:
        region = one.regions["a"]
        assert (region.key, region.offset, region.byte_size) == (key_a, 64, 128)
    # The registry is the server's: in-process callers see the same regions.
    assert [r["name"] for r in served[0].system_shared_memory_status()] == ["a", "b"]
    c.unregister_system_shared_memory("a")
    assert status_names(protocol, c.get_system_shared_memory_status()) == ["b"]
    c.unregister_system_shared_memory("never-registered")  # no error, as in Triton
    c.unregister_system_shared_memory()
    assert status_names(protocol, c.get_system_shared_memory_status()) == []
    # No CUDA region: unregistering them all is a no-op (NVIDIA's programs do it).
    c.unregister_cuda_shared_memory()


def test_metadata_lists_both_shared_memory_extensions(served: Any) -> None:
    """As Triton's core lists them (a Triton without GPUs too)."""
    extensions = httpclient.InferenceServerClient(served[1].url).get_server_metadata()["extensions"]
    assert "system_shared_memory" in extensions
    assert "cuda_shared_memory" in extensions
    grpc_meta = grpcclient.InferenceServerClient(served[2].url).get_server_metadata()
    assert "system_shared_memory" in grpc_meta.extensions
    assert "cuda_shared_memory" in grpc_meta.extensions


# ---- Inference -------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_simple_inputs_and_outputs_in_regions(protocol: str, served: Any,
                                              regions: Regions) -> None:
    c = client(protocol, served)
    key_in, handle_in = regions.make(128)
    key_out, handle_out = regions.make(128)
    a = np.arange(16, dtype=np.int32)
    b = np.full(16, 3, dtype=np.int32)
    shm.set_shared_memory_region(handle_in, [a, b])
    c.register_system_shared_memory("in", key_in, 128)
    c.register_system_shared_memory("out", key_out, 128)
    inputs, outputs = simple_request(protocol, "in", "out")
    result = c.infer("simple", inputs, outputs=outputs)
    assert_no_data(protocol, result, "OUTPUT0")  # it is in the region
    out = result.get_output("OUTPUT0")
    shape = list(out["shape"] if protocol == "http" else out.shape)
    assert shape == [1, 16]
    total = shm.get_contents_as_numpy(handle_out, np.int32, [1, 16])
    diff = shm.get_contents_as_numpy(handle_out, np.int32, [1, 16], offset=64)
    np.testing.assert_array_equal(total[0], a + b)
    np.testing.assert_array_equal(diff[0], a - b)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_mixed_region_and_wire_tensors(protocol: str, served: Any, regions: Regions) -> None:
    """One input in a region, one on the wire; one output each way."""
    m = lib(protocol)
    c = client(protocol, served)
    key, handle = regions.make(128)
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.full((1, 16), 7, dtype=np.int32)
    shm.set_shared_memory_region(handle, [a])
    c.register_system_shared_memory("r", key, 128)
    inputs = [m.InferInput("INPUT0", [1, 16], "INT32"), m.InferInput("INPUT1", [1, 16], "INT32")]
    inputs[0].set_shared_memory("r", 64)
    inputs[1].set_data_from_numpy(b)
    outputs = [m.InferRequestedOutput("OUTPUT0"), m.InferRequestedOutput("OUTPUT1")]
    outputs[0].set_shared_memory("r", 64, offset=64)
    result = c.infer("simple", inputs, outputs=outputs)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    np.testing.assert_array_equal(shm.get_contents_as_numpy(handle, np.int32, [1, 16],
                                                            offset=64), a + b)


def _all_types_data() -> list[np.ndarray]:
    data = []
    for i, (datatype, dtype) in enumerate(shm_models.ALL_TYPES):
        if datatype == "BYTES":
            data.append(np.array([b"", b"one", "\u00e9t\u00e9".encode(), bytes(range(7))],
                                 dtype=object))
        elif datatype == "BOOL":
            data.append(np.array([True, False, True], dtype=bool))
        else:
            data.append((np.arange(5) * (i + 1)).astype(dtype))
    return data


def _byte_form(datatype: str, array: np.ndarray) -> bytes:
    if datatype == "BYTES":
        return bytes(serialize_byte_tensor(array).item())
    return array.tobytes()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_datatype_through_regions(protocol: str, served: Any, regions: Regions) -> None:
    """identity_all: 14 inputs, one per data type (BYTES included), read from
    one region at offsets, each output written into another."""
    m = lib(protocol)
    c = client(protocol, served)
    data = _all_types_data()
    blobs = [_byte_form(t, a) for (t, _), a in zip(shm_models.ALL_TYPES, data)]
    offsets = list(np.cumsum([0] + [len(b) for b in blobs[:-1]]))
    total = sum(len(b) for b in blobs)
    key_in, handle_in = regions.make(total)
    key_out, handle_out = regions.make(total + 64)
    for blob, offset in zip(blobs, offsets):
        shm.set_shared_memory_region(handle_in, [np.frombuffer(blob, np.uint8)],
                                     offset=int(offset))
    c.register_system_shared_memory("in", key_in, total)
    c.register_system_shared_memory("out", key_out, total + 64)
    inputs, outputs = [], []
    for i, ((datatype, _), array, blob, offset) in enumerate(
            zip(shm_models.ALL_TYPES, data, blobs, offsets)):
        tensor = m.InferInput(f"INPUT{i}", list(array.shape), datatype)
        tensor.set_shared_memory("in", len(blob), offset=int(offset))
        inputs.append(tensor)
        output = m.InferRequestedOutput(f"OUTPUT{i}")
        # BYTES gets 64 more bytes than it needs: an output may be smaller than its place.
        output.set_shared_memory("out", len(blob) + (64 if datatype == "BYTES" else 0),
                                 offset=int(offset))
        outputs.append(output)
    result = c.infer("identity_all", inputs, outputs=outputs)
    for i, ((datatype, dtype), array, offset) in enumerate(
            zip(shm_models.ALL_TYPES, data, offsets)):
        assert_no_data(protocol, result, f"OUTPUT{i}")
        got = shm.get_contents_as_numpy(handle_out, np.object_ if datatype == "BYTES"
                                        else np.dtype(dtype), list(array.shape),
                                        offset=int(offset))
        np.testing.assert_array_equal(got, array, err_msg=datatype)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_simple_string(protocol: str, served: Any, regions: Regions) -> None:
    m = lib(protocol)
    c = client(protocol, served)
    a = np.array([str(x).encode() for x in range(16)], dtype=object).reshape(1, 16)
    b = np.array([b"1"] * 16, dtype=object).reshape(1, 16)
    blob_a = _byte_form("BYTES", a)
    blob_b = _byte_form("BYTES", b)
    key_in, handle_in = regions.make(len(blob_a) + len(blob_b))
    key_out, handle_out = regions.make(256)
    shm.set_shared_memory_region(handle_in, [np.frombuffer(blob_a + blob_b, np.uint8)])
    c.register_system_shared_memory("in", key_in, len(blob_a) + len(blob_b))
    c.register_system_shared_memory("out", key_out, 256)
    inputs = [m.InferInput("INPUT0", [1, 16], "BYTES"), m.InferInput("INPUT1", [1, 16], "BYTES")]
    inputs[0].set_shared_memory("in", len(blob_a))
    inputs[1].set_shared_memory("in", len(blob_b), offset=len(blob_a))
    outputs = [m.InferRequestedOutput("OUTPUT0")]
    outputs[0].set_shared_memory("out", 256)
    c.infer("simple_string", inputs, outputs=outputs)
    got = shm.get_contents_as_numpy(handle_out, np.object_, [1, 16])
    assert [int(x) for x in got.reshape(-1)] == list(range(1, 17))


# ---- Bad input: Triton's texts and codes, the server stays live --------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_bad_registrations(protocol: str, served: Any, regions: Regions) -> None:
    c = client(protocol, served)
    key, _ = regions.make(64)
    expect_error(lambda: c.register_system_shared_memory("x", "/tritonserver-no-such-key", 8),
                 "Unable to open shared memory region: '/tritonserver-no-such-key'",
                 500, "INTERNAL")
    expect_error(lambda: c.register_system_shared_memory("x", "/../etc/passwd", 8),
                 "Unable to open shared memory region", 500, "INTERNAL")
    expect_error(lambda: c.register_system_shared_memory("x", key, 65),
                 "failed to register shared memory region 'x': invalid args",
                 400, "INVALID_ARGUMENT")
    expect_error(lambda: c.register_system_shared_memory("x", key, 32, offset=40),
                 "failed to register shared memory region 'x': invalid args",
                 400, "INVALID_ARGUMENT")
    expect_error(lambda: c.register_system_shared_memory(
        "x", "/triton_python_backend_shm_region_1", 8),
        "as the key contains the reserved prefix", 400, "INVALID_ARGUMENT")
    c.register_system_shared_memory("x", key, 64)
    expect_error(lambda: c.register_system_shared_memory("x", key, 64),
                 "shared memory region 'x' already in manager", 400, "ALREADY_EXISTS")
    expect_error(lambda: c.get_system_shared_memory_status("nope"),
                 "Unable to find system shared memory region: 'nope'", 404, "NOT_FOUND")
    assert c.is_server_live()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_bad_inference(protocol: str, served: Any, regions: Regions) -> None:
    c = client(protocol, served)
    key, handle = regions.make(128)
    shm.set_shared_memory_region(handle, [np.zeros(32, np.int32)])
    c.register_system_shared_memory("r", key, 128)
    inputs, outputs = simple_request(protocol, "nope", "r")
    expect_error(lambda: c.infer("simple", inputs, outputs=outputs),
                 "Unable to find shared memory region: 'nope'", 404, "NOT_FOUND")
    inputs, outputs = simple_request(protocol, "r", "r", in_offset=100)
    expect_error(lambda: c.infer("simple", inputs, outputs=outputs),
                 "Invalid offset + byte size for shared memory region: 'r'",
                 400, "INVALID_ARGUMENT")
    inputs, outputs = simple_request(protocol, "r", "r", in_offset=128)
    expect_error(lambda: c.infer("simple", inputs, outputs=outputs),
                 "Invalid offset for shared memory region: 'r'", 400, "INVALID_ARGUMENT")
    inputs, outputs = simple_request(protocol, "r", "r", out_size=32)
    expect_error(lambda: c.infer("simple", inputs, outputs=outputs),
                 "shared memory size specified with the request for output 'OUTPUT0' "
                 "(32 bytes) should be at least 64 bytes to hold the results", 500, "INTERNAL")
    inputs, outputs = simple_request(protocol, "r", "nope")
    expect_error(lambda: c.infer("simple", inputs, outputs=outputs),
                 "Unable to find shared memory region: 'nope'", 404, "NOT_FOUND")
    # A size that does not match the shape is the shape's error.
    m = lib(protocol)
    inputs, outputs = simple_request(protocol, "r", "r")
    inputs[0] = m.InferInput("INPUT0", [1, 16], "INT32")
    inputs[0].set_shared_memory("r", 60)
    expect_error(lambda: c.infer("simple", inputs, outputs=outputs), "INPUT0",
                 400, "INVALID_ARGUMENT")
    assert c.is_server_live()
    inputs, outputs = simple_request(protocol, "r", "r")
    c.infer("simple", inputs, outputs=outputs)  # still serving


def test_http_parameter_conflicts(served: Any, regions: Regions) -> None:
    import json
    import urllib.error
    import urllib.request

    key, _ = regions.make(128)
    served[0].register_system_shared_memory("r", key, 128)

    def post(body: dict[str, Any]) -> tuple[int, str]:
        request = urllib.request.Request(f"http://{served[1].url}/v2/models/simple/infer",
                                         data=json.dumps(body).encode(), method="POST")
        try:
            with urllib.request.urlopen(request) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    shm_params = {"shared_memory_region": "r", "shared_memory_byte_size": 64}
    both = {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": [0] * 16,
            "parameters": shm_params}
    status, text = post({"inputs": [both]})
    assert status == 400 and "Input must set only one of the following fields" in text
    ok = {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "parameters": shm_params}
    status, text = post({"inputs": [ok, dict(ok, name="INPUT1")], "outputs": [
        {"name": "OUTPUT0", "parameters": dict(shm_params, binary_data=True)}]})
    assert status == 400 and "can't set both 'shared_memory_region' and 'binary_data'" in text
    bad = dict(ok, parameters={"shared_memory_region": 3, "shared_memory_byte_size": 64})
    status, text = post({"inputs": [bad]})
    assert status == 400 and "Unable to parse 'shared_memory_region'" in text


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_restricted(protocol: str, served: Any, regions: Regions) -> None:
    server = served[0]
    if protocol == "http":
        frontend: Any = KServeHttp(server, KServeHttp.Options(
            port=0, restricted_features=["shared-memory:admin=secret"])).start()
        plain = httpclient.InferenceServerClient(frontend.url)
    else:
        frontend = KServeGrpc(server, KServeGrpc.Options(
            port=0, restricted_features=["shared-memory:admin=secret"])).start()
        plain = grpcclient.InferenceServerClient(frontend.url)
    try:
        expect_error(lambda: plain.get_system_shared_memory_status(), "restricted",
                     403, "UNAVAILABLE")
        headers = {"admin": "secret"} if protocol == "http" else \
            {"triton-grpc-protocol-admin": "secret"}
        plain.get_system_shared_memory_status(headers=headers)
    finally:
        frontend.stop(timeout=5)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_unregister_while_in_use(protocol: str, served: Any, regions: Regions) -> None:
    """The unregister succeeds and frees the name at once (Triton would keep
    it until the users end); a tensor over the old region still reads it."""
    server = served[0]
    key, handle = regions.make(128)
    shm.set_shared_memory_region(handle, [np.arange(16, dtype=np.int32)])
    server.register_system_shared_memory("busy", key, 128)
    held = server.system_shared_memory_tensor("busy", tritonserver.DataType.INT32, [16])
    c = client(protocol, served)
    c.unregister_system_shared_memory("busy")
    assert status_names(protocol, c.get_system_shared_memory_status()) == []
    c.register_system_shared_memory("busy", key, 64)
    np.testing.assert_array_equal(np.from_dlpack(held), np.arange(16, dtype=np.int32))
    del held


# ---- In-process -----------------------------------------------------------------------------


def test_in_process_api(served: Any, regions: Regions) -> None:
    server = served[0]
    key, handle = regions.make(256)
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.full((1, 16), 2, dtype=np.int32)
    shm.set_shared_memory_region(handle, [a, b])
    server.register_system_shared_memory("mem", key, 256)
    with pytest.raises(tritonserver.AlreadyExistsError):
        server.register_system_shared_memory("mem", key, 256)
    model = server.model("simple")
    inputs = {"INPUT0": server.system_shared_memory_tensor("mem", tritonserver.DataType.INT32,
                                                            [1, 16]),
              "INPUT1": server.system_shared_memory_tensor("mem", tritonserver.DataType.INT32,
                                                            [1, 16], offset=64)}
    # Triton's names of data types do too; anything else is an InvalidArgumentError.
    by_name = server.system_shared_memory_tensor("mem", "INT32", [1, 16])
    np.testing.assert_array_equal(np.from_dlpack(by_name), a)
    del by_name
    with pytest.raises(tritonserver.InvalidArgumentError, match="unknown data type 'INT33'"):
        server.system_shared_memory_tensor("mem", "INT33", [1, 16])
    allocator = server.system_shared_memory_outputs({"OUTPUT0": ("mem", 128, 64)})
    request = model.create_request(inputs=inputs, output_memory_allocator=allocator)
    response = list(model.infer(request))[0]
    np.testing.assert_array_equal(np.from_dlpack(response.outputs["OUTPUT1"]), a - b)
    np.testing.assert_array_equal(np.from_dlpack(response.outputs["OUTPUT0"]), a + b)
    # OUTPUT0 is the region's bytes.
    np.testing.assert_array_equal(shm.get_contents_as_numpy(handle, np.int32, [1, 16],
                                                            offset=128), a + b)
    with pytest.raises(tritonserver.NotFoundError, match="Unable to find shared memory"):
        server.system_shared_memory_outputs({"OUTPUT0": "nope"})
    too_small = server.system_shared_memory_outputs({"OUTPUT0": ("mem", 128, 8)})
    with pytest.raises(tritonserver.InternalError, match="should be at least 64 bytes"):
        list(model.infer(model.create_request(inputs={"INPUT0": a, "INPUT1": b},
                                              output_memory_allocator=too_small)))
    del inputs, allocator, request, response, too_small
    server.unregister_system_shared_memory("mem")
    assert server.system_shared_memory_status() == []
    with pytest.raises(tritonserver.NotFoundError):
        server.system_shared_memory_status("mem")


# ---- CUDA shared memory, without a GPU ----------------------------------------------------
# Where a GPU is seen, a handle made up here does not open: the registration
# is refused with Triton's "invalid args" instead (the CUDA error goes to the log).

HANDLE = bytes(range(64))  # 64 bytes: a cudaIpcMemHandle_t's size, no real allocation's
HANDLE_B64 = base64.b64encode(HANDLE)


def cuda_refusal(name: str) -> str:
    if _cuda.device_count() > 0:
        return "failed to register shared memory region: invalid args"
    return f"failed to register CUDA shared memory region: '{name}', GPUs not supported"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_cuda_register_refused_without_gpus(protocol: str, served: Any) -> None:
    """A well-formed registration: refused as a Triton without GPUs refuses
    it (400 / INVALID_ARGUMENT); nothing is registered, the server goes on."""
    c = client(protocol, served)
    expect_error(lambda: c.register_cuda_shared_memory("cuda0", HANDLE_B64, 0, 64),
                 cuda_refusal("cuda0"), 400, "INVALID_ARGUMENT")
    assert status_names(protocol, c.get_cuda_shared_memory_status()) == []
    assert served[0].cuda_shared_memory_status() == []
    assert c.is_server_live()


def _post_cuda_register(served: Any, name: str, body: Any) -> tuple[int, str]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    status, _, answer = support.request(served[1].port, "POST",
                                        f"/v2/cudasharedmemory/region/{name}/register", data)
    return status, json.loads(answer)["error"] if status != 200 else ""


def test_cuda_register_bodies_over_http(served: Any) -> None:
    """The body is read as Triton reads it, with its texts, before any GPU
    is asked for: a handle that is not 64 bytes once decoded, fields missing
    or of the wrong JSON type."""
    c = httpclient.InferenceServerClient(served[1].url)
    wrong_size = "'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t"
    for handle in (base64.b64encode(HANDLE[:63]), base64.b64encode(HANDLE + b"x"), b"!!!!",
                   b""):
        expect_error(lambda: c.register_cuda_shared_memory("bad", handle, 0, 64),
                     wrong_size, 400, "INVALID_ARGUMENT")
    # Triton's decoder skips what is not base64: line breaks in the handle are no error.
    spaced = HANDLE_B64.decode()
    spaced = spaced[:40] + "\n" + spaced[40:]
    good = {"raw_handle": {"b64": spaced}, "device_id": 0, "byte_size": 64}
    assert _post_cuda_register(served, "spaced", good) == (400, cuda_refusal("spaced"))
    b64 = HANDLE_B64.decode()
    for body, text in (
            ({"device_id": 0, "byte_size": 64},
             "Shared memory register request has no 'raw_handle' field"),
            ({"raw_handle": b64, "device_id": 0, "byte_size": 64},
             "attempt to access non-existing object member 'b64'"),
            ({"raw_handle": {"b64": 5}, "device_id": 0, "byte_size": 64},
             "attempt to access JSON non-string as string"),
            ({"raw_handle": {"b64": b64}, "device_id": 0},
             "attempt to access non-existing object member 'byte_size'"),
            ({"raw_handle": {"b64": b64}, "byte_size": 64},
             "attempt to access non-existing object member 'device_id'"),
            ({"raw_handle": {"b64": b64}, "device_id": -1, "byte_size": 64},
             "attempt to access JSON non-unsigned-integer as unsigned-integer"),
            ({"raw_handle": {"b64": b64}, "device_id": 0, "byte_size": "64"},
             "attempt to access JSON non-unsigned-integer as unsigned-integer"),
            (b"[1]", "the register request must be a JSON object"),
            (b"{", "failed to parse the register request JSON")):
        status, error = _post_cuda_register(served, "bad", body)
        assert status == 400 and text in error, (body, status, error)
    assert c.get_cuda_shared_memory_status() == []


def test_cuda_register_handle_over_grpc(served: Any) -> None:
    """gRPC carries the handle's raw bytes (the client decodes its base64);
    where no GPU is seen any registration is refused, whatever its handle."""
    c = grpcclient.InferenceServerClient(served[2].url)
    for handle in (HANDLE_B64, base64.b64encode(HANDLE[:10])):
        if _cuda.device_count() > 0 and handle != HANDLE_B64:
            text = "a CUDA IPC handle has 64 bytes, not 10"
        else:
            text = cuda_refusal("g")
        expect_error(lambda: c.register_cuda_shared_memory("g", handle, 0, 64), text,
                     400, "INVALID_ARGUMENT")
    assert len(c.get_cuda_shared_memory_status().regions) == 0


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_cuda_status_and_unregister(protocol: str, served: Any, regions: Regions) -> None:
    """One namespace, two kinds: a system region is not listed as CUDA, is
    named as such when asked for as CUDA, and CUDA unregisters leave it."""
    c = client(protocol, served)
    key, _ = regions.make(64)
    c.register_system_shared_memory("sys", key, 64)
    assert status_names(protocol, c.get_cuda_shared_memory_status()) == []
    expect_error(lambda: c.get_cuda_shared_memory_status("nope"),
                 "Unable to find cuda shared memory region: 'nope'", 404, "NOT_FOUND")
    expect_error(lambda: c.get_cuda_shared_memory_status("sys"),
                 "The region named 'sys' is registered as system shared memory, not CUDA "
                 "shared memory", 404, "NOT_FOUND")
    c.unregister_cuda_shared_memory("nope")  # unknown: no error, as in Triton
    c.unregister_cuda_shared_memory("sys")  # the other kind's: nothing done
    c.unregister_cuda_shared_memory()  # every CUDA region: none
    assert status_names(protocol, c.get_system_shared_memory_status()) == ["sys"]
    # Names are one namespace: a CUDA registration may not take a system region's.
    expect_error(lambda: c.register_cuda_shared_memory("sys", HANDLE_B64, 0, 64),
                 "shared memory region 'sys' already in manager", 400, "ALREADY_EXISTS")
    assert status_names(protocol, c.get_system_shared_memory_status()) == ["sys"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_infer_naming_unregistered_cuda_regions(protocol: str, served: Any) -> None:
    """A request names a region, whatever its kind: one never registered is
    Triton's NOT_FOUND, for inputs and outputs alike."""
    c = client(protocol, served)
    inputs, outputs = simple_request(protocol, "cuda_in", "cuda_out")
    expect_error(lambda: c.infer("simple", inputs, outputs=outputs),
                 "Unable to find shared memory region: 'cuda_in'", 404, "NOT_FOUND")
    m = lib(protocol)
    wire = [m.InferInput("INPUT0", [1, 16], "INT32"), m.InferInput("INPUT1", [1, 16], "INT32")]
    for tensor in wire:
        tensor.set_data_from_numpy(np.zeros((1, 16), np.int32))
    expect_error(lambda: c.infer("simple", wire, outputs=outputs),
                 "Unable to find shared memory region: 'cuda_out'", 404, "NOT_FOUND")
    assert c.is_server_live()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_cuda_shared_memory_refused_when_client_shm_off(protocol: str, served: Any) -> None:
    """A frontend that does not allow client shared memory refuses CUDA
    registrations and unregisters as it does system ones (Triton's 501 /
    UNIMPLEMENTED and text), before reading the body; status stays readable."""
    from tritonserver.frontends.dataplane.shared_memory import CLIENT_SHM_DISABLED

    server = served[0]
    if protocol == "http":
        frontend: Any = KServeHttp(server, KServeHttp.Options(port=0)).start()
        c: Any = httpclient.InferenceServerClient(frontend.url)
    else:
        frontend = KServeGrpc(server, KServeGrpc.Options(port=0)).start()
        c = grpcclient.InferenceServerClient(frontend.url)
    try:
        for call in (lambda: c.register_cuda_shared_memory("off", HANDLE_B64, 0, 64),
                     lambda: c.unregister_cuda_shared_memory("off"),
                     lambda: c.unregister_cuda_shared_memory()):
            expect_error(call, CLIENT_SHM_DISABLED, 501, "UNIMPLEMENTED")
        if protocol == "http":
            status, _, data = support.request(frontend.port, "POST",
                                              "/v2/cudasharedmemory/region/off/register",
                                              b"not json")
            assert status == 501 and json.loads(data) == {"error": CLIENT_SHM_DISABLED}
        assert status_names(protocol, c.get_cuda_shared_memory_status()) == []
    finally:
        frontend.stop(timeout=5)


def test_cuda_in_process_api_without_gpus(served: Any, regions: Regions) -> None:
    server = served[0]
    assert server.cuda_shared_memory_status() == []
    with pytest.raises(tritonserver.InvalidArgumentError) as refused:
        server.register_cuda_shared_memory("mine", HANDLE, 0, 64)
    assert cuda_refusal("mine") in str(refused.value)
    with pytest.raises(tritonserver.NotFoundError,
                       match="Unable to find cuda shared memory region: 'mine'"):
        server.cuda_shared_memory_status("mine")
    server.unregister_cuda_shared_memory("mine")
    server.unregister_cuda_shared_memory()
    # Arguments are checked before anything else, with what is wrong.
    for args, text in ((("", HANDLE, 0, 64), "'region name' is necessary"),
                       (("x", "not bytes", 0, 64), "raw_handle must be bytes"),
                       (("x", HANDLE, -1, 64), "device_id must be a non-negative int"),
                       (("x", HANDLE, 0, -64), "byte_size must be a non-negative int")):
        with pytest.raises(tritonserver.InvalidArgumentError, match=text):
            server.register_cuda_shared_memory(*args)
    # A system region is not a CUDA one for the CUDA helpers, nor the reverse.
    key, _ = regions.make(64)
    server.register_system_shared_memory("sys", key, 64)
    with pytest.raises(tritonserver.AlreadyExistsError, match="'sys' already in manager"):
        server.register_cuda_shared_memory("sys", HANDLE, 0, 64)
    not_cuda = "The region named 'sys' is registered as system shared memory, not CUDA"
    with pytest.raises(tritonserver.NotFoundError, match=not_cuda):
        server.cuda_shared_memory_status("sys")
    with pytest.raises(tritonserver.NotFoundError, match=not_cuda):
        server.cuda_shared_memory_tensor("sys", "INT32", [16])
    with pytest.raises(tritonserver.NotFoundError, match=not_cuda):
        server.cuda_shared_memory_outputs({"OUTPUT0": "sys"})
    with pytest.raises(tritonserver.NotFoundError, match="Unable to find shared memory"):
        server.cuda_shared_memory_tensor("nope", "INT32", [16])
    with pytest.raises(tritonserver.InvalidArgumentError, match="byte_size is needed"):
        server.cuda_shared_memory_tensor("sys", "BYTES", [1])
    server.unregister_cuda_shared_memory("sys")  # the other kind: left alone
    assert [r["name"] for r in server.system_shared_memory_status()] == ["sys"]
