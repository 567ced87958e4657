"""What Triton's frontends refuse since the 2.51 core we embed (server PRs
#8172 JSON depth, #8432 JSON size, #8570 decompression limit, #8182/#8489/
#8612/#8619/#8676 element counts, #8763 reserved parameters and forwarded
headers, #8770 chunk count, #8764 memory after failed compressed requests,
#8925 Inference-Header-Content-Length), one test per hardening: each checks
the status (HTTP) or code (gRPC) and the text Triton's clients and QA tests
read, and that the server is live and answers a good request after. Real
clients where they can send the request; raw sockets for the HTTP that a
client library would not send. docs/security.md has the table.
"""

from __future__ import annotations

import gzip
import json
import math
import re
import time
import zlib
from typing import Any, Optional

import grpc
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tritonserver
from frontends import support
from frontends.conftest import Endpoints
from frontends.serve_process import Serve

import tritonclient.grpc as grpcclient  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

from tritonserver.frontends import KServeGrpc, KServeHttp  # noqa: E402
from tritonserver.frontends.grpc.protos import messages  # noqa: E402

MIB = 1 << 20
INT64_MAX = 2**63 - 1
INFER = "/v2/models/identity_fp32/infer"
MODEL_INFER = "/inference.GRPCInferenceService/ModelInfer"
GENERATED = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                     suppress_health_check=list(HealthCheck))
# Triton's kReservedParameterKeys and the triton_ names its QA test tries (qa/L0_parameters).
RESERVED = ["sequence_id", "sequence_start", "sequence_end", "priority", "timeout", "headers",
            "binary_data_output", "triton_enable_empty_final_response", "triton_final_response",
            "triton_injected_via_header"]
TRITON_PREFIX_HTTP = ("parameter keys starting with 'triton_' are reserved for Triton usage "
                      "and should not be specified.")
TRITON_PREFIX_GRPC = ("parameter keys starting with 'triton_' are reserved for Triton usage. "
                      "Only the following keys starting with 'triton_' are allowed: "
                      "triton_enable_empty_final_response")


# ---- helpers -------------------------------------------------------------------------------------


def infer_doc(data: Any, datatype: str = "FP32", shape: Optional[list[int]] = None,
              **extra: Any) -> dict:
    return {"inputs": [{"name": "INPUT0", "datatype": datatype, "shape": shape or [1],
                        "data": data}], **extra}


def post(port: int, body: bytes, headers: Optional[dict[str, str]] = None,
         path: str = INFER) -> tuple[int, dict[str, str], bytes]:
    """A request over a raw socket (answered early or not, it is read)."""
    return support.send_request(port, "POST", path, body, headers, timeout=60)


def refused(port: int, body: bytes, headers: Optional[dict[str, str]] = None,
            path: str = INFER, status: int = 400) -> str:
    """The text of Triton's JSON error body, checking the status."""
    got, response_headers, data = post(port, body, headers, path)
    assert got == status, (got, data[:300])
    assert response_headers["content-type"] == "application/json", response_headers
    return support.json_error(data)


def check_http_live(port: int) -> None:
    """Live, and a good request still answers."""
    status, _, _ = support.request(port, "GET", "/v2/health/live")
    assert status == 200
    status, _, data = support.request(port, "POST", INFER,
                                      json.dumps(infer_doc([1.5, 2.5], shape=[2])).encode())
    assert status == 200 and json.loads(data)["outputs"][0]["data"] == [1.5, 2.5], data


def grpc_message(shape: list[int], raw: bytes, model: str = "identity_fp32",
                 parameters: Optional[dict[str, Any]] = None) -> bytes:
    m = messages()
    request = m.ModelInferRequest(model_name=model)
    request.inputs.add(name="INPUT0", datatype="FP32", shape=shape)
    request.raw_input_contents.append(raw)
    for key, value in (parameters or {}).items():
        if isinstance(value, bool):
            request.parameters[key].bool_param = value
        elif isinstance(value, int):
            request.parameters[key].int64_param = value
        else:
            request.parameters[key].string_param = str(value)
    return bytes(request.SerializeToString())


