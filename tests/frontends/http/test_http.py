"""KServeHttp with the real tritonclient.http (sync and asyncio) and raw
HTTP: every endpoint of the KServe v2 protocol as Triton serves it."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import struct
import zlib

import numpy as np
import pytest

import tritonserver
from conftest import stats_when
from frontends import support
from frontends.conftest import Endpoints

import tritonclient.http as httpclient  # noqa: E402
import tritonclient.http.aio as aiohttpclient  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

from tritonserver.frontends import KServeHttp  # noqa: E402


@pytest.fixture(scope="module")
def client(endpoints: Endpoints):
    c = httpclient.InferenceServerClient(endpoints.http_url, network_timeout=60)
    yield c
    c.close()


def fp32_input(x: np.ndarray, binary: bool = True) -> httpclient.InferInput:
    inp = httpclient.InferInput("INPUT0", list(x.shape), "FP32")
    inp.set_data_from_numpy(x, binary_data=binary)
    return inp


def binary_infer_body(inputs: list[tuple[str, str, list[int], bytes]],
                      outputs: list[str] | None = None, **extra) -> tuple[bytes, dict]:
    """A binary-tensor request body and its headers, built by hand."""
    header = {"inputs": [{"name": n, "datatype": d, "shape": s,
                          "parameters": {"binary_data_size": len(b)}}
                         for n, d, s, b in inputs], **extra}
    if outputs is not None:
        header["outputs"] = [{"name": n, "parameters": {"binary_data": True}} for n in outputs]
    head = json.dumps(header).encode()
    body = head + b"".join(b for *_, b in inputs)
    return body, {"Inference-Header-Content-Length": str(len(head)),
                  "Content-Type": "application/octet-stream"}


def split_binary_response(headers: dict, body: bytes) -> tuple[dict, bytes]:
    length = int(headers["inference-header-content-length"])
    return json.loads(body[:length]), body[length:]


# ---- Health and metadata ---------------------------------------------------------------


def test_health(client, endpoints):
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("identity_fp32")
    assert client.is_model_ready("identity_fp32", "1")
    assert not client.is_model_ready("no_such_model")
    status, _, body = support.request(endpoints.http.port, "GET", "/v2/models/nope/ready")
    assert status == 400 and support.json_error(body)


def test_server_metadata(client, endpoints):
    metadata = client.get_server_metadata()
    assert metadata["name"] == "triton"
    assert metadata["version"] == endpoints.server.metadata()["version"]
    assert "binary_tensor_data" in metadata["extensions"]
    assert "model_repository" in metadata["extensions"]
    assert "trace" in metadata["extensions"]
    assert "system_shared_memory" in metadata["extensions"]
    assert "cuda_shared_memory" in metadata["extensions"]


def test_model_metadata(client):
    metadata = client.get_model_metadata("identity_fp32")
    assert metadata["name"] == "identity_fp32" and metadata["versions"] == ["1"]
    assert metadata["inputs"] == [{"name": "INPUT0", "datatype": "FP32", "shape": [-1]}]
    assert metadata["outputs"] == [{"name": "OUTPUT0", "datatype": "FP32", "shape": [-1]}]
    assert client.get_model_metadata("identity_fp32", "1") == metadata
    with pytest.raises(InferenceServerException) as e:
        client.get_model_metadata("no_such_model")
    assert e.value.status() == "404"


def test_model_config(client, endpoints):
    config = client.get_model_config("accumulate_int64")
    assert config == endpoints.server.model("accumulate_int64").config()
    assert config["sequence_batching"]["max_sequence_idle_microseconds"] == 60000000
    assert client.get_model_config("repeat_int32")["model_transaction_policy"]["decoupled"]


def test_model_statistics_one_and_all(client):
    before = client.get_inference_statistics("identity_fp32")["model_stats"][0]
    x = np.arange(4, dtype=np.float32)
    for _ in range(3):
        client.infer("identity_fp32", [fp32_input(x)])
    target = int(before["inference_count"]) + 3

    def counted() -> bool:
        stats = client.get_inference_statistics("identity_fp32")["model_stats"][0]
        return int(stats["inference_count"]) >= target

    support.wait_until(counted, what="statistics of 3 inferences")
    every = client.get_inference_statistics()["model_stats"]
    assert {s["name"] for s in every} >= {"identity_fp32", "add_sub_fp32", "repeat_int32"}
    one = client.get_inference_statistics("identity_fp32", "1")["model_stats"]
    assert [s["name"] for s in one] == ["identity_fp32"]


# ---- Inference -------------------------------------------------------------------------------


def test_infer_binary_and_json(client):
    x = np.linspace(-3, 3, 16, dtype=np.float32)
    for binary_in in (True, False):
        for binary_out in (True, False):
            result = client.infer("identity_fp32", [fp32_input(x, binary_in)], outputs=[
                httpclient.InferRequestedOutput("OUTPUT0", binary_data=binary_out)])
            np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), x)
            output = result.get_output("OUTPUT0")
            assert ("data" in output) != binary_out
            assert result.get_response()["model_version"] == "1"


def test_binary_data_output_and_per_output_choice(endpoints):
    a = np.arange(6, dtype=np.float32)
    b = np.full(6, 2, dtype=np.float32)
    # No outputs listed: binary_data_output decides for all of them.
    body, headers = binary_infer_body([("INPUT0", "FP32", [6], a.tobytes()),
                                       ("INPUT1", "FP32", [6], b.tobytes())],
                                      parameters={"binary_data_output": True})
    status, rh, data = support.request(endpoints.http.port, "POST",
                                       "/v2/models/add_sub_fp32/infer", body, headers)
    assert status == 200, data
    document, raw = split_binary_response(rh, data)
    sizes = [o["parameters"]["binary_data_size"] for o in document["outputs"]]
    assert sizes == [24, 24] and len(raw) == 48
    got = {o["name"]: np.frombuffer(raw[i * 24:(i + 1) * 24], np.float32)
           for i, o in enumerate(document["outputs"])}
    np.testing.assert_array_equal(got["OUTPUT0"], a + b)
    np.testing.assert_array_equal(got["OUTPUT1"], a - b)
    # One output as JSON, the other binary; only requested outputs come back, in order.
    header = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [6],
                          "data": a.tolist()},
                         {"name": "INPUT1", "datatype": "FP32", "shape": [2, 3],
                          "data": b.reshape(2, 3).tolist()}],
              "outputs": [{"name": "OUTPUT1", "parameters": {"binary_data": False}}],
              "id": "my-id"}
    status, rh, data = support.request(endpoints.http.port, "POST",
                                       "/v2/models/add_sub_fp32/infer",
                                       json.dumps(header).encode())
    assert status == 400  # shapes differ: the backend refuses
    header["inputs"][1]["shape"] = [6]
    header["inputs"][1]["data"] = b.tolist()
    status, rh, data = support.request(endpoints.http.port, "POST",
                                       "/v2/models/add_sub_fp32/infer",
                                       json.dumps(header).encode())
    assert status == 200 and rh["content-type"] == "application/json"
    document = json.loads(data)
    assert document["id"] == "my-id" and [o["name"] for o in document["outputs"]] == ["OUTPUT1"]
    assert document["outputs"][0]["data"] == (a - b).tolist()


def test_bytes_binary_and_json(client):
    values = np.array([b"hello", b"", b"w\x00rld", "héllo".encode()], dtype=object)
    inp = httpclient.InferInput("INPUT0", [4], "BYTES")
    inp.set_data_from_numpy(values)
    result = client.infer("identity_bytes", [inp])
    assert result.as_numpy("OUTPUT0").tolist() == values.tolist()
    inp = httpclient.InferInput("INPUT0", [4], "BYTES")
    inp.set_data_from_numpy(values, binary_data=False)
    result = client.infer("identity_bytes", [inp], outputs=[
        httpclient.InferRequestedOutput("OUTPUT0", binary_data=False)])
    # tritonclient reads JSON BYTES as str
    assert result.as_numpy("OUTPUT0").tolist() == [v.decode() for v in values]
    assert result.get_output("OUTPUT0")["data"] == ["hello", "", "w\x00rld", "héllo"]
    # Bytes that are not text cannot go out as JSON: a clear 400.
    inp = httpclient.InferInput("INPUT0", [1], "BYTES")
    inp.set_data_from_numpy(np.array([b"\xff\xfe"], dtype=object))
    with pytest.raises(InferenceServerException) as e:
        client.infer("identity_bytes", [inp], outputs=[
            httpclient.InferRequestedOutput("OUTPUT0", binary_data=False)])
    assert e.value.status() == "400" and "UTF-8" in e.value.message()


def test_fp16_bool_int8_uint64_fp64_bf16(endpoints, client):
    arrays = {
        "INPUT0": ("FP16", np.array([0.5, -1.25, 65504.0], dtype=np.float16)),
        "INPUT1": ("BOOL", np.array([True, False, True])),
        "INPUT2": ("INT8", np.array([-128, 0, 127], dtype=np.int8)),
        "INPUT3": ("UINT64", np.array([0, 1, 2**64 - 1], dtype=np.uint64)),
        "INPUT4": ("FP64", np.array([1e300, -0.0, 3.5])),
    }
    inputs = []
    for name, (datatype, array) in arrays.items():
        inp = httpclient.InferInput(name, list(array.shape), datatype)
        inp.set_data_from_numpy(array)
        inputs.append(inp)
    bf16 = np.array([0x3F80, 0xC000, 0x0000], dtype=np.uint16)  # 1.0, -2.0, 0.0
    bf16_values = support.client_bf16([1.0, -2.0, 0.0])
    inp = httpclient.InferInput("INPUT5", [3], "BF16")
    inp.set_data_from_numpy(bf16_values)
    inputs.append(inp)
    result = client.infer("identity_mixed", inputs)
    assert result.as_numpy("OUTPUT5").tobytes() == bf16_values.tobytes()
    for i, (name, (datatype, array)) in enumerate(arrays.items()):
        got = result.as_numpy(f"OUTPUT{i}")
        assert got.dtype == array.dtype
        np.testing.assert_array_equal(got, array)
        assert result.get_output(f"OUTPUT{i}")["datatype"] == datatype
    # BF16 by hand: the raw bytes come back unchanged.
    raw_inputs = [(f"INPUT{i}", d, [3], a.tobytes()) for i, (d, a) in
                  enumerate(arrays.values())] + [("INPUT5", "BF16", [3], bf16.tobytes())]
    body, headers = binary_infer_body(raw_inputs, outputs=["OUTPUT5", "OUTPUT1"])
    status, rh, data = support.request(endpoints.http.port, "POST",
                                       "/v2/models/identity_mixed/infer", body, headers)
    assert status == 200, data
    document, raw = split_binary_response(rh, data)
    assert [o["name"] for o in document["outputs"]] == ["OUTPUT5", "OUTPUT1"]
    assert document["outputs"][0]["datatype"] == "BF16"
    assert raw == bf16.tobytes() + np.array([True, False, True]).tobytes()
    # FP16 and BOOL as JSON both ways.
    header = {"inputs": [{"name": f"INPUT{i}", "datatype": d, "shape": [3],
                          "data": a.tolist()} for i, (d, a) in enumerate(arrays.values())]
              + [{"name": "INPUT5", "datatype": "BF16", "shape": [3],
                  "parameters": {"binary_data_size": 6}}],
              "outputs": [{"name": "OUTPUT0"}, {"name": "OUTPUT1"}]}
    head = json.dumps(header).encode()
    status, rh, data = support.request(
        endpoints.http.port, "POST", "/v2/models/identity_mixed/infer", head + bf16.tobytes(),
        {"Inference-Header-Content-Length": str(len(head))})
    assert status == 200, data
    outputs = json.loads(data)["outputs"]
    assert outputs[0]["data"] == arrays["INPUT0"][1].astype(float).tolist()
    assert outputs[1]["data"] == [True, False, True]


def test_sequence_correlation_ids(client):
    def step(seq, value, start=False, end=False):
        inp = httpclient.InferInput("INPUT", [1], "INT64")
        inp.set_data_from_numpy(np.array([value], dtype=np.int64))
        result = client.infer("accumulate_int64", [inp], sequence_id=seq, sequence_start=start,
                              sequence_end=end)
        return int(result.as_numpy("OUTPUT")[0])

    assert step(41, 5, start=True) == 5
    assert step("text-seq", 100, start=True) == 100  # a string correlation id
    assert step(41, 7) == 12
    assert step("text-seq", 1, end=True) == 101
    assert step(41, 1, end=True) == 13


def echoed(result) -> dict:
    """What python_echo_params saw: {"parameters": {...}, "request_id": ...}."""
    return json.loads(result.as_numpy("PARAMS")[0])


def test_parameters_and_forwarded_headers(client, endpoints):
    x = np.zeros(1, dtype=np.float32)
    result = client.infer("python_echo_params", [fp32_input(x)], request_id="req-7",
                          parameters={"temperature": 0.5, "mode": "fast", "n": 3, "flag": True})
    seen = echoed(result)
    assert seen == {"parameters": {"temperature": 0.5, "mode": "fast", "n": 3, "flag": True},
                    "request_id": "req-7"}
    assert result.get_response()["id"] == "req-7"
    # Keys starting with triton_ are reserved.
    body = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1],
                                   "data": [0]}], "parameters": {"triton_x": 1}}).encode()
    status, _, data = support.request(endpoints.http.port, "POST",
                                      "/v2/models/python_echo_params/infer", body)
    assert status == 400 and "reserved" in support.json_error(data)
    # A second frontend on the same server forwards matching headers as parameters.
    with KServeHttp(endpoints.server, KServeHttp.Options(
            port=0, header_forward_pattern="x-tenant.*")) as forwarding:
        c = httpclient.InferenceServerClient(forwarding.url)
        try:
            result = c.infer("python_echo_params", [fp32_input(x)],
                             headers={"X-Tenant-Id": "blue", "X-Other": "no"})
        finally:
            c.close()
    assert echoed(result)["parameters"] == {"x-tenant-id": "blue"}


def test_compression_both_ways(client):
    x = np.arange(1000, dtype=np.float32) % 7
    for request_alg, response_alg in (("gzip", "deflate"), ("deflate", "gzip")):
        result = client.infer("identity_fp32", [fp32_input(x)],
                              request_compression_algorithm=request_alg,
                              response_compression_algorithm=response_alg)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), x)


def test_gzip_response_on_the_wire(endpoints):
    x = np.arange(1024, dtype=np.float32)
    body, headers = binary_infer_body([("INPUT0", "FP32", [1024], x.tobytes())], ["OUTPUT0"])
    status, rh, data = support.request(endpoints.http.port, "POST",
                                       "/v2/models/identity_fp32/infer",
                                       gzip.compress(body),
                                       {**headers, "Content-Encoding": "gzip",
                                        "Accept-Encoding": "deflate;q=0.5, gzip"})
    assert status == 200 and rh["content-encoding"] == "gzip"
    document, raw = split_binary_response(rh, gzip.decompress(data))
    assert np.array_equal(np.frombuffer(raw, np.float32), x)


def test_small_responses_go_uncompressed_unless_identity_is_refused(endpoints):
    # Under 1 KiB a compressor costs more than it saves; HTTP allows identity unless refused.
    x = np.arange(8, dtype=np.float32)
    body, headers = binary_infer_body([("INPUT0", "FP32", [8], x.tobytes())], ["OUTPUT0"])
    for accept, expected in (("gzip", None), ("deflate, gzip;q=0.5", None),
                             ("gzip, identity;q=0", "gzip"), ("deflate, *;q=0", "deflate")):
        status, rh, data = support.request(endpoints.http.port, "POST",
                                           "/v2/models/identity_fp32/infer", body,
                                           {**headers, "Accept-Encoding": accept})
        assert status == 200 and rh.get("content-encoding") == expected, accept
        if expected == "gzip":
            data = gzip.decompress(data)
        elif expected == "deflate":
            data = zlib.decompress(data)
        document, raw = split_binary_response(rh, data)
        assert np.array_equal(np.frombuffer(raw, np.float32), x)


def test_raw_binary_request(endpoints):
    """Inference-Header-Content-Length: 0: the body is the only input's data."""
    x = np.arange(5, dtype=np.float32)
    status, rh, data = support.request(endpoints.http.port, "POST",
                                       "/v2/models/identity_fp32/infer", x.tobytes(),
                                       {"Inference-Header-Content-Length": "0"})
    assert status == 200, data
    document, raw = split_binary_response(rh, data)
    assert document["outputs"][0]["shape"] == [5]
    assert np.array_equal(np.frombuffer(raw, np.float32), x)
    status, _, data = support.request(endpoints.http.port, "POST",
                                      "/v2/models/add_sub_fp32/infer", x.tobytes(),
                                      {"Inference-Header-Content-Length": "0"})
    assert status == 400 and "exactly 1 input" in support.json_error(data)


