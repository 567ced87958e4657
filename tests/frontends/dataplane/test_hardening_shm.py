"""What Triton's QA (qa/L0_shared_memory, qa/L0_parameters, qa/L0_http's input
size limits) asks of a server, and serve once failed, each named after what
it prevents: shared memory spans outside their region or unlike their
tensor, a region unregistered under a request in flight, gRPC metadata not
forwarded (or forwarded when reserved), and a body over the size limit
answered otherwise than Triton does. Real core, real tritonclient."""

from __future__ import annotations

import concurrent.futures
import json
import os
import tempfile
import time
import uuid
from typing import Any, Callable, Iterator

import numpy as np
import pytest

import tritonserver
from conftest import copy_in_process
from frontends import support
from frontends.serve_process import Serve

pytest.importorskip("tritonclient.http")
pytest.importorskip("tritonclient.grpc")
shm = pytest.importorskip("tritonclient.utils.shared_memory")

import tritonclient.grpc as grpcclient  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

from tritonserver.frontends import KServeGrpc, KServeHttp  # noqa: E402

pytestmark = pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm")
PROTOCOLS = ["http", "grpc"]
SIZE_MAX = (1 << 64) - 1
DELAY_US = 2_000_000  # sleep_us's request in flight while the test unregisters


@pytest.fixture(scope="module")
def fronts(frontend_server: tritonserver.Server) -> Iterator[tuple[KServeHttp, KServeGrpc]]:
    """HTTP and gRPC with client shared memory on (it is off by default)."""
    http = KServeHttp(frontend_server, KServeHttp.Options(port=0, allow_client_shm=True)).start()
    grpc = KServeGrpc(frontend_server, KServeGrpc.Options(port=0, allow_client_shm=True)).start()
    try:
        yield http, grpc
    finally:
        http.stop(timeout=5)
        grpc.stop(timeout=5)


class Regions:
    """Shared memory objects made for one test; unregistered and destroyed after it."""

    def __init__(self) -> None:
        self.handles: list[Any] = []

    def make(self, byte_size: int) -> tuple[str, Any]:
        key = f"/tritonserver-hardening-{uuid.uuid4().hex[:12]}"
        handle = shm.create_shared_memory_region(key[1:], key, byte_size)
        self.handles.append(handle)
        return key, handle


@pytest.fixture
def regions(frontend_server: tritonserver.Server) -> Iterator[Regions]:
    made = Regions()
    try:
        yield made
    finally:
        frontend_server.unregister_system_shared_memory()
        for handle in made.handles:
            shm.destroy_shared_memory_region(handle)


def client(protocol: str, fronts: Any) -> Any:
    if protocol == "http":
        return httpclient.InferenceServerClient(fronts[0].url)
    return grpcclient.InferenceServerClient(fronts[1].url)


def lib(protocol: str) -> Any:
    return httpclient if protocol == "http" else grpcclient


def region_names(protocol: str, status: Any) -> list[str]:
    if protocol == "http":
        return sorted(region["name"] for region in status)
    return sorted(status.regions.keys())


def expect_error(call: Callable[[], Any], text: str, http_status: int, grpc_code: str) -> None:
    with pytest.raises(InferenceServerException) as info:
        call()
    assert text in info.value.message(), info.value.message()
    assert str(info.value.status()) in (str(http_status), f"StatusCode.{grpc_code}")


def add_sub_in_regions(protocol: str, in_size: int, out_offset: int = 0,
                       out_size: int = 64) -> tuple[list[Any], list[Any]]:
    """add_sub_int32 with INT32 [16] inputs in regions "in0"/"in1" (``in_size``
    bytes given for INPUT1) and its outputs in "out0"/"out1"."""
    m = lib(protocol)
    inputs = [m.InferInput("INPUT0", [16], "INT32"), m.InferInput("INPUT1", [16], "INT32")]
    inputs[0].set_shared_memory("in0", 64)
    inputs[1].set_shared_memory("in1", in_size)
    outputs = [m.InferRequestedOutput("OUTPUT0"), m.InferRequestedOutput("OUTPUT1")]
    outputs[0].set_shared_memory("out0", out_size, offset=out_offset)
    outputs[1].set_shared_memory("out1", 64)
    return inputs, outputs


