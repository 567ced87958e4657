"""Generated bad requests against the HTTP and gRPC frontends, like the
reliability suite's bad-input test: hypothesis mutates valid inference
requests (datatypes, shapes, data, binary sizes and headers, parameters,
outputs, paths, encodings, whole bodies and messages). Every answer must be
a 4xx with Triton's JSON error body (HTTP), or INVALID_ARGUMENT, NOT_FOUND,
UNIMPLEMENTED or RESOURCE_EXHAUSTED (gRPC), or a correct success; never a
5xx, an INTERNAL, a hang or a crash. The server must stay live and answer a
good request after every batch. The counts are printed with the figures.
"""

from __future__ import annotations

import gzip
import json
import struct
import zlib
from typing import Any

import grpc
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frontends import support
from frontends.conftest import Endpoints
from tritonserver.frontends import KServeHttp
from tritonserver.frontends.grpc.protos import messages

HTTP_CASES = 500
GRPC_CASES = 500
MAX_INPUT = 1 << 20  # the limit of the frontend under test: big bodies are refused early
OK_HTTP = {200, 400, 404, 405, 413, 501}
OK_GRPC = {grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
           grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.RESOURCE_EXHAUSTED}

# model -> inputs {name: (datatype, numpy dtype)}
MODELS = {
    "identity_fp32": {"INPUT0": ("FP32", np.float32)},
    "identity_bytes": {"INPUT0": ("BYTES", object)},
    "add_sub_int32": {"INPUT0": ("INT32", np.int32), "INPUT1": ("INT32", np.int32)},
    "repeat_int32": {"IN": ("INT32", np.int32)},
    "identity_mixed": {"INPUT0": ("FP16", np.float16), "INPUT1": ("BOOL", np.bool_),
                       "INPUT2": ("INT8", np.int8), "INPUT3": ("UINT64", np.uint64),
                       "INPUT4": ("FP64", np.float64), "INPUT5": ("BF16", np.uint16)},
}
DATATYPES = ["FP32", "INT32", "BYTES", "BOOL", "FP16", "BF16", "UINT64", "fp32", "FP128", "",
             "STRING", 7, None, ["FP32"]]
ODD_SHAPES = [[-1], [-5, 2], [1 << 40], [2**63], [2**64], [0, 1 << 50], [1] * 40, [1.5], ["3"],
              [True], [], None, "3", {"d": 1}, [[2]]]
ODD_VALUES = [None, "x", 1 << 70, -(1 << 70), 1.5, True, [], {}, [[1], [2, 3]], ["1.5"],
              float("inf"), "\udcff", [1] * 50, -1]
stats = {"http": 0, "http_status": {}, "grpc": 0, "grpc_status": {}}


def element_bytes(datatype: str, dtype: Any, count: int) -> bytes:
    if datatype == "BYTES":
        return b"".join(struct.pack("<I", 3) + b"abc" for _ in range(count))
    return np.zeros(count, dtype=dtype).tobytes()