def test_aio_client(endpoints):
    async def run() -> None:
        c = aiohttpclient.InferenceServerClient(endpoints.http_url)
        try:
            assert await c.is_server_live() and await c.is_model_ready("identity_fp32")
            assert (await c.get_model_metadata("identity_bytes"))["name"] == "identity_bytes"
            xs = [np.full(8, i, dtype=np.float32) for i in range(32)]

            async def one(x):
                inp = aiohttpclient.InferInput("INPUT0", [8], "FP32")
                inp.set_data_from_numpy(x)
                return (await c.infer("identity_fp32", [inp])).as_numpy("OUTPUT0")

            for x, y in zip(xs, await asyncio.gather(*(one(x) for x in xs))):
                np.testing.assert_array_equal(x, y)
            with pytest.raises(InferenceServerException):
                await c.get_model_config("no_such_model")
        finally:
            await c.close()

    asyncio.run(run())


# ---- Errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize("method, path, body, status", [
    ("POST", "/v2/models/no_such_model/infer",
     b'{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1],"data":[1]}]}', 404),
    ("POST", "/v2/models/identity_fp32/infer",
     b'{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1],"data":[1]}]}', 400),
    ("POST", "/v2/models/identity_fp32/infer",
     b'{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[3],"data":[1]}]}', 400),
    ("POST", "/v2/models/identity_fp32/infer",
     b'{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1],"data":[1]}],'
     b'"outputs":[{"name":"NOPE"}]}', 400),
    ("POST", "/v2/models/identity_fp32/versions/abc/infer", b"{}", 400),
    ("POST", "/v2/models/repeat_int32/infer",
     b'{"inputs":[{"name":"IN","datatype":"INT32","shape":[1],"data":[1]}]}', 501),
    ("GET", "/v2/models/identity_fp32/infer", b"", 405),
    ("GET", "/v2/no/such/path", b"", 404),
    ("POST", "/v2/trace/setting", b'{"trace_file":"x"}', 501),
    ("POST", "/v2/models/no_such_model/trace/setting", b"{}", 400),
    ("POST", "/v2/systemsharedmemory/region/r/register", b"{}", 501),  # client shm off
    ("GET", "/v2/systemsharedmemory/region/r/status", b"", 404),
    ("GET", "/v2/systemsharedmemory/region/r/register", b"", 405),
    ("POST", "/v2/repository/other/models/identity_fp32/load", b"{}", 501),
])
def test_error_codes(endpoints, method, path, body, status):
    got, headers, data = support.request(endpoints.http.port, method, path, body)
    assert got == status, data
    assert headers["content-type"] == "application/json"
    support.json_error(data)
    assert endpoints.server.live()