def grpc_refused(url: str, data: bytes, code: grpc.StatusCode = grpc.StatusCode.INVALID_ARGUMENT,
                 **call: Any) -> str:
    """The details of a ModelInfer refused with ``code``."""
    with grpc.insecure_channel(url) as channel:
        infer = channel.unary_unary(MODEL_INFER)
        with pytest.raises(grpc.RpcError) as e:
            infer(data, timeout=60, **call)
    assert e.value.code() == code, (e.value.code(), e.value.details())
    return str(e.value.details())


def check_grpc_live(url: str) -> None:
    c = grpcclient.InferenceServerClient(url)
    try:
        assert c.is_server_live()
        x = np.array([1.5, 2.5], np.float32)
        inp = grpcclient.InferInput("INPUT0", [2], "FP32")
        inp.set_data_from_numpy(x)
        np.testing.assert_array_equal(c.infer("identity_fp32", [inp]).as_numpy("OUTPUT0"), x)
    finally:
        c.close()


def nested(depth: int, value: Any) -> Any:
    """``value`` inside ``depth`` lists, as Triton's QA test builds it."""
    for _ in range(depth):
        value = [value]
    return value


def nested_body(depth: int, value: Any, datatype: str = "FP32", shape: Any = (1,)) -> bytes:
    """An infer request whose 'data' is ``value`` inside ``depth`` lists,
    written out (json.dumps stops at Python's recursion limit)."""
    data = b"[" * depth + json.dumps(value).encode() + b"]" * depth
    return (b'{"inputs": [{"name": "INPUT0", "datatype": "%s", "shape": %s, "data": %s}]}'
            % (datatype.encode(), json.dumps(list(shape)).encode(), data))


