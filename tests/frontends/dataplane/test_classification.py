"""The classification extension over HTTP and gRPC, with the real tritonclient
(`class_count` on InferRequestedOutput): Triton's "<value>:<index>[:<label>]"
BYTES tensors, top k per batch item, labels from the model's label file, and
Triton's errors for outputs and values it refuses."""

from __future__ import annotations

import json
import os
from typing import Any, Iterator

import numpy as np
import pytest

import tritonserver
from conftest import start_server, stop_within
from frontends import support
from frontends.conftest import Endpoints

import tritonclient.grpc as grpcclient  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

# Line 2 is empty and there are 4 lines: classes 2 and 4 on have no label.
LABELS = "cat\ndog\n\nfish\n"
# Every datatype, by input/output index, on one model of optional inputs.
TYPES = ["UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64",
         "FP32", "FP64", "FP16", "BF16", "BOOL", "BYTES"]
NUMERIC = TYPES[:10]
REFUSED = TYPES[10:]


def _identity(name: str, max_batch_size: int, datatypes: list[str], labels: bool) -> str:
    label = ' label_filename: "labels.txt"' if labels else ""
    optional = " optional: true" if len(datatypes) > 1 else ""
    types = [t if t != "BYTES" else "STRING" for t in datatypes]  # the config's name
    inputs = ",\n".join(f'  {{ name: "INPUT{i}" data_type: TYPE_{t} dims: [ -1 ]{optional} }}'
                        for i, t in enumerate(types))
    outputs = ",\n".join(f'  {{ name: "OUTPUT{i}" data_type: TYPE_{t} dims: [ -1 ]{label} }}'
                         for i, t in enumerate(types))
    return (f'name: "{name}"\nbackend: "identity"\nmax_batch_size: {max_batch_size}\n'
            f"input [\n{inputs}\n]\noutput [\n{outputs}\n]\n"
            'instance_group [ { kind: KIND_CPU, count: 1 } ]\n')


MODELS = {
    "labelled": (0, ["FP32"], True),
    "unlabelled": (0, ["FP32"], False),
    "labelled_batched": (8, ["FP32"], True),
    "every_type": (0, TYPES, True),
}


@pytest.fixture(scope="module")
def frontend_server(tmp_path_factory: Any) -> Iterator[tritonserver.Server]:
    """Replaces conftest's: this module's models only."""
    repo = tmp_path_factory.mktemp("classification")
    for name, (batch, datatypes, labels) in MODELS.items():
        os.makedirs(repo / name / "1")
        (repo / name / "config.pbtxt").write_text(_identity(name, batch, datatypes, labels))
        if labels:
            (repo / name / "labels.txt").write_text(LABELS)
    server = start_server(model_repository=str(repo))
    yield server
    stop_within(server)


@pytest.fixture(scope="module")
def http(endpoints: Endpoints) -> Iterator[httpclient.InferenceServerClient]:
    client = httpclient.InferenceServerClient(endpoints.http_url)
    yield client
    client.close()


@pytest.fixture(scope="module")
def grpc(endpoints: Endpoints) -> Iterator[grpcclient.InferenceServerClient]:
    client = grpcclient.InferenceServerClient(endpoints.grpc_url)
    yield client
    client.close()


def classify(client: Any, model: str, values: np.ndarray, k: int, index: int = 0,
             datatype: str = "FP32", binary: bool = True) -> tuple[list[int], list[Any]]:
    """(shape, elements as bytes) of OUTPUT<index> asked for its top k classes."""
    is_http = isinstance(client, httpclient.InferenceServerClient)
    module: Any = httpclient if is_http else grpcclient
    inp = module.InferInput(f"INPUT{index}", list(values.shape), datatype)
    if is_http:
        inp.set_data_from_numpy(values, binary_data=True)
        out = module.InferRequestedOutput(f"OUTPUT{index}", binary_data=binary, class_count=k)
    else:
        inp.set_data_from_numpy(values)
        out = module.InferRequestedOutput(f"OUTPUT{index}", class_count=k)
    result = client.infer(model, [inp], outputs=[out])
    output = result.get_output(f"OUTPUT{index}")
    if is_http:
        assert output["datatype"] == "BYTES"
    else:
        assert output.datatype == "BYTES"
    array = result.as_numpy(f"OUTPUT{index}")
    shape = list(output["shape"] if is_http else output.shape)
    assert list(array.shape) == shape
    items = [x if isinstance(x, bytes) else str(x).encode() for x in array.reshape(-1)]
    return shape, items


@pytest.fixture(params=["http", "grpc"])
def client(request: Any, http: Any, grpc: Any) -> Any:
    return http if request.param == "http" else grpc