def test_tritonclient_sees_the_status(client):
    inp = httpclient.InferInput("IN", [1], "INT32")
    inp.set_data_from_numpy(np.array([1], dtype=np.int32))
    with pytest.raises(InferenceServerException) as e:
        client.infer("repeat_int32", [inp])
    assert e.value.status() == "501" and "decoupled" in e.value.message()


# ---- Model repository -------------------------------------------------------------------------


def test_repository_index(client):
    index = client.get_model_repository_index()
    names = {m["name"]: m for m in index}
    assert names["identity_fp32"]["state"] == "READY" and names["identity_fp32"]["version"] == "1"


def test_load_with_config_and_files_then_unload(client, endpoints):
    config = {"name": "loaded_identity", "backend": "identity", "max_batch_size": 0,
              "input": [{"name": "INPUT0", "data_type": "TYPE_INT32", "dims": [-1]}],
              "output": [{"name": "OUTPUT0", "data_type": "TYPE_INT32", "dims": [-1]}]}
    assert not client.is_model_ready("loaded_identity")
    client.load_model("loaded_identity", config=json.dumps(config),
                      files={"file:1/weights.txt": b"not read by the identity backend"})
    assert client.is_model_ready("loaded_identity")
    inp = httpclient.InferInput("INPUT0", [3], "INT32")
    inp.set_data_from_numpy(np.array([1, 2, 3], dtype=np.int32))
    result = client.infer("loaded_identity", [inp])
    assert result.as_numpy("OUTPUT0").tolist() == [1, 2, 3]
    client.unload_model("loaded_identity")
    support.wait_until(lambda: not client.is_model_ready("loaded_identity"),
                       what="loaded_identity unloaded")
    # A model loaded from files alone is forgotten once unloaded.
    states = {m["name"]: m.get("state") for m in client.get_model_repository_index()}
    assert states.get("loaded_identity") in (None, "UNAVAILABLE")
    # Reload an existing model from the repository, by name only.
    client.unload_model("identity_batched", unload_dependents=True)
    support.wait_until(lambda: not client.is_model_ready("identity_batched"),
                       what="identity_batched unloaded")
    client.load_model("identity_batched")
    assert client.is_model_ready("identity_batched")