def gzip_of_zeros(size: int, chunk: int = 4 * MIB) -> bytes:
    """gzip of ``size`` zero bytes, made without holding them."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(chunk)
    parts = [compressor.compress(zeros) for _ in range(size // chunk)]
    parts.append(compressor.compress(bytes(size % chunk)))
    parts.append(compressor.flush())
    return b"".join(parts)


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")


# ---- #8172: JSON nesting depth -------------------------------------------------------------------


def test_json_nested_past_the_depth_limit_is_refused(endpoints: Endpoints):
    """'data' nested 100 lists deep or more is refused with Triton's text
    (qa/L0_http/http_test.py test_json_recursion_depth_limit); 99 is read,
    whatever the shape says; a whole document 100,000 deep is refused by the
    parser; neither reaches the model."""
    port = endpoints.http.port
    for model, datatype, value in (("identity_bytes", "BYTES", "hello"),
                                   ("identity_fp32", "FP32", 1.5)):
        path = f"/v2/models/{model}/infer"
        for depth in (1, 50, 99):
            status, _, data = post(port, nested_body(depth, value, datatype), path=path)
            assert status == 200, (depth, data[:200])
            assert json.loads(data)["outputs"][0]["data"] == [value]
        for depth in (100, 120, 1000):
            text = refused(port, nested_body(depth, value, datatype), path=path)
            assert text == "JSON nesting depth exceeds maximum allowed limit (100)", depth
    text = refused(port, nested_body(100_000, 1.5))
    assert text.startswith("failed to parse the request JSON buffer"), text
    check_http_live(port)


@GENERATED
@given(depth=st.integers(100, 1000), datatype=st.sampled_from(["FP32", "BYTES"]),
       width=st.integers(1, 3))
def test_generated_depths_past_the_limit_are_refused(endpoints: Endpoints, depth: int,
                                                     datatype: str, width: int):
    value: Any = ["x"] * width if datatype == "BYTES" else [1.0] * width
    model = "identity_bytes" if datatype == "BYTES" else "identity_fp32"
    text = refused(endpoints.http.port, nested_body(depth - 1, value, datatype, [width]),
                   path=f"/v2/models/{model}/infer")
    assert text == "JSON nesting depth exceeds maximum allowed limit (100)"


# ---- #8432: JSON over the input size -------------------------------------------------------------


def test_json_request_past_the_input_size_is_refused(endpoints: Endpoints):
    """A JSON request over max_input_size is refused before it is parsed
    (qa/L0_http/http_input_size_limit_test.py test_large_string_in_json,
    at 64 KiB rather than 2 GiB); over gRPC the message limit does it."""
    limit = 64 << 10
    body = json.dumps(infer_doc(["A" * (limit + 64)], "BYTES")).encode()
    with KServeHttp(endpoints.server, KServeHttp.Options(port=0, max_input_size=limit)) as http:
        assert refused(http.port, body, path="/v2/models/identity_bytes/infer") == (
            f"request JSON size of {len(body)} bytes exceeds the maximum allowed input size "
            f"of {limit} bytes. Use --http-max-input-size to increase the limit.")
        small = json.dumps(infer_doc(["A" * (limit // 2)], "BYTES")).encode()
        status, _, data = post(http.port, small, path="/v2/models/identity_bytes/infer")
        assert status == 200, data[:200]
        check_http_live(http.port)
    with KServeGrpc(endpoints.server, KServeGrpc.Options(port=0, max_input_size=limit)) as g:
        grpc_refused(g.url, grpc_message([1], bytes(limit + 64)),
                     grpc.StatusCode.RESOURCE_EXHAUSTED)
        check_grpc_live(g.url)


# ---- #8570: decompression limit ------------------------------------------------------------------


def test_decompression_bomb_is_refused_before_it_is_inflated(endpoints: Endpoints):
    """A 200 MiB gzip (or deflate) bomb against a 1 MiB limit: 400 with
    Triton's text, having inflated no more than the limit (the peak of
    Python's allocations meanwhile stays far below the bomb); a compressed
    request within the limit is served. Over gRPC the message limit applies
    to the decompressed message (RESOURCE_EXHAUSTED)."""
    import tracemalloc

    limit = MIB
    bomb = gzip_of_zeros(200 * MIB)
    assert len(bomb) < MIB
    expected = (f"Decompressed data size exceeds the maximum allowed value of {limit} bytes. "
                "Use --http-max-input-size to increase the limit.")
    with KServeHttp(endpoints.server, KServeHttp.Options(port=0, max_input_size=limit)) as http:
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            text = refused(http.port, bomb, {"Content-Encoding": "gzip"})
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert text == expected
        assert peak < 32 * MIB, f"{peak / MIB:.1f} MiB allocated for a refused bomb"
        deflated = zlib.compress(bytes(8 * MIB))
        assert refused(http.port, deflated, {"Content-Encoding": "deflate"}) == expected
        good = json.dumps(infer_doc([1.0] * 1000, shape=[1000])).encode()
        status, _, data = post(http.port, gzip.compress(good), {"Content-Encoding": "gzip"})
        assert status == 200 and len(json.loads(data)["outputs"][0]["data"]) == 1000
        check_http_live(http.port)
        support.record("decompression bomb", f"200 MiB gzip ({len(bomb)} bytes) refused, "
                                             f"peak {peak / MIB:.1f} MiB of Python allocations")
    with KServeGrpc(endpoints.server, KServeGrpc.Options(port=0, max_input_size=limit)) as g:
        # Shape [1]: were the message let in, its answer would be INVALID_ARGUMENT.
        grpc_refused(g.url, grpc_message([1], bytes(16 * MIB)),
                     grpc.StatusCode.RESOURCE_EXHAUSTED, compression=grpc.Compression.Gzip)
        check_grpc_live(g.url)


# ---- #8182, #8489, #8612, #8619, #8676: element counts -------------------------------------------


def overflow_text(shape: list[int]) -> str:
    return (f"invalid shape for input 'INPUT0': shape [{','.join(map(str, shape))}] causes "
            f"total element count to exceed maximum size of {INT64_MAX}")


def test_element_count_overflowing_int64_is_refused(endpoints: Endpoints):
    """A shape whose element count passes int64 (it wraps in C++: Triton
    refuses it with this text) is refused over HTTP (JSON and binary data)
    and gRPC; a shape declaring far more than its data (#8676: Triton sized
    its buffer from the shape) is refused without allocating for it."""
    port = endpoints.http.port
    shape = [2**62, 4]
    assert refused(port, json.dumps(infer_doc([1.0], shape=shape)).encode()) == \
        overflow_text(shape)
    head = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": shape,
                                   "parameters": {"binary_data_size": 4}}]}).encode()
    assert refused(port, head + bytes(4), {"Inference-Header-Content-Length": str(len(head))}) \
        == overflow_text(shape)
    assert grpc_refused(endpoints.grpc_url, grpc_message(shape, bytes(4))) == overflow_text(shape)
    started = time.monotonic()
    text = refused(port, json.dumps(infer_doc([1.0], shape=[1 << 40])).encode())
    assert text == "input 'INPUT0': 1 elements of data for shape [1099511627776]", text
    assert time.monotonic() - started < 10
    assert grpc_refused(endpoints.grpc_url, grpc_message([1 << 40], bytes(4))) == \
        "input 'INPUT0': 4 bytes of data for shape [1099511627776] of FP32 " \
        "(4398046511104 expected)"
    check_http_live(port)
    check_grpc_live(endpoints.grpc_url)


@GENERATED
@given(shape=st.lists(st.integers(1, INT64_MAX), min_size=2, max_size=8).filter(
    lambda dims: math.prod(dims) > INT64_MAX))
def test_generated_overflowing_shapes_are_refused(endpoints: Endpoints, shape: list[int]):
    assert refused(endpoints.http.port, json.dumps(infer_doc([1.0], shape=shape)).encode()) \
        == overflow_text(shape)
    assert grpc_refused(endpoints.grpc_url, grpc_message(shape, bytes(4))) == overflow_text(shape)


# ---- #8763: reserved parameters and forwarded headers --------------------------------------------


def test_reserved_triton_parameter_is_refused(endpoints: Endpoints):
    """A request parameter named triton_* (but gRPC's one allowed key) is
    refused with Triton's text for each protocol; tritonclient refuses the
    reserved names before sending, so these go raw."""
    port = endpoints.http.port
    for key in ("triton_x", "triton_final_response", "triton_injected_via_header",
                "triton_enable_empty_final_response"):
        doc = infer_doc([0.0], parameters={key: "dummy-value"})
        assert refused(port, json.dumps(doc).encode(),
                       path="/v2/models/python_echo_params/infer") == TRITON_PREFIX_HTTP
        assert refused(port, json.dumps({"INPUT0": [0.0], key: 1}).encode(),
                       path="/v2/models/python_echo_params/generate") == TRITON_PREFIX_HTTP
        if key != "triton_enable_empty_final_response":
            assert grpc_refused(endpoints.grpc_url,
                                grpc_message([1], bytes(4), "python_echo_params",
                                             {key: "dummy-value"})) == TRITON_PREFIX_GRPC
    check_http_live(port)
    check_grpc_live(endpoints.grpc_url)


@GENERATED
@given(suffix=st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=12),
       value=st.one_of(st.booleans(), st.integers(-5, 5), st.text(max_size=5)))
def test_generated_triton_parameters_are_refused(endpoints: Endpoints, suffix: str, value: Any):
    key = "triton_" + suffix
    assert refused(endpoints.http.port, json.dumps(infer_doc([0.0], parameters={key: value}))
                   .encode()) == TRITON_PREFIX_HTTP
    if key != "triton_enable_empty_final_response":
        assert grpc_refused(endpoints.grpc_url,
                            grpc_message([1], bytes(4), parameters={key: value})) == \
            TRITON_PREFIX_GRPC


def test_forwarded_header_with_reserved_name_is_refused(endpoints: Endpoints):
    """With a forward pattern that matches it, a header named like a
    parameter Triton reads itself (or triton_*) is refused, raw or from
    tritonclient (which sends headers as given); other headers still reach
    the model. The same over gRPC (metadata matched by its own pattern)."""
    x = np.zeros(1, dtype=np.float32)
    options = KServeHttp.Options(port=0, header_forward_pattern=".*")
    with KServeHttp(endpoints.server, options) as forwarding:
        c = httpclient.InferenceServerClient(forwarding.url)
        try:
            for key in RESERVED:
                text = refused(forwarding.port, json.dumps(infer_doc([0.0])).encode(),
                               {key: "dummy-value"}, "/v2/models/python_echo_params/infer")
                assert text == f"Header '{key}' is reserved for Triton usage and cannot be " \
                               "forwarded."
                inp = httpclient.InferInput("INPUT0", [1], "FP32")
                inp.set_data_from_numpy(x)
                with pytest.raises(InferenceServerException) as e:
                    c.infer("python_echo_params", [inp], headers={key: "dummy-value"})
                assert "reserved for Triton usage" in str(e.value)
            inp = httpclient.InferInput("INPUT0", [1], "FP32")
            inp.set_data_from_numpy(x)
            result = c.infer("python_echo_params", [inp], headers={"my_header_1": "v1"})
            assert json.loads(result.as_numpy("PARAMS")[0])["parameters"]["my_header_1"] == "v1"
        finally:
            c.close()
        check_http_live(forwarding.port)
    # Anchored: gRPC's own metadata (user-agent...) stays out of what the model sees.
    pattern = "^(my_header.*|sequence_.*|priority|timeout|headers|binary_data_output|triton_.*)$"
    options_grpc = KServeGrpc.Options(port=0, forward_header_pattern=pattern)
    with KServeGrpc(endpoints.server, options_grpc) as g:
        c = grpcclient.InferenceServerClient(g.url)
        try:
            inp = grpcclient.InferInput("INPUT0", [1], "FP32")
            inp.set_data_from_numpy(x)
            for key in RESERVED:
                with pytest.raises(InferenceServerException) as e:
                    c.infer("python_echo_params", [inp], headers={key: "dummy-value"})
                assert e.value.status() == "StatusCode.INVALID_ARGUMENT"
                assert e.value.message() == \
                    f"Header '{key}' is reserved for Triton usage and cannot be forwarded."
            result = c.infer("python_echo_params", [inp], headers={"my_header_1": "v1"})
            assert json.loads(result.as_numpy("PARAMS")[0])["parameters"] == {"my_header_1": "v1"}
        finally:
            c.close()
        check_grpc_live(g.url)


# ---- #8770: chunk count --------------------------------------------------------------------------


CHUNKS_TEXT = ("Chunked request body exceeds maximum of 65536 non-empty chunks. Send fewer or "
               "larger HTTP chunks.")


def chunked_exchange(port: int, chunks: int, timeout: float = 60.0) -> tuple[int, dict, bytes]:
    """A raw-binary infer request (Inference-Header-Content-Length: 0) of
    ``chunks`` one-byte chunks, as Triton's qa/L0_http/http_request_many_chunks.py
    sends it; the answer, read until the server closes."""
    head = (f"POST {INFER} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            "Inference-Header-Content-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n").encode()
    reply = support.raw_exchange(port, head + b"1\r\nA\r\n" * chunks + b"0\r\n\r\n",
                                 timeout=timeout)
    assert reply, f"no answer to {chunks} chunks"
    return support.parse_response(reply)


def test_too_many_chunks_are_refused(endpoints: Endpoints):
    """65,536 non-empty chunks are read (here a raw FP32 body of 16,384
    elements); one more is refused with Triton's status and text and the
    connection closed; a million are refused as soon as the count passes."""
    port = endpoints.http.port
    status, headers, data = chunked_exchange(port, 65536)
    assert status == 200, data[:300]
    document = json.loads(data[:int(headers["inference-header-content-length"])])
    assert document["outputs"][0]["shape"] == [16384]  # a raw request's outputs are binary
    for chunks in (65537, 1_000_000):
        started = time.monotonic()
        status, headers, data = chunked_exchange(port, chunks)
        assert (status, headers.get("connection")) == (400, "close"), data[:300]
        assert headers["content-type"] == "application/json"
        assert support.json_error(data) == CHUNKS_TEXT
        support.record(f"{chunks} chunks", f"refused in {time.monotonic() - started:.2f} s")
    check_http_live(port)


# ---- #8764 and #8570 in serve: no memory kept after failed compressed requests -------------------


@pytest.fixture(scope="module")
def serve() -> Any:
    process = Serve("--model-repository", tritonserver.example_model_repository(),
                    "--http-port", "0", "--grpc-port", "0", "--metrics-port", "0",
                    "--log-info", "false", "--exit-timeout-secs", "10",
                    "--http-max-input-size", str(4 * MIB))
    try:
        yield process.wait_ready()
    finally:
        process.end()


def test_failed_compressed_request_keeps_no_memory(serve: Any):
    """`serve`'s RSS over 100 failed compressed requests (Triton's
    test_no_leak_on_invalid_inference_header_length: 1 MiB of gzipped
    spaces with a header length past the body) and 20 decompression bombs
    (64 MiB against a 4 MiB limit), after a warm-up of each: it grows less
    than half Triton's bound of 32 MiB. A failed request's error held its
    frames, so its body, until the next full garbage collection (20 bombs
    kept up to 80 MiB); now each is freed with its answer. gRPC's failed
    compressed messages (the library inflates them) are held to Triton's bound."""
    port = serve.ports["HTTPService"]
    pid = serve.process.pid
    body = gzip.compress(b" " * MIB)
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip",
               "Inference-Header-Content-Length": "9999999"}
    bomb = gzip_of_zeros(64 * MIB)
    expected = f"inference header size should be in range (0, {MIB}), got: 9999999"

    def fail_once() -> None:
        assert refused(port, body, headers) == expected

    def bomb_once() -> None:
        assert refused(port, bomb, {"Content-Encoding": "gzip"}).startswith(
            "Decompressed data size exceeds the maximum allowed value of 4194304 bytes.")

    for _ in range(10):  # one-time allocations of the failure paths
        fail_once()
        bomb_once()
    before = rss_bytes(pid)
    deadline = time.monotonic() + 120
    for i in range(100):
        fail_once()
        if i % 5 == 0:
            bomb_once()
        assert time.monotonic() < deadline, f"only {i} requests in 120 s"
    growth = rss_bytes(pid) - before
    support.record("failed compressed HTTP requests",
                   f"RSS {before / MIB:.1f} MiB, +{growth / MIB:.1f} MiB over 120 requests")
    assert growth < 16 * MIB, f"serve's RSS grew {growth / MIB:.1f} MiB"
    check_http_live(port)

    grpc_url = f"127.0.0.1:{serve.ports['GRPCInferenceService']}"
    wrong = grpc_message([1], bytes(4 * MIB))  # 4 MiB for one element: INVALID_ARGUMENT
    for _ in range(25):
        grpc_refused(grpc_url, wrong, compression=grpc.Compression.Gzip)
    before = rss_bytes(pid)
    for i in range(50):
        grpc_refused(grpc_url, wrong, compression=grpc.Compression.Gzip)
        assert time.monotonic() < deadline + 120, f"only {i} gRPC requests in time"
    growth = rss_bytes(pid) - before
    support.record("failed compressed gRPC requests",
                   f"RSS {before / MIB:.1f} MiB, +{growth / MIB:.1f} MiB over 50 requests")
    assert growth < 32 * MIB, f"serve's RSS grew {growth / MIB:.1f} MiB"
    check_grpc_live(grpc_url)


