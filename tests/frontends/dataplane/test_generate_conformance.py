"""The generate extension answers as Triton's frontend does where Triton's
QA (qa/L0_http/generate_endpoint_test.py) reads the answer: a model input
given twice is refused with the core's text, a parameter of a type Triton
cannot carry and a value of the wrong JSON type get Triton's texts, and a
streaming request that fails before it runs is a plain JSON error while a
model whose first response is an error streams that error with its status.

Real server, real HTTP: a decoupled python model (run in-process) shaped
like QA's mock_llm, written here."""

from __future__ import annotations

import json
import os
from typing import Any, Iterator

import pytest

import tritonserver
from conftest import start_server, stop_within
from frontends import support
from frontends.conftest import Endpoints

MODEL = "generate_mock"
CONFIG = f'''name: "{MODEL}"
backend: "inprocess"
max_batch_size: 0
model_transaction_policy {{ decoupled: true }}
input [
  {{ name: "PROMPT", data_type: TYPE_STRING, dims: [ 1, 1 ] }},
  {{ name: "STREAM", data_type: TYPE_BOOL, dims: [ 1, 1 ] }},
  {{ name: "input_ids", data_type: TYPE_INT32, dims: [ 1, -1 ], optional: true }}
]
output [ {{ name: "TEXT", data_type: TYPE_STRING, dims: [ 1, -1 ] }} ]
instance_group [ {{ kind: KIND_CPU, count: 1 }} ]
'''
# Sends the prompt back REPETITION times (at most once where STREAM is false), then
# the final flag, or an error in its place where FAIL_LAST is set; ECHO_PARAMS
# answers with the request's parameters as the text instead.
MODEL_PY = '''
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            params = json.loads(request.parameters() or "{}")
            sender = request.get_response_sender()
            prompt = pb_utils.get_input_tensor_by_name(request, "PROMPT").as_numpy()
            stream = bool(pb_utils.get_input_tensor_by_name(request, "STREAM").as_numpy()
                          .flatten()[0])
            if params.get("ECHO_PARAMS"):
                prompt = np.array([[json.dumps(params).encode()]], dtype=object)
            response = pb_utils.InferenceResponse([pb_utils.Tensor("TEXT", prompt)])
            for _ in range(params.get("REPETITION", 1) if stream else
                           min(params.get("REPETITION", 1), 1)):
                sender.send(response)
            last = None
            if params.get("FAIL_LAST"):
                last = pb_utils.InferenceResponse(
                    error=pb_utils.TritonError("An Error Occurred"))
            sender.send(last, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
'''
SSE = "text/event-stream; charset=utf-8"
ROUTES = ("generate", "generate_stream")
INVALID_TYPE = "has invalid type. It should be either 'int', 'bool', or 'string'."


@pytest.fixture(scope="module")
def frontend_server(tmp_path_factory: Any) -> Iterator[tritonserver.Server]:
    """Replaces conftest's: this module's model only."""
    repo = tmp_path_factory.mktemp("generate")
    os.makedirs(repo / MODEL / "1")
    (repo / MODEL / "config.pbtxt").write_text(CONFIG)
    (repo / MODEL / "1" / "model.py").write_text(MODEL_PY)
    server = start_server(model_repository=str(repo))
    yield server
    stop_within(server)


def post(endpoints: Endpoints, route: str, body: Any) -> tuple[int, dict[str, str], bytes]:
    data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    headers = {"Accept": "text/event-stream"} if route == "generate_stream" else {}
    return support.request(endpoints.http.port, "POST", f"/v2/models/{MODEL}/{route}", data,
                           headers)


def refusal(endpoints: Endpoints, route: str, body: Any) -> tuple[int, str]:
    """(status, error text) of a request refused before it runs: a plain
    JSON error on both routes, as Triton answers one."""
    status, headers, data = post(endpoints, route, body)
    assert status != 200, data
    assert headers["content-type"] == "application/json", (route, body, headers)
    return status, support.json_error(data)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("body, name", [
    ('{"PROMPT": "hello", "STREAM": false, "PROMPT": "duplicate"}', "PROMPT"),
    ('{"PROMPT": "hello", "STREAM": false, "STREAM": false}', "STREAM"),
    # Members are read in order: the first one repeated is named.
    ('{"PROMPT": "hello", "STREAM": false, "PROMPT": "again", "STREAM": true}', "PROMPT"),
    ('{"PROMPT": "hello", "STREAM": false, "STREAM": true, "PROMPT": "again"}', "STREAM"),
])
def test_an_input_given_twice_is_refused_with_the_cores_text(endpoints: Endpoints, route: str,
                                                             body: str, name: str):
    # Before: the parser kept the last value and the request ran.
    assert refusal(endpoints, route, body) == (
        400, f"[request id: <id_unknown>] input '{name}' already exists in request")


def test_an_input_given_twice_names_the_request_id(endpoints: Endpoints):
    body = '{"id": "7", "PROMPT": "a", "STREAM": false, "PROMPT": "b"}'
    assert refusal(endpoints, "generate", body)[1] == (
        "[request id: 7] input 'PROMPT' already exists in request")