def test_load_errors(endpoints):
    port = endpoints.http.port
    # The core's own error class for a model it cannot find (INTERNAL), as Triton answers.
    status, _, data = support.request(port, "POST", "/v2/repository/models/nope/load", b"")
    # Triton's text first (its QA matches it), then why, which the core logs only.
    assert status == 500 and support.json_error(data).startswith(
        "failed to load 'nope', failed to poll from model repository: model not found in any "
        "model repository (no folder 'nope' in: ")
    bad = json.dumps({"parameters": {"file:1/x": "***not base64***",
                                     "config": "{}"}}).encode()
    status, _, data = support.request(port, "POST", "/v2/repository/models/nope/load", bad)
    assert status == 400 and "base64" in support.json_error(data)
    # A configuration the core cannot parse: its error (INTERNAL), as Triton answers.
    good = json.dumps({"parameters": {"config": "{not json", "file:1/x":
                                      base64.b64encode(b"x").decode()}}).encode()
    status, _, data = support.request(port, "POST", "/v2/repository/models/nope2/load", good)
    assert status == 500 and support.json_error(data).startswith(
        "failed to load 'nope2', failed to poll from model repository: the 'config' load "
        "parameter is not valid JSON (")
    assert endpoints.server.live()
    status, _, data = support.request(port, "POST", "/v2/repository/index", b'{"ready": 3}')
    assert status == 400 and "ready" in support.json_error(data)