def test_serve_refuses_each_as_the_frontends_do(serve: Any):
    """`python -m tritonserver serve` (not only KServeHttp/KServeGrpc made
    in-process) answers each hardening's refusal and stays live."""
    port = serve.ports["HTTPService"]
    grpc_url = f"127.0.0.1:{serve.ports['GRPCInferenceService']}"
    assert refused(port, nested_body(120, 1.5)) == \
        "JSON nesting depth exceeds maximum allowed limit (100)"
    assert refused(port, json.dumps(infer_doc([1.0], shape=[2**62, 4])).encode()) == \
        overflow_text([2**62, 4])
    assert grpc_refused(grpc_url, grpc_message([2**62, 4], bytes(4))) == \
        overflow_text([2**62, 4])
    assert refused(port, json.dumps(infer_doc([0.0], parameters={"triton_x": 1})).encode()) == \
        TRITON_PREFIX_HTTP
    assert grpc_refused(grpc_url, grpc_message([1], bytes(4), parameters={"triton_x": 1})) == \
        TRITON_PREFIX_GRPC
    assert refused(port, b"{}", {"Inference-Header-Content-Length": "99999999999"}) == \
        ("Unable to parse Inference-Header-Content-Length, value is out of range "
         "[ -2147483648, 2147483647 ], got: 99999999999")
    status, _, data = chunked_exchange(port, 65537)
    assert status == 400 and support.json_error(data) == CHUNKS_TEXT
    check_http_live(port)
    check_grpc_live(grpc_url)
    assert serve.process.poll() is None