def test_a_parameter_given_twice_is_read_with_its_first_value(endpoints: Endpoints):
    """Triton looks a repeated key up, and its lookup finds the first."""
    body = '{"PROMPT": "x", "STREAM": false, "ECHO_PARAMS": true, "k": 1, "k": 2}'
    status, _, data = post(endpoints, "generate", body)
    assert status == 200, data
    assert json.loads(json.loads(data)["TEXT"])["k"] == 1


@pytest.mark.parametrize("route", ROUTES)
def test_an_object_as_a_parameter_gets_tritons_text(endpoints: Endpoints, route: str):
    body = {"PROMPT": "hi", "STREAM": True, "PARAMS": {"PARAM_0": 0, "PARAM_1": True}}
    # Before: "parameter 'PARAMS' must be a string, number or boolean, not dict".
    assert refusal(endpoints, route, body) == (400, f"parameter 'PARAMS' {INVALID_TYPE}")
    body = {"PROMPT": "hi", "STREAM": True, "nothing": None}
    assert refusal(endpoints, route, body) == (400, f"parameter 'nothing' {INVALID_TYPE}")


@pytest.mark.parametrize("route", ROUTES)
def test_an_object_within_parameters_names_the_keyword(endpoints: Endpoints, route: str):
    body = {"PROMPT": ["hi"], "STREAM": True, "parameters": {"nested": {"twice": 1}}}
    assert refusal(endpoints, route, body) == (
        400, f"Converting keyword: 'parameters': parameter 'nested' {INVALID_TYPE}")
    body = {"PROMPT": ["hi"], "STREAM": True, "parameters": 1}
    assert refusal(endpoints, route, body) == (
        400, "Expected JSON object for keyword: 'parameters'")


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("body, text", [
    ({"PROMPT": 123, "STREAM": False},
     "Unable to parse JSON bytes array: attempt to access JSON non-string as string"),
    ({"PROMPT": {"USER": "hello", "BOT": "world"}, "STREAM": True},
     "Unable to parse JSON bytes array: attempt to access JSON non-string as string"),
    ({"PROMPT": ["a", ["b", 3]], "STREAM": True},
     "Unable to parse JSON bytes array: attempt to access JSON non-string as string"),
    ({"PROMPT": "hello", "STREAM": "false"},
     "Unable to parse 'data': attempt to access JSON non-boolean as boolean"),
    # Members are converted in order: the first one of a wrong type is named.
    ({"PROMPT": True, "STREAM": 123},
     "Unable to parse JSON bytes array: attempt to access JSON non-string as string"),
    ({"STREAM": 123, "PROMPT": True},
     "Unable to parse 'data': attempt to access JSON non-boolean as boolean"),
])
def test_a_value_of_the_wrong_json_type_gets_tritons_text(endpoints: Endpoints, route: str,
                                                          body: dict, text: str):
    # Triton's JSON reader reports these as internal errors: 500.
    assert refusal(endpoints, route, body) == (500, text)


@pytest.mark.parametrize("body, text", [
    ({"STREAM": False}, "expected number of inputs between 2 and 3 but got 1"),
    ({"PROMPT": "hi", "STREAM": "no"}, "attempt to access JSON non-boolean as boolean"),
    ('{"PROMPT": "a", "STREAM": true, "PROMPT": "b"}', "already exists in request"),
])
def test_a_stream_refused_before_it_runs_is_a_plain_json_error(endpoints: Endpoints, body: Any,
                                                               text: str):
    """Not an event stream: no response of the model set the status yet."""
    status, message = refusal(endpoints, "generate_stream", body)
    assert status in (400, 500) and text in message


def test_a_models_error_as_its_first_response_is_streamed_with_its_status(endpoints: Endpoints):
    """Triton's first response sets the stream's status: an error first
    gives an error status, the event stream's type, and the error as its one
    event (before: a plain JSON error). The status is the error's own (500
    for a model's error); Triton's frontend reads the code of an error it has
    already freed there, and 2.51's executable answered 400."""
    body = {"PROMPT": ["hello"], "STREAM": True, "REPETITION": 0, "FAIL_LAST": True}
    status, headers, data = post(endpoints, "generate_stream", body)
    assert (status, headers["content-type"]) == (500, SSE), data
    assert data == b'data: {"error":"An Error Occurred"}\n\n'
    # A response first: 200, and the error follows as an event.
    body["REPETITION"] = 1
    status, headers, data = post(endpoints, "generate_stream", body)
    assert (status, headers["content-type"]) == (200, SSE), data
    events = support.sse_events(data)
    assert [e.get("TEXT") for e in events] == ["hello", None]
    assert events[1] == {"error": "An Error Occurred"}
    # The non-streaming route answers the model's error as a JSON error.
    status, message = refusal(endpoints, "generate", {"PROMPT": "x", "STREAM": False,
                                                      "REPETITION": 0, "FAIL_LAST": True})
    assert (status, message) == (500, "An Error Occurred")


def test_a_stream_with_no_response_is_an_empty_success(endpoints: Endpoints):
    status, headers, data = post(endpoints, "generate_stream",
                                 {"PROMPT": "x", "STREAM": True, "REPETITION": 0})
    assert (status, headers["content-type"], data) == (200, SSE, b"")