# ---- Logging ----------------------------------------------------------------------------------


def test_log_settings(client, endpoints):
    settings = client.get_log_settings()
    assert set(settings) == {"log_file", "log_info", "log_warning", "log_error",
                             "log_verbose_level", "log_format"}
    try:
        updated = client.update_log_settings({"log_verbose_level": 2, "log_info": True})
        assert updated["log_verbose_level"] == 2 and updated["log_info"] is True
        assert client.get_log_settings()["log_verbose_level"] == 2
    finally:
        client.update_log_settings({"log_verbose_level": settings["log_verbose_level"],
                                    "log_info": settings["log_info"]})
    port = endpoints.http.port
    for body, status in ((b'{"log_file": "x.log"}', 501),
                         (b'{"log_verbose_level": -1}', 400),
                         (b'{"log_info": "yes"}', 400),
                         (b'{"log_format": "fancy"}', 400),
                         (b'{"no_such_setting": 1}', 400)):
        got, _, data = support.request(port, "POST", "/v2/logging", body)
        assert got == status, (body, data)
        support.json_error(data)
    assert client.get_log_settings() == settings


# ---- Generate -----------------------------------------------------------------------------------


def test_generate(endpoints):
    port = endpoints.http.port
    status, headers, data = support.request(
        port, "POST", "/v2/models/identity_bytes/generate",
        json.dumps({"id": "42", "INPUT0": "hi there"}).encode())
    assert status == 200 and headers["content-type"] == "application/json", data
    assert json.loads(data) == {"id": "42", "model_name": "identity_bytes",
                                "model_version": "1", "OUTPUT0": "hi there"}
    # Keys that are model inputs become tensors (scalars or lists); the
    # others, and those under "parameters", become request parameters.
    status, _, data = support.request(port, "POST", "/v2/models/identity_fp32/generate",
                                      b'{"INPUT0": [1.5, 2.5], "temperature": 0.1}')
    assert status == 200 and json.loads(data)["OUTPUT0"] == [1.5, 2.5]
    status, _, data = support.request(
        port, "POST", "/v2/models/python_echo_params/generate",
        b'{"INPUT0": 1, "stream": false, "parameters": {"top_k": 5}}')
    assert status == 200, data
    assert json.loads(json.loads(data)["PARAMS"])["parameters"] == {"stream": False, "top_k": 5}
    # A model with several responses needs generate_stream.
    status, _, data = support.request(port, "POST", "/v2/models/repeat_int32/generate",
                                      b'{"IN": [1, 2]}')
    assert status == 500 and "exactly 1 response" in support.json_error(data)