@st.composite
def http_cases(draw) -> dict:
    model = draw(st.sampled_from(list(MODELS) + ["no_such_model"]))
    declared = MODELS.get(model, {"INPUT0": ("FP32", np.float32)})
    binary = draw(st.booleans())
    n = draw(st.integers(0, 4))
    inputs, blobs = [], []
    for name, (datatype, dtype) in declared.items():
        entry: dict = {"name": name, "datatype": datatype, "shape": [n]}
        if binary or datatype == "BF16":
            blob = element_bytes(datatype, dtype, n)
            entry["parameters"] = {"binary_data_size": len(blob)}
            blobs.append(blob)
        elif datatype == "BYTES":
            entry["data"] = ["abc"] * n
        else:
            entry["data"] = np.zeros(n, dtype=dtype).tolist()
        inputs.append(entry)
    doc: dict = {"inputs": inputs}
    headers: dict = {}
    path = f"/v2/models/{model}/infer"
    method = "POST"
    mutations = draw(st.lists(st.sampled_from([
        "datatype", "shape", "data", "binary_size", "header_length", "drop_header_length",
        "parameters", "outputs", "id", "name", "missing_input", "extra_input", "inputs_type",
        "truncate", "append", "garbage", "not_object", "encoding", "path", "method",
        "bytes_layout", "deep", "huge_data", "none"]), min_size=1, max_size=3))
    body_edit = None
    for mutation in mutations:
        target = inputs[draw(st.integers(0, len(inputs) - 1))] if inputs else {}
        if mutation == "datatype" and target:
            target["datatype"] = draw(st.sampled_from(DATATYPES))
        elif mutation == "shape" and target:
            target["shape"] = draw(st.sampled_from(ODD_SHAPES))
        elif mutation == "data" and target:
            target.pop("parameters", None)
            target["data"] = draw(st.one_of(st.sampled_from(ODD_VALUES),
                                            st.lists(st.sampled_from(ODD_VALUES), max_size=4)))
        elif mutation == "binary_size" and target:
            target["parameters"] = {"binary_data_size": draw(st.sampled_from(
                [-1, 1, 3, 1 << 40, 2**64, "8", 1.5, None, True]))}
        elif mutation == "header_length":
            headers["Inference-Header-Content-Length"] = draw(st.sampled_from(
                ["-1", "abc", "99999999999", "1", "2147483648", " 5", "0x10", ""]))
        elif mutation == "drop_header_length":
            headers["Drop-Header-Length"] = "1"
        elif mutation == "parameters":
            key = draw(st.sampled_from(["sequence_id", "sequence_start", "priority", "timeout",
                                        "binary_data_output", "triton_x", "custom",
                                        "sequence_end"]))
            doc["parameters"] = draw(st.one_of(
                st.just({key: draw(st.sampled_from(ODD_VALUES + [-5, "seq"]))}),
                st.sampled_from([[], "p", 3])))
        elif mutation == "outputs":
            doc["outputs"] = draw(st.sampled_from([
                [{"name": "NOPE"}], [{}], [{"name": 3}], "OUTPUT0", [{"name": "OUTPUT0",
                 "parameters": {"binary_data": "yes"}}],
                [{"name": "OUTPUT0", "parameters": {"classification": 2}}],
                [{"name": "OUTPUT0", "parameters": {"shared_memory_region": "r"}}],
                [{"name": "OUTPUT0", "parameters": 5}]]))
        elif mutation == "id":
            doc["id"] = draw(st.sampled_from([3, None, ["a"], {"a": 1}, "x" * 5000]))
        elif mutation == "name" and target:
            target["name"] = draw(st.sampled_from(["", "INPUT9", 5, None, "IN\u0000PUT", "é"]))
        elif mutation == "missing_input" and inputs:
            inputs.pop()
        elif mutation == "extra_input":
            inputs.append(dict(inputs[0]) if inputs else {"name": "X"})
        elif mutation == "inputs_type":
            doc["inputs"] = draw(st.sampled_from([None, {}, "INPUT0", 3, [3], [[]]]))
        elif mutation in ("truncate", "append", "garbage", "not_object", "bytes_layout",
                          "huge_data"):
            body_edit = mutation
        elif mutation == "encoding":
            headers["Content-Encoding"] = draw(st.sampled_from(
                ["gzip", "deflate", "br", "x-zip", "gzip-bomb", "identity"]))
        elif mutation == "path":
            path = draw(st.sampled_from([
                f"/v2/models/{model}/versions/abc/infer", f"/v2/models/{model}/versions/-1/infer",
                f"/v2/models/{model}/versions/99999999999999999999/infer",
                f"/v2/models/{model}/versions/7/infer", "/v2/models//infer",
                f"/v2/models/{model}/infer/extra", "/v2/models/%00/infer",
                f"/v2/models/{model}/generate", f"/v2/models/{model}/generate_stream",
                "/v2/logging"]))
        elif mutation == "deep" and target:
            nested: Any = 1
            for _ in range(draw(st.sampled_from([40, 200]))):
                nested = [nested]
            target.pop("parameters", None)
            target["data"] = nested
        elif mutation == "method":
            method = draw(st.sampled_from(["GET", "PUT", "DELETE", "PATCH"]))
    return {"doc": doc, "blobs": blobs, "headers": headers, "path": path, "method": method,
            "body_edit": body_edit, "seed": draw(st.binary(min_size=0, max_size=64))}