# ---- #8925: Inference-Header-Content-Length ------------------------------------------------------


def test_inference_header_length_garbage_is_refused(endpoints: Endpoints):
    """A length past int32 (it crashed Triton: std::out_of_range), one that
    is no number, or one outside the body: 400 with Triton's texts
    (qa/L0_http/http_test.py test_inference_header_content_length_out_of_range)."""
    port = endpoints.http.port
    body = json.dumps({"inputs": []}).encode()
    size = len(body)
    out_of_range = ("Unable to parse Inference-Header-Content-Length, value is out of range "
                    "[ -2147483648, 2147483647 ], got: ")
    unparsable = "Unable to parse Inference-Header-Content-Length, got: "
    outside = f"inference header size should be in range (0, {size}), got: "
    for value, text in (("99999999999", out_of_range + "99999999999"),
                        ("-99999999999", out_of_range + "-99999999999"),
                        ("2147483648", out_of_range + "2147483648"),
                        ("abc", unparsable + "abc"), ("0x10", unparsable + "0x10"),
                        ("1_0", unparsable + "1_0"), ("-1", outside + "-1"),
                        (str(size + 1), outside + str(size + 1))):
        assert refused(port, body, {"Inference-Header-Content-Length": value}) == text, value
    check_http_live(port)


@GENERATED
@given(value=st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1,
                     max_size=24).filter(lambda v: v.strip() != "0"))
def test_generated_inference_header_lengths_are_refused(endpoints: Endpoints, value: str):
    """Whatever the value, a 4xx with Triton's JSON error, never a 5xx;
    what is not a decimal number says so."""
    body = json.dumps(infer_doc([1.0, 2.0], shape=[2])).encode()
    status, _, data = post(endpoints.http.port, body, {"Inference-Header-Content-Length": value})
    text = support.json_error(data) if status != 200 else ""
    if re.fullmatch(r"[+-]?[0-9]+", value) is None:
        assert status == 400 and text == \
            f"Unable to parse Inference-Header-Content-Length, got: {value}"
    elif not -2**31 <= int(value) <= 2**31 - 1:
        assert status == 400 and "value is out of range [ -2147483648, 2147483647 ]" in text
    elif not 0 < int(value) <= len(body):
        assert status == 400 and text.startswith("inference header size should be in range")
    else:
        assert status in (200, 400), (status, data[:200])


def test_the_server_is_live_after_every_hardening_test(endpoints: Endpoints):
    """Runs last in this module: nothing above left the frontends unable to serve."""
    check_http_live(endpoints.http.port)
    check_grpc_live(endpoints.grpc_url)