def test_generate_stream(endpoints):
    port = endpoints.http.port
    status, headers, data = support.request(port, "POST",
                                            "/v2/models/repeat_int32/generate_stream",
                                            b'{"IN": [3, 1, 4]}')
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = support.sse_events(data)
    assert [e["OUT"] for e in events] == [3, 1, 4]
    assert all(e["model_name"] == "repeat_int32" and e["model_version"] == "1" for e in events)
    status, _, data = support.request(port, "POST", "/v2/models/identity_bytes/generate_stream",
                                       b'{"INPUT0": "only one"}')
    assert status == 200 and support.sse_events(data) == [
        {"model_name": "identity_bytes", "model_version": "1", "OUTPUT0": "only one"}]
    # Failing before inference starts: a plain JSON error with its status.
    status, headers, data = support.request(port, "POST", "/v2/models/nope/generate_stream",
                                            b'{"IN": [1]}')
    assert status == 404 and headers["content-type"] == "application/json"
    support.json_error(data)
    status, _, data = support.request(port, "POST", "/v2/models/repeat_int32/generate_stream",
                                      b'{"IN": ["x"]}')
    assert status == 400 and support.json_error(data)


# ---- Limits and restricted APIs ------------------------------------------------------------------


def test_max_input_size(endpoints):
    with KServeHttp(endpoints.server, KServeHttp.Options(port=0, max_input_size=4096)) as small:
        x = np.zeros(2048, dtype=np.float32)  # 8 KiB
        body, headers = binary_infer_body([("INPUT0", "FP32", [2048], x.tobytes())])
        status, rh, data = support.request(small.port, "POST",
                                           "/v2/models/identity_fp32/infer", body, headers)
        assert status == 400 and "maximum allowed input size" in support.json_error(data)
        assert rh.get("connection") == "close"

        # Chunked, with no Content-Length: refused once past the limit.
        chunked = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 1000]), body[i:i + 1000])
                           for i in range(0, len(body), 1000)) + b"0\r\n\r\n"
        raw = support.raw_exchange(small.port, (
            b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\n"
            b"Transfer-Encoding: chunked\r\nInference-Header-Content-Length: %s\r\n\r\n"
            % headers["Inference-Header-Content-Length"].encode()) + chunked)
        status, _, data = support.parse_response(raw)
        assert status == 400, data
        x = np.zeros(16, dtype=np.float32)
        body, headers = binary_infer_body([("INPUT0", "FP32", [16], x.tobytes())])
        status, _, data = support.request(small.port, "POST", "/v2/models/identity_fp32/infer",
                                          body, headers)
        assert status == 200, data