def build_http(case: dict) -> tuple[bytes, dict]:
    head = json.dumps(case["doc"]).encode()
    body = head + b"".join(case["blobs"])
    headers = dict(case["headers"])
    if case["blobs"] and "Inference-Header-Content-Length" not in headers:
        headers["Inference-Header-Content-Length"] = str(len(head))
    headers.pop("Drop-Header-Length", None) and headers.pop("Inference-Header-Content-Length",
                                                            None)
    edit = case["body_edit"]
    if edit == "truncate":
        body = body[:max(0, len(body) // 2)]
    elif edit == "append":
        body = body + case["seed"] + b"\x00"
    elif edit == "garbage":
        body = case["seed"] + b"\xff\xfe{"
    elif edit == "not_object":
        body = b'["inputs"]'
    elif edit == "bytes_layout":
        body = body + struct.pack("<I", 0xFFFFFFFF)
    elif edit == "huge_data":
        body = body + bytes(MAX_INPUT + 10)
    encoding = headers.get("Content-Encoding")
    if encoding == "gzip" and case["seed"][:1] != b"\x00":
        body = gzip.compress(body)
    elif encoding == "deflate":
        body = zlib.compress(body)
    elif encoding == "gzip-bomb":
        headers["Content-Encoding"] = "gzip"
        body = gzip.compress(bytes(64 << 20))  # 64 MiB of zeros, ~64 KiB compressed
    return body, headers


@pytest.fixture(scope="module")
def limited_http(endpoints: Endpoints):
    with KServeHttp(endpoints.server, KServeHttp.Options(port=0, max_input_size=MAX_INPUT)) as f:
        yield f


def check_healthy_http(port: int) -> None:
    status, _, _ = support.request(port, "GET", "/v2/health/live")
    assert status == 200
    x = np.arange(4, dtype=np.float32)
    body = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4],
                                   "data": x.tolist()}]}).encode()
    status, _, data = support.request(port, "POST", "/v2/models/identity_fp32/infer", body)
    assert status == 200 and json.loads(data)["outputs"][0]["data"] == x.tolist()