def refusal(client: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(InferenceServerException) as info:
        classify(client, *args, **kwargs)
    status = str(info.value.status())
    if isinstance(client, httpclient.InferenceServerClient):
        assert status == "400", status
    else:
        assert status == "StatusCode.INVALID_ARGUMENT", status
    return str(info.value.message())


SCORES = np.array([0.1, 0.7, 0.15, 0.05, 0.5, 0.7], np.float32)


# ---- Values, labels, k ----------------------------------------------------------------


def test_top_k_with_labels(client):
    shape, items = classify(client, "labelled", SCORES, 3)
    # Equal values: the lower index first; classes 4 and 5 have no label.
    assert shape == [3]
    assert items == [b"0.700000:1:dog", b"0.700000:5", b"0.500000:4"]


def test_k_of_one_all_and_more(client):
    assert classify(client, "labelled", SCORES, 1) == ([1], [b"0.700000:1:dog"])
    everything = [b"0.700000:1:dog", b"0.700000:5", b"0.500000:4", b"0.150000:2",
                  b"0.100000:0:cat", b"0.050000:3:fish"]
    assert classify(client, "labelled", SCORES, 6) == ([6], everything)
    # More than the classes: all of them, shape [classes].
    assert classify(client, "labelled", SCORES, 1000) == ([6], everything)


def test_without_label_file(client):
    assert classify(client, "unlabelled", SCORES, 2) == ([2], [b"0.700000:1", b"0.700000:5"])


def test_batched_model_classifies_each_item(client):
    scores = np.array([[0.1, 0.2, 0.9, 0.3], [4.0, 3.0, 2.0, 1.0], [0, 0, 0, 1]], np.float32)
    shape, items = classify(client, "labelled_batched", scores, 2)
    assert shape == [3, 2]
    assert items == [b"0.900000:2", b"0.300000:3:fish",
                     b"4.000000:0:cat", b"3.000000:1:dog",
                     b"1.000000:3:fish", b"0.000000:0:cat"]
    # k above the classes of an item: [batch, classes].
    assert classify(client, "labelled_batched", scores[:1], 9)[0] == [1, 4]


def test_non_batched_model_classifies_the_whole_output(client):
    scores = np.array([[0.1, 0.2], [0.9, 0.3]], np.float32)
    shape, items = classify(client, "unlabelled", scores.reshape(-1), 3)
    assert (shape, items) == ([3], [b"0.900000:2", b"0.300000:3", b"0.200000:1"])


@pytest.mark.parametrize("datatype", NUMERIC)
def test_every_numeric_type(client, datatype):
    index = TYPES.index(datatype)
    dtype = np.dtype(datatype.lower().replace("fp", "float"))
    if dtype.kind == "f":
        values = np.array([1.5, -2.25, 1e20, 3.0], dtype)
        expected = ([b"100000000000000000000.000000:2", b"3.000000:3:fish",
                     b"1.500000:0:cat"] if dtype == np.float64 else
                    [b"100000002004087734272.000000:2", b"3.000000:3:fish", b"1.500000:0:cat"])
    else:
        info = np.iinfo(dtype)
        values = np.array([info.min, 7, info.max, 7], dtype)
        expected = [f"{info.max}:2".encode(), b"7:1:dog", b"7:3:fish"]
    assert classify(client, "every_type", values, 3, index, datatype) == ([3], expected)


def test_infinities_and_nan(client):
    values = np.array([np.inf, -np.inf, np.nan, 1.0], np.float32)
    shape, items = classify(client, "unlabelled", values, 4)
    assert items == [b"inf:0", b"1.000000:3", b"-inf:1", b"nan:2"]


@pytest.mark.parametrize("datatype", REFUSED)
def test_non_numeric_output_refused(client, endpoints, datatype):
    index = TYPES.index(datatype)
    if datatype == "BYTES":
        values = np.array([b"a", b"b"], dtype=np.object_)
    elif datatype == "BOOL":
        values = np.array([True, False])
    elif datatype == "BF16":
        values = np.array([1.0, 2.0], np.float32)  # sent as BF16 by hand below
    else:
        values = np.array([1.0, 2.0], np.float16)
    if datatype == "BF16":
        status, body = _http_json(endpoints, "every_type", {
            "inputs": [{"name": "INPUT11", "datatype": "BF16", "shape": [2],
                        "parameters": {"binary_data_size": 4}}],
            "outputs": [{"name": "OUTPUT11", "parameters": {"classification": 1}}]},
            binary=b"\x80\x3f\x00\x40")
        assert status == 400
        message = support.json_error(body)
    else:
        message = refusal(client, "every_type", values, 2, index, datatype)
    assert message == f"class result not available for output due to unsupported type '{datatype}'"
    assert endpoints.server.live()


# ---- The wire ---------------------------------------------------------------------------


def _http_json(endpoints: Endpoints, model: str, document: dict[str, Any],
               binary: bytes = b"") -> tuple[int, bytes]:
    header = json.dumps(document).encode()
    headers = {"Content-Type": "application/json"}
    if binary:
        headers["Inference-Header-Content-Length"] = str(len(header))
    status, _, body = support.request(endpoints.http.port, "POST", f"/v2/models/{model}/infer",
                                      header + binary, headers)
    return status, body


def _fp32_document(k: Any, **output: Any) -> dict[str, Any]:
    return {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [6],
                        "data": SCORES.tolist()}],
            "outputs": [{"name": "OUTPUT0", "parameters": {"classification": k, **output}}]}