def register_add_sub(c: Any, regions: Regions, in1_size: int = 64, out_size: int = 64) -> None:
    for name, size in (("in0", 64), ("in1", in1_size), ("out0", out_size), ("out1", 64)):
        key, handle = regions.make(size)
        if name.startswith("in"):
            shm.set_shared_memory_region(handle, [np.arange(size // 4, dtype=np.int32)])
        c.register_system_shared_memory(name, key, size)


# ---- Spans in regions (server PRs #8170, #8330, #8335) -----------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_shm_input_larger_than_its_shape_is_refused(protocol: str, fronts: Any,
                                                    regions: Regions) -> None:
    """A region span that is not what the input's shape takes (128 bytes for
    INT32 [16]) is refused in Triton's words (qa test_too_big_shm)."""
    c = client(protocol, fronts)
    register_add_sub(c, regions, in1_size=128)
    inputs, outputs = add_sub_in_regions(protocol, in_size=128)
    expect_error(lambda: c.infer("add_sub_int32", inputs, outputs=outputs),
                 "input byte size mismatch for input 'INPUT1' for model 'add_sub_int32'. "
                 "Expected 64, got 128", 400, "INVALID_ARGUMENT")
    inputs, outputs = add_sub_in_regions(protocol, in_size=64)
    c.infer("add_sub_int32", inputs, outputs=outputs)  # the right span still works


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_shm_offset_past_region_end_is_refused(protocol: str, fronts: Any,
                                               regions: Regions) -> None:
    """An output offset at or past its region's end, up to the largest
    unsigned 64-bit number HTTP can send (2**64 - 32, as qa
    test_infer_offset_out_of_bound), is Triton's "Invalid offset", not a
    parse error and never a write outside the region."""
    c = client(protocol, fronts)
    register_add_sub(c, regions)
    # The gRPC client refuses numbers past int64_param's range itself.
    offsets = [64, 1 << 63, SIZE_MAX - 31] if protocol == "http" else [64, (1 << 63) - 1]
    for offset in offsets:
        inputs, outputs = add_sub_in_regions(protocol, 64, out_offset=offset)
        expect_error(lambda: c.infer("add_sub_int32", inputs, outputs=outputs),
                     "Invalid offset for shared memory region: 'out0'", 400, "INVALID_ARGUMENT")
    inputs, outputs = add_sub_in_regions(protocol, 64, out_offset=1)
    expect_error(lambda: c.infer("add_sub_int32", inputs, outputs=outputs),
                 "Invalid offset + byte size for shared memory region: 'out0'",
                 400, "INVALID_ARGUMENT")


def test_shm_offset_plus_byte_size_wrapping_is_refused(fronts: Any, regions: Regions) -> None:
    """offset + byte_size past 2**64 - 1 (it would wrap in C++) is Triton's
    "Integer overflow detected" (qa test_infer_integer_overflow; over gRPC
    the client cannot send such numbers)."""
    c = client("http", fronts)
    register_add_sub(c, regions)
    byte_size = (1 << 64) - 32
    inputs, outputs = add_sub_in_regions("http", 64, out_offset=32, out_size=byte_size)
    expect_error(lambda: c.infer("add_sub_int32", inputs, outputs=outputs),
                 f"Integer overflow detected: byte_size ({byte_size}) + offset (32) exceeds "
                 f"maximum value ({SIZE_MAX}) for region 'out0'", 400, "INVALID_ARGUMENT")


# ---- Unregistering regions in use (Triton's awaiting_unregister) -------------------------


def _sleep_in_regions(protocol: str, url: str) -> Any:
    """sleep_us with DELAY_US in region "delay_in" and WAITED_US written to
    "delay_out" (its own client: run on a worker thread)."""
    if protocol == "http":
        body = json.dumps({
            "inputs": [{"name": "DELAY_US", "datatype": "INT64", "shape": [1], "parameters": {
                "shared_memory_region": "delay_in", "shared_memory_byte_size": 8}}],
            "outputs": [{"name": "WAITED_US", "parameters": {
                "shared_memory_region": "delay_out", "shared_memory_byte_size": 8}}],
        }).encode()
        port = int(url.rsplit(":", 1)[1])
        status, _, data = support.request(port, "POST", "/v2/models/sleep_us/infer", body,
                                          timeout=60)
        assert status == 200, data
        return data
    c = grpcclient.InferenceServerClient(url)
    try:
        delay = grpcclient.InferInput("DELAY_US", [1], "INT64")
        delay.set_shared_memory("delay_in", 8)
        waited = grpcclient.InferRequestedOutput("WAITED_US")
        waited.set_shared_memory("delay_out", 8)
        return c.infer("sleep_us", [delay], outputs=[waited])
    finally:
        c.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_unregister_during_inference_keeps_regions_until_requests_end(
        protocol: str, fronts: Any, regions: Regions) -> None:
    """Unregistering regions a request is using succeeds but only marks them,
    as Triton does (qa TestSharedMemoryUnregister): they stay listed, their
    names stay taken, a new request may still use them, and they go when
    the last request using them ends, before its client gets the answer."""
    c = client(protocol, fronts)
    url = fronts[0].url if protocol == "http" else fronts[1].url
    key_in, handle_in = regions.make(8)
    shm.set_shared_memory_region(handle_in, [np.array([DELAY_US], dtype=np.int64)])
    key_out, handle_out = regions.make(8)
    c.register_system_shared_memory("delay_in", key_in, 8)
    c.register_system_shared_memory("delay_out", key_out, 8)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        first = pool.submit(_sleep_in_regions, protocol, url)
        time.sleep(0.5)  # the request holds its regions (sleep_us waits DELAY_US)
        assert not first.done()
        c.unregister_system_shared_memory()
        assert region_names(protocol, c.get_system_shared_memory_status()) == \
            ["delay_in", "delay_out"]
        expect_error(lambda: c.register_system_shared_memory("delay_in", key_in, 8),
                     "shared memory region 'delay_in' already in manager", 400,
                     "ALREADY_EXISTS")
        second = pool.submit(_sleep_in_regions, protocol, url)  # uses the marked regions
        first.result(timeout=60)
        assert region_names(protocol, c.get_system_shared_memory_status()) == \
            ["delay_in", "delay_out"]  # the second request still holds them
        second.result(timeout=60)
    assert region_names(protocol, c.get_system_shared_memory_status()) == []
    expect_error(lambda: c.get_system_shared_memory_status("delay_in"),
                 "Unable to find system shared memory region: 'delay_in'", 404, "NOT_FOUND")
    waited = shm.get_contents_as_numpy(handle_out, np.int64, [1])
    assert waited[0] >= DELAY_US
    c.register_system_shared_memory("delay_in", key_in, 8)  # the name is free again


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_unregister_after_inference_frees_regions_at_once(protocol: str, fronts: Any,
                                                          regions: Regions) -> None:
    """A request that ended holds nothing: failed or not, its regions
    unregister at once (a client that unregisters and registers the same
    name again, as NVIDIA's examples do, must not fail)."""
    c = client(protocol, fronts)
    register_add_sub(c, regions)
    inputs, outputs = add_sub_in_regions(protocol, 64)
    c.infer("add_sub_int32", inputs, outputs=outputs)
    inputs, outputs = add_sub_in_regions(protocol, 64, out_offset=1)
    with pytest.raises(InferenceServerException):
        c.infer("add_sub_int32", inputs, outputs=outputs)
    c.unregister_system_shared_memory()
    assert region_names(protocol, c.get_system_shared_memory_status()) == []


# ---- gRPC header forwarding (Triton's --grpc-header-forward-pattern) ---------------------


def _echoed_parameters(url: str, headers: dict[str, str], stream: bool = False) -> dict:
    """The request parameters python_echo_params saw, sent over gRPC with ``headers``."""
    c = grpcclient.InferenceServerClient(url)
    x = grpcclient.InferInput("INPUT0", [1], "FP32")
    x.set_data_from_numpy(np.ones(1, np.float32))
    try:
        if not stream:
            result = c.infer("python_echo_params", [x], headers=headers)
        else:
            import queue

            answers: "queue.Queue[Any]" = queue.Queue()
            c.start_stream(callback=lambda result, error: answers.put(error or result),
                           headers=headers)
            c.async_stream_infer("python_echo_params", [x])
            result = answers.get(timeout=30)
            c.stop_stream()
            if isinstance(result, Exception):
                raise result
        return json.loads(result.as_numpy("PARAMS")[0])["parameters"]
    finally:
        c.close()


def test_grpc_metadata_matching_the_forward_pattern_reaches_the_model(
        frontend_server: tritonserver.Server) -> None:
    """KServeGrpc's forward_header_pattern forwards metadata as request
    parameters, matched case-insensitively and anywhere in the key, as
    Triton does (qa test_headers); on ModelInfer and on streams."""
    headers = {"my_header_1": "my_value_1", "x-my_header_2": "v2", "other": "no"}
    with KServeGrpc(frontend_server, KServeGrpc.Options(
            port=0, forward_header_pattern="MY_HEADER.*")) as front:
        for stream in (False, True):
            seen = _echoed_parameters(front.url, headers, stream)
            assert seen == {"my_header_1": "my_value_1", "x-my_header_2": "v2"}, seen


def test_grpc_forward_pattern_starting_case_sensitive_is_case_sensitive(
        frontend_server: tritonserver.Server) -> None:
    """A pattern that starts with (?-i) matches case-sensitively (Triton
    puts (?i) before the pattern); gRPC metadata keys are lower case, so
    MY_HEADER forwards nothing (qa test_grpc_header_forward_pattern_case_sensitive)."""
    with KServeGrpc(frontend_server, KServeGrpc.Options(
            port=0, forward_header_pattern="(?-i)MY_HEADER.*")) as front:
        assert _echoed_parameters(front.url, {"my_header_1": "v"}) == {}
    with KServeGrpc(frontend_server, KServeGrpc.Options(
            port=0, forward_header_pattern="(?-i)my_header.*")) as front:
        assert _echoed_parameters(front.url, {"my_header_1": "v"}) == {"my_header_1": "v"}


def test_grpc_metadata_posing_as_reserved_parameters_is_refused(
        frontend_server: tritonserver.Server) -> None:
    """Forwarded metadata named like a parameter Triton reads itself
    (sequence_id, priority, triton_*...) is refused in Triton's words
    (qa test_headers_reserved_rejected, server PR #8763)."""
    with KServeGrpc(frontend_server, KServeGrpc.Options(
            port=0, forward_header_pattern=".*")) as front:
        for key in ("sequence_id", "priority", "triton_final_response"):
            for stream in (False, True):
                with pytest.raises(InferenceServerException) as info:
                    _echoed_parameters(front.url, {key: "1"}, stream)
                assert f"Header '{key}' is reserved for Triton usage and cannot be " \
                       "forwarded." in info.value.message()


def test_serve_grpc_header_forward_pattern_flag() -> None:
    """serve's --grpc-header-forward-pattern, as Triton's executable takes it."""
    folder = tempfile.mkdtemp(prefix="tritonserver-hardening-")
    repository = copy_in_process(folder, ["python_echo_params"])
    serve = Serve("--model-repository", repository, "--http-port", "0", "--grpc-port", "0",
                  "--metrics-port", "0", "--log-info", "false", "--exit-timeout-secs", "10",
                  "--grpc-header-forward-pattern", "MY_HEADER.*")
    try:
        serve.wait_ready()
        url = f"127.0.0.1:{serve.ports['GRPCInferenceService']}"
        assert _echoed_parameters(url, {"my_header_1": "a", "else": "b"}) == \
            {"my_header_1": "a"}
    finally:
        serve.end()


# ---- HTTP bodies over the size limit (server PRs #8174, #8432) ---------------------------


def test_http_body_over_max_input_size_gets_tritons_400(
        frontend_server: tritonserver.Server) -> None:
    """A body over max_input_size (--http-max-input-size) is refused before
    it is read, with Triton's status (400, not 413) and texts, which its
    clients read (qa http_input_size_limit_test)."""
    with KServeHttp(frontend_server, KServeHttp.Options(port=0, max_input_size=4096)) as front:
        body = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1024],
                                       "data": [1.0] * 1024}]}).encode()
        status, headers, data = support.request(front.port, "POST",
                                                "/v2/models/identity_fp32/infer", body)
        assert status == 400, data
        assert json.loads(data)["error"] == (
            f"request JSON size of {len(body)} bytes exceeds the maximum allowed input size "
            "of 4096 bytes. Use --http-max-input-size to increase the limit.")
        assert headers.get("connection") == "close"
        raw = np.ones(2048, np.float32).tobytes()
        status, _, data = support.request(front.port, "POST", "/v2/models/identity_fp32/infer",
                                          raw, {"Inference-Header-Content-Length": "0"})
        assert status == 400, data
        assert json.loads(data)["error"] == (
            "Raw input has a byte_size (8192 bytes) that exceeds the maximum allowed value of "
            "4096 bytes. Use --http-max-input-size to increase the limit.")
        small = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4],
                                        "data": [1.0] * 4}]}).encode()
        status, _, data = support.request(front.port, "POST", "/v2/models/identity_fp32/infer",
                                          small)
        assert status == 200, data