@settings(max_examples=HTTP_CASES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(case=http_cases())
def test_generated_bad_http_requests(limited_http, case):
    body, headers = build_http(case)
    status, response_headers, data = support.send_request(
        limited_http.port, case["method"], case["path"], body, headers, timeout=30)
    stats["http"] += 1
    stats["http_status"][status] = stats["http_status"].get(status, 0) + 1
    assert status in OK_HTTP, (status, data[:300], case)
    if status != 200:
        support.json_error(data)
    elif response_headers.get("content-type") == "application/json":
        assert isinstance(json.loads(data), (dict, list))
    if stats["http"] % 50 == 0:
        check_healthy_http(limited_http.port)


RAW_HTTP = [
    b"GARBAGE\r\n\r\n",
    b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
    b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc",
    b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nBad Header\r\n\r\n",
    b"POST /v2/models/identity_fp32/infer HTTP/9.9\r\n\r\n",
    b"\x00\x01\x02\x03" * 100,
    b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n",
    b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nContent-Length: 99999999999999\r\n\r\n",
]


def test_malformed_http_streams(limited_http):
    """Broken HTTP itself: the connection gets a 4xx (or is closed), the server goes on."""
    for raw in RAW_HTTP:
        reply = support.raw_exchange(limited_http.port, raw, timeout=5)
        if reply:
            status, _, _ = support.parse_response(reply)
            assert 400 <= status < 500, (raw[:60], reply[:200])
        stats["http"] += 1
    check_healthy_http(limited_http.port)


# ---- gRPC ---------------------------------------------------------------------------------------


@st.composite
def grpc_cases(draw) -> bytes:
    m = messages()
    model = draw(st.sampled_from(list(MODELS) + ["no_such_model", ""]))
    declared = MODELS.get(model, {"INPUT0": ("FP32", np.float32)})
    request = m.ModelInferRequest(model_name=model)
    n = draw(st.integers(0, 4))
    use_contents = draw(st.integers(0, 4)) == 0
    for name, (datatype, dtype) in declared.items():
        tensor = request.inputs.add(name=name, datatype=datatype, shape=[n])
        if use_contents and datatype in ("INT32", "FP32", "BYTES"):
            field = {"INT32": "int_contents", "FP32": "fp32_contents",
                     "BYTES": "bytes_contents"}[datatype]
            getattr(tensor.contents, field).extend([b"x"] * n if datatype == "BYTES" else [0] * n)
        else:
            request.raw_input_contents.append(element_bytes(datatype, dtype, n))
    mutations = draw(st.lists(st.sampled_from([
        "datatype", "shape", "raw_size", "raw_count", "bytes_layout", "both", "contents_field",
        "parameters", "outputs", "version", "name", "garbage", "none", "dup_input",
        "huge"]), min_size=1, max_size=3))
    for mutation in mutations:
        tensors = request.inputs
        target = tensors[draw(st.integers(0, len(tensors) - 1))] if len(tensors) else None
        if mutation == "datatype" and target is not None:
            target.datatype = draw(st.sampled_from(["FP128", "", "fp32", "STRING", "INT32",
                                                    "BYTES", "BF16"]))
        elif mutation == "shape" and target is not None:
            del target.shape[:]
            target.shape.extend(draw(st.sampled_from(
                [[-1], [1 << 40], [2**62, 4], [1] * 40, [], [0, -3], [-(2**63)]])))
        elif mutation == "raw_size" and len(request.raw_input_contents):
            request.raw_input_contents[0] = request.raw_input_contents[0] + b"\x01"
        elif mutation == "raw_count":
            request.raw_input_contents.append(b"\x00" * 4)
        elif mutation == "bytes_layout" and len(request.raw_input_contents):
            request.raw_input_contents[-1] = struct.pack("<I", 1 << 31) + b"ab"
        elif mutation == "both" and target is not None:
            target.contents.fp32_contents.append(1.0)
            if not len(request.raw_input_contents):
                request.raw_input_contents.append(b"")
        elif mutation == "contents_field" and target is not None:
            target.contents.uint64_contents.extend([1, 2])
        elif mutation == "parameters":
            key = draw(st.sampled_from(["sequence_id", "sequence_start", "priority", "timeout",
                                        "triton_x", "custom", "sequence_end",
                                        "triton_enable_empty_final_response"]))
            choice = draw(st.sampled_from(["bool_param", "int64_param", "string_param",
                                           "double_param", "uint64_param", "none"]))
            p = request.parameters[key]
            if choice == "bool_param":
                p.bool_param = True
            elif choice == "int64_param":
                p.int64_param = draw(st.sampled_from([-1, 0, 2**63 - 1]))
            elif choice == "string_param":
                p.string_param = "s"
            elif choice == "double_param":
                p.double_param = float("nan")
            elif choice == "uint64_param":
                p.uint64_param = 2**64 - 1
        elif mutation == "outputs":
            out = request.outputs.add(name=draw(st.sampled_from(["NOPE", "", "OUTPUT0"])))
            if draw(st.booleans()):
                out.parameters["classification"].int64_param = 3
        elif mutation == "version":
            request.model_version = draw(st.sampled_from(["abc", "-1", "99", "1" * 30, " 1"]))
        elif mutation == "name" and target is not None:
            target.name = draw(st.sampled_from(["", "INPUT9", "é"]))
        elif mutation == "dup_input" and target is not None:
            request.inputs.add().CopyFrom(target)
        elif mutation == "huge":
            request.id = "x" * (1 << 20)
    data = request.SerializeToString()
    if "garbage" in mutations:
        seed = draw(st.binary(min_size=1, max_size=40))
        data = draw(st.sampled_from([seed, data[: len(data) // 2] + seed, b"\xff" * 12]))
    return data


@pytest.fixture(scope="module")
def grpc_calls(endpoints: Endpoints):
    with grpc.insecure_channel(endpoints.grpc_url) as channel:
        yield (channel.unary_unary("/inference.GRPCInferenceService/ModelInfer"),
               channel.stream_stream("/inference.GRPCInferenceService/ModelStreamInfer"))


def check_healthy_grpc(infer) -> None:
    m = messages()
    request = m.ModelInferRequest(model_name="identity_fp32")
    request.inputs.add(name="INPUT0", datatype="FP32", shape=[2])
    request.raw_input_contents.append(np.array([1, 2], np.float32).tobytes())
    response = m.ModelInferResponse.FromString(infer(request.SerializeToString(), timeout=30))
    assert np.frombuffer(response.raw_output_contents[0], np.float32).tolist() == [1.0, 2.0]


@settings(max_examples=GRPC_CASES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(data=grpc_cases())
def test_generated_bad_grpc_requests(grpc_calls, data):
    infer, _ = grpc_calls
    try:
        infer(data, timeout=30)
        code = grpc.StatusCode.OK
    except grpc.RpcError as e:
        code = e.code()
        assert e.details(), code
    stats["grpc"] += 1
    stats["grpc_status"][code.name] = stats["grpc_status"].get(code.name, 0) + 1
    assert code in OK_GRPC, (code, data[:200])
    if stats["grpc"] % 50 == 0:
        check_healthy_grpc(infer)


def test_bad_requests_in_one_stream(grpc_calls):
    """Bad and good requests mixed in one ModelStreamInfer: each bad one gets
    an error message, each good one its responses, and the stream goes on."""
    m = messages()
    infer, stream = grpc_calls
    requests = []
    for i in range(40):
        request = m.ModelInferRequest(model_name="repeat_int32", id=str(i))
        request.inputs.add(name="IN", datatype="INT32", shape=[2])
        request.raw_input_contents.append(np.array([i, i], np.int32).tobytes())
        data = request.SerializeToString()
        if i % 4 == 1:
            data = b"\xff\xff garbage"
        elif i % 4 == 2:
            request.inputs[0].shape[0] = 1 << 40
            data = request.SerializeToString()
        requests.append(data)
    answers = [m.ModelStreamInferResponse.FromString(r)
               for r in stream(iter(requests), timeout=60)]
    errors = [a for a in answers if a.error_message]
    good = [a for a in answers if not a.error_message]
    assert len(errors) == 20 and len(good) == 2 * 20
    assert all(np.frombuffer(a.infer_response.raw_output_contents[0], np.int32)[0]
               == int(a.infer_response.id) for a in good)
    stats["grpc"] += len(requests)
    check_healthy_grpc(infer)


def test_report_counts():
    """Runs last in this module: the figures for the log."""
    assert stats["http"] >= HTTP_CASES and stats["grpc"] >= GRPC_CASES
    support.record("generated bad HTTP requests",
                   f"{stats['http']} tried, statuses {dict(sorted(stats['http_status'].items()))}")
    support.record("generated bad gRPC requests",
                   f"{stats['grpc']} tried, codes {dict(sorted(stats['grpc_status'].items()))}")