def test_restricted_apis(endpoints):
    options = KServeHttp.Options(port=0, restricted_features=[
        "model-repository,logging:admin-key=secret", "statistics:stats-key=s2"])
    with KServeHttp(endpoints.server, options) as guarded:
        port = guarded.port
        for method, path in (("POST", "/v2/repository/index"), ("GET", "/v2/logging"),
                             ("GET", "/v2/models/stats")):
            status, _, data = support.request(port, method, path)
            assert status == 403 and "restricted" in support.json_error(data)
        status, _, data = support.request(port, "POST", "/v2/repository/index",
                                          headers={"admin-key": "wrong"})
        assert status == 403
        status, _, data = support.request(port, "POST", "/v2/repository/index",
                                          headers={"Admin-Key": "secret"})
        assert status == 200 and json.loads(data)
        status, _, _ = support.request(port, "GET", "/v2/models/stats",
                                       headers={"stats-key": "s2"})
        assert status == 200
        status, _, _ = support.request(port, "GET", "/v2/health/ready")
        assert status == 200  # not restricted
        c = httpclient.InferenceServerClient(guarded.url)
        try:
            with pytest.raises(InferenceServerException):
                c.get_model_repository_index()
            assert c.get_model_repository_index(headers={"admin-key": "secret"})
        finally:
            c.close()
    with pytest.raises(tritonserver.InvalidArgumentError):
        KServeHttp(endpoints.server, KServeHttp.Options(
            port=0, restricted_features=["no-such-api:k=v"]))
    with pytest.raises(tritonserver.InvalidArgumentError):
        KServeHttp(endpoints.server, KServeHttp.Options(
            port=0, restricted_features=["logging:k=v", "logging:k2=v"]))