def test_http_json_and_binary_forms(endpoints, http):
    status, body = _http_json(endpoints, "labelled", _fp32_document(2))
    assert status == 200, body
    assert json.loads(body)["outputs"] == [{"name": "OUTPUT0", "datatype": "BYTES", "shape": [2],
                                            "data": ["0.700000:1:dog", "0.700000:5"]}]
    status, body = _http_json(endpoints, "labelled", _fp32_document(2, binary_data=True))
    assert status == 200, body
    header = json.loads(body[:body.index(b"}]}") + 3])
    assert header["outputs"][0]["parameters"] == {"binary_data_size": 32}
    assert body.endswith(b"\x0e\x00\x00\x00" + b"0.700000:1:dog" + b"\x0a\x00\x00\x00"
                         + b"0.700000:5")
    # The JSON form through tritonclient too.
    assert classify(http, "labelled", SCORES, 1, binary=False) == ([1], [b"0.700000:1:dog"])


def test_http_zero_is_the_plain_output(endpoints):
    for k in (0, 1 << 32):  # Triton holds k in 32 bits
        status, body = _http_json(endpoints, "labelled", _fp32_document(k))
        assert status == 200, body
        out = json.loads(body)["outputs"][0]
        assert out["datatype"] == "FP32" and out["shape"] == [6]
    status, body = _http_json(endpoints, "labelled", _fp32_document((1 << 32) + 1))
    assert json.loads(body)["outputs"][0]["data"] == ["0.700000:1:dog"]


@pytest.mark.parametrize("k", [-1, "3", 1.5, True, None, [3], 1 << 64])
def test_http_bad_values(endpoints, k):
    status, body = _http_json(endpoints, "labelled", _fp32_document(k))
    assert status == 400, body
    assert support.json_error(body) == ("Unable to set 'classification': attempt to access "
                                        "JSON non-unsigned-integer as unsigned-integer")
    assert endpoints.server.live()


def test_http_client_negative_count(http):
    message = refusal(http, "labelled", SCORES, -2)
    assert message == ("Unable to set 'classification': attempt to access JSON "
                       "non-unsigned-integer as unsigned-integer")


def test_grpc_bad_values(grpc, endpoints):
    for k in (-1, -(1 << 40)):
        assert refusal(grpc, "labelled", SCORES, k) == (
            "invalid value for 'classification' parameter, expected >= 0")
    inp = grpcclient.InferInput("INPUT0", [6], "FP32")
    inp.set_data_from_numpy(SCORES)
    for kind, value in (("string_param", "3"), ("bool_param", True), ("double_param", 2.0),
                        ("uint64_param", 3)):
        out = grpcclient.InferRequestedOutput("OUTPUT0")
        setattr(out._get_tensor().parameters["classification"], kind, value)
        with pytest.raises(InferenceServerException) as info:
            grpc.infer("labelled", [inp], outputs=[out])
        assert str(info.value.status()) == "StatusCode.INVALID_ARGUMENT"
        assert info.value.message() == (
            "invalid value type for 'classification' parameter, expected int64_param")
    assert grpc.is_server_live()


def test_grpc_stream(grpc):
    import queue

    results: queue.SimpleQueue[Any] = queue.SimpleQueue()
    grpc.start_stream(callback=lambda result, error: results.put((result, error)))
    try:
        inp = grpcclient.InferInput("INPUT0", [2, 4], "FP32")
        inp.set_data_from_numpy(np.array([[1, 2, 3, 4], [4, 3, 2, 1]], np.float32))
        grpc.async_stream_infer("labelled_batched", [inp], outputs=[
            grpcclient.InferRequestedOutput("OUTPUT0", class_count=1)])
        result, error = results.get(timeout=30)
    finally:
        grpc.stop_stream()
    assert error is None
    assert result.as_numpy("OUTPUT0").tolist() == [[b"4.000000:3:fish"], [b"4.000000:0:cat"]]


def test_other_outputs_unchanged(client):
    is_http = isinstance(client, httpclient.InferenceServerClient)
    module: Any = httpclient if is_http else grpcclient
    inputs = []
    for index, (datatype, values) in enumerate([("UINT8", [3, 1, 2]), ("UINT16", [5, 6])]):
        inp = module.InferInput(f"INPUT{index}", [len(values)], datatype)
        inp.set_data_from_numpy(np.array(values, datatype.lower()))
        inputs.append(inp)
    result = client.infer("every_type", inputs, outputs=[
        module.InferRequestedOutput("OUTPUT1"),
        module.InferRequestedOutput("OUTPUT0", class_count=2)])
    assert result.as_numpy("OUTPUT1").tolist() == [5, 6]
    assert result.as_numpy("OUTPUT0").tolist() == [b"3:0:cat", b"2:2"]


def test_metadata_lists_classification(http, grpc):
    assert "classification" in http.get_server_metadata()["extensions"]
    assert "classification" in grpc.get_server_metadata(as_json=True)["extensions"]