def test_metrics(endpoints, client):
    client.infer("identity_fp32", [fp32_input(np.zeros(2, np.float32))])
    stats_when(endpoints.server.model("identity_fp32"),
               lambda s: int(s["inference_count"]) > 0)
    status, headers, data = support.request(endpoints.metrics.port, "GET", "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    text = data.decode()
    assert 'nv_inference_count{model="identity_fp32",version="1"}' in text
    status, _, _ = support.request(endpoints.metrics.port, "GET", "/v2")
    assert status == 404


def test_app_for_a_server_provider(endpoints):
    """create_http_app over a callable (as a Ray Serve deployment builds it),
    served by another ASGI server setup."""
    from tritonserver.frontends import create_http_app
    from tritonserver.frontends._runner import HttpService

    calls = []

    def provider() -> tritonserver.Server:
        calls.append(1)
        return endpoints.server

    service = HttpService("test-app", create_http_app(provider), "127.0.0.1", 0, False, 1, 5)
    service.start()
    try:
        x = np.arange(3, dtype=np.float32)
        body, headers = binary_infer_body([("INPUT0", "FP32", [3], x.tobytes())], ["OUTPUT0"])
        status, rh, data = support.request(service.port, "POST",
                                           "/v2/models/identity_fp32/infer", body, headers)
        assert status == 200, data
        _, raw = split_binary_response(rh, data)
        assert np.array_equal(np.frombuffer(raw, np.float32), x)
    finally:
        assert service.stop(5)
    assert calls


def test_bytes_element_layout_is_checked(endpoints):
    good = struct.pack("<I", 2) + b"ab" + struct.pack("<I", 0)
    for data, status in ((good, 200), (good + b"x", 400), (good[:-1], 400),
                         (struct.pack("<I", 99) + b"ab" + struct.pack("<I", 0), 400)):
        body, headers = binary_infer_body([("INPUT0", "BYTES", [2], data)])
        got, _, reply = support.request(endpoints.http.port, "POST",
                                        "/v2/models/identity_bytes/infer", body, headers)
        assert got == status, reply
