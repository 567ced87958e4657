"""pb_utils' module-level helpers, constants and Logger, with the python
backend's behaviour: BYTES (de)serialization, the type table, the
decoupled check python-backend decoupled models start with, request release
flags, get_model_dir, and Logger's levels (lines of the server's log)."""

from __future__ import annotations

import json
import logging
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import tritonserver
from tritonserver._inprocess._pb_types import ModelContext, running_for
from conftest import start_server, stop_within, write_model
from tritonserver._inprocess import pb_utils

LOGGER = "tritonserver.inprocess"

# Every module-level name of the python backend's triton_python_backend_utils
# (r24.10: its .py file, and what its stub adds) that pb_utils covers.
PYTHON_BACKEND_NAMES = [
    "TRITON_STRING_TO_NUMPY", "serialize_byte_tensor", "deserialize_bytes_tensor",
    "get_input_tensor_by_name", "get_output_tensor_by_name", "get_input_config_by_name",
    "get_output_config_by_name", "using_decoupled_model_transaction_policy",
    "triton_to_numpy_type", "numpy_to_triton_type", "triton_string_to_numpy", "ModelConfig",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_START", "TRITONSERVER_REQUEST_FLAG_SEQUENCE_END",
    "TRITONSERVER_RESPONSE_COMPLETE_FINAL", "TRITONSERVER_REQUEST_RELEASE_ALL",
    "TRITONSERVER_REQUEST_RELEASE_RESCHEDULE",
    # the stub's
    "TritonError", "TritonModelException", "Tensor", "InferenceRequest", "InferenceResponse",
    "Logger", "get_model_dir",
]


def test_the_python_backends_module_level_names_are_there():
    assert [n for n in PYTHON_BACKEND_NAMES if not hasattr(pb_utils, n)] == []
    assert (pb_utils.TRITONSERVER_REQUEST_RELEASE_ALL,
            pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE) == (1, 2)
    assert pb_utils.TRITON_STRING_TO_NUMPY["TYPE_STRING"] is np.object_
    assert pb_utils.TRITON_STRING_TO_NUMPY["TYPE_FP16"] is np.float16
    assert len(pb_utils.TRITON_STRING_TO_NUMPY) == 13  # no BF16, as the python backend


def test_serialize_byte_tensor():
    array = np.array([[b"ab", "c\u00e9"], [7, b""]], dtype=np.object_)
    encoded = pb_utils.serialize_byte_tensor(array)
    assert encoded == (b"\x02\x00\x00\x00ab" + b"\x03\x00\x00\x00c\xc3\xa9"
                       + b"\x01\x00\x00\x007" + b"\x00\x00\x00\x00")
    # C order, whatever the layout; np.bytes_ arrays as their (NUL-stripped) bytes.
    assert pb_utils.serialize_byte_tensor(array.T) == pb_utils.serialize_byte_tensor(
        np.array([b"ab", 7, "c\u00e9", b""], dtype=np.object_))
    assert pb_utils.serialize_byte_tensor(np.array([b"x", b"yz"])) == \
        b"\x01\x00\x00\x00x\x02\x00\x00\x00yz"
    assert pb_utils.serialize_byte_tensor(np.array([], dtype=np.object_)) == ()
    assert pb_utils.serialize_byte_tensor(np.zeros(3, np.float32)) is None


def test_deserialize_bytes_tensor():
    encoded = pb_utils.serialize_byte_tensor(np.array([b"one", b"", b"\x00three"], np.object_))
    for given in (encoded, bytearray(encoded), np.frombuffer(encoded, np.uint8)):
        decoded = pb_utils.deserialize_bytes_tensor(given)
        assert decoded.dtype == np.object_ and decoded.shape == (3,)
        assert decoded.tolist() == [b"one", b"", b"\x00three"]
    assert pb_utils.deserialize_bytes_tensor(b"").shape == (0,)
    same_length = pb_utils.deserialize_bytes_tensor(
        pb_utils.serialize_byte_tensor(np.array([b"ab", b"cd"], np.object_)))
    assert same_length.shape == (2,) and same_length[1] == b"cd"
    for truncated in (encoded[:-1], encoded[:2]):
        with pytest.raises(struct.error):
            pb_utils.deserialize_bytes_tensor(truncated)


def test_using_decoupled_model_transaction_policy():
    check = pb_utils.using_decoupled_model_transaction_policy
    assert check({"model_transaction_policy": {"decoupled": True}}) is True
    assert check({"model_transaction_policy": {"decoupled": False}}) is False
    assert check({"name": "m"}) is False


@pytest.mark.parametrize("call,error,text", [
    # qa/L0_backend_python/argument_validation's cases: the python backend's
    # binding refuses a wrong type with TypeError, and its own checks raise
    # TritonModelException with its text.
    (lambda: pb_utils.InferenceRequest(inputs=[None], model_name="m",
                                       requested_output_names=["o"]),
     pb_utils.TritonModelException,
     "Input tensor for request with id '' and model name 'm' should not be empty."),
    (lambda: pb_utils.InferenceRequest(inputs=None, model_name="m",
                                       requested_output_names=["o"]), TypeError, ""),
    (lambda: pb_utils.InferenceRequest(inputs=[], model_name=None,
                                       requested_output_names=["o"]), TypeError, ""),
    (lambda: pb_utils.InferenceRequest(inputs=[], model_name="m",
                                       requested_output_names=[None]), TypeError, ""),
    (lambda: pb_utils.InferenceRequest(inputs=[], model_name="m", requested_output_names=[],
                                       correlation_id=None), TypeError, ""),
    (lambda: pb_utils.InferenceRequest(inputs=[], model_name="m", requested_output_names=[],
                                       request_id=None), TypeError, ""),
    (lambda: pb_utils.InferenceRequest(inputs=[], model_name="m", requested_output_names=[],
                                       model_version=None), TypeError, ""),
    (lambda: pb_utils.InferenceRequest(inputs=[], model_name="m", requested_output_names=[],
                                       flags=None), TypeError, ""),
    (lambda: pb_utils.InferenceResponse(output_tensors=[None]), pb_utils.TritonModelException,
     "Output tensor for inference response should not be empty."),
    (lambda: pb_utils.InferenceResponse(output_tensors=None), TypeError, ""),
    (lambda: pb_utils.Tensor(None, np.ones(2)), TypeError, ""),
    (lambda: pb_utils.Tensor("OUTPUT0", None), TypeError, ""),
    (lambda: pb_utils.Tensor("", None), TypeError, ""),
    (lambda: pb_utils.Tensor("", np.ones(2)), pb_utils.TritonModelException,
     "Tensor name cannot be an empty string."),
    (lambda: pb_utils.Tensor.from_dlpack("OUTPUT0", None), pb_utils.TritonModelException,
     "Provided tensor is not supported."),
    (lambda: pb_utils.Tensor.from_dlpack("", None), pb_utils.TritonModelException,
     "Tensor name cannot be an empty string."),
    (lambda: pb_utils.Logger.log("Invalid Level", None), TypeError, ""),
    (lambda: pb_utils.Logger.log("Invalid Level", 1), TypeError, ""),
    (lambda: pb_utils.Logger.log_info(None), TypeError, ""),
    (lambda: pb_utils.Logger.log_verbose(None), TypeError, ""),
    # qa/L0_backend_python/parameters: the keys and values a request's or a
    # response's parameters may have.
    (lambda: pb_utils.InferenceResponse([], parameters=[]), pb_utils.TritonModelException,
     "Expect dict, got <class 'list'>"),
    (lambda: pb_utils.InferenceResponse([], parameters={1: "int key"}),
     pb_utils.TritonModelException,
     "Expect parameters keys to have type str, found type <class 'int'>"),
    (lambda: pb_utils.InferenceResponse([], parameters={"int": 2, "float": 0.5}),
     pb_utils.TritonModelException,
     "Expect parameters values to have type bool/int/str, found type <class 'float'>"),
    (lambda: pb_utils.InferenceResponse([], parameters={"null": None}),
     pb_utils.TritonModelException,
     "Expect parameters values to have type bool/int/str, found type <class 'NoneType'>"),
    (lambda: pb_utils.InferenceRequest(inputs=[], model_name="m", requested_output_names=[],
                                       parameters={"list": ["variable"]}),
     pb_utils.TritonModelException,
     "Expect parameters values to have type bool/int/str, found type <class 'list'>"),
])
def test_bad_arguments_are_refused_as_the_python_backend_refuses_them(call, error, text):
    with pytest.raises(error) as raised:
        call()
    assert str(raised.value).startswith(text)


def test_arguments_the_python_backend_takes():
    tensor = pb_utils.Tensor("INPUT0", np.asarray([1, 2], dtype=np.int32))
    for correlation_id in (5, "test_str_id-5"):
        request = pb_utils.InferenceRequest(inputs=[tensor], model_name="m",
                                            requested_output_names=["o"],
                                            correlation_id=correlation_id)
        assert request.correlation_id() == correlation_id
    assert pb_utils.InferenceRequest(inputs=[], model_name="m",
                                     requested_output_names=[]).correlation_id() == 0
    assert pb_utils.InferenceResponse([tensor]).output_tensors() == [tensor]
    params = {"a": "1", "c": 3, "d": False, "f": ""}
    assert json.loads(pb_utils.InferenceResponse([], parameters=params).parameters()) == params
    assert pb_utils.InferenceResponse([]).parameters() == "{}"
    request = pb_utils.InferenceRequest(inputs=[], model_name="m", requested_output_names=[],
                                        parameters=params)
    assert json.loads(request.parameters()) == params
    assert pb_utils.InferenceResponse(output_tensors=[]).output_tensors() == []
    assert not pb_utils.InferenceResponse().has_error()


def test_logger_levels_go_to_python_logging_before_any_server_log(caplog, monkeypatch):
    # Only while no server has run a Python model (no server log yet).
    monkeypatch.delitem(sys.modules, "tritonserver._inprocess._backend", raising=False)
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    log = pb_utils.Logger
    log.log_info("info")
    log.log_warn("warn")
    log.log_error("error")
    log.log_verbose("verbose")
    log.log("default")
    for level in (log.INFO, log.WARNING, log.ERROR, log.VERBOSE):
        log.log(f"at {level}", level)
    got = [(r.name, r.levelno, r.getMessage(), r.filename) for r in caplog.records]
    here = os.path.basename(__file__)
    assert got == [(LOGGER, lvl, msg, here) for lvl, msg in [
        (logging.INFO, "info"), (logging.WARNING, "warn"), (logging.ERROR, "error"),
        (logging.DEBUG, "verbose"), (logging.INFO, "default"),
        (logging.INFO, "at LogLevel.INFO"), (logging.WARNING, "at LogLevel.WARNING"),
        (logging.ERROR, "at LogLevel.ERROR"), (logging.DEBUG, "at LogLevel.VERBOSE")]]
    # The stub's enum: Logger.LogLevel, its values exported on Logger.
    assert [int(v) for v in (log.INFO, log.WARNING, log.ERROR, log.VERBOSE)] == [0, 1, 2, 3]
    assert log.LogLevel is pb_utils.LogLevel and log.LogLevel.VERBOSE is log.VERBOSE
    # A number is not a level (the stub's binding takes its enum only).
    for number in (2, 9):
        with pytest.raises(TypeError, match="level"):
            log.log("bad", number)


_REPEAT = """
import json
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        if not pb_utils.using_decoupled_model_transaction_policy(config):
            raise pb_utils.TritonModelException(
                f"model {args['model_name']} needs the decoupled transaction policy")
        self.out_dtype = pb_utils.triton_string_to_numpy(
            pb_utils.get_output_config_by_name(config, "OUT")["data_type"])
        pb_utils.Logger.log_info(f"model dir {pb_utils.get_model_dir()}")

    def execute(self, requests):
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            threading.Thread(target=self._send, daemon=True,
                             args=(request.get_response_sender(), values)).start()
        return None

    def _send(self, sender, values):
        for index, value in enumerate(values):
            time.sleep(0.001)
            sender.send(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUT", np.array([value], self.out_dtype)),
                pb_utils.Tensor("IDX", np.array([index], np.uint32))]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
"""

_REPEAT_CONFIG = """
backend: "inprocess"
max_batch_size: 0
{policy}
input [ {{ name: "IN", data_type: TYPE_INT32, dims: [ -1 ] }} ]
output [ {{ name: "OUT", data_type: TYPE_INT32, dims: [ 1 ] }},
         {{ name: "IDX", data_type: TYPE_UINT32, dims: [ 1 ] }} ]
"""

_LOGS = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        pb_utils.Logger.log_verbose("initialize verbose")
        self.model_dir = pb_utils.get_model_dir()

    def execute(self, requests):
        logger = pb_utils.Logger
        logger.log_info("execute info")
        logger.log_warn("execute warn")
        logger.log_error("execute error")
        logger.log("execute verbose", logger.VERBOSE)
        responses = []
        for request in requests:
            flags = int(pb_utils.get_input_tensor_by_name(request, "FLAGS").as_numpy()[0])
            try:
                request.set_release_flags(flags)
            except pb_utils.TritonError as e:
                responses.append(pb_utils.InferenceResponse(error=e))
                continue
            if flags == pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE:
                responses.append(None)  # a rescheduled request gets no response
                continue
            dir_ = pb_utils.Tensor("DIR", np.array([self.model_dir.encode()], np.object_))
            responses.append(pb_utils.InferenceResponse([dir_]))
        return responses
"""

_LOGS_CONFIG = """
backend: "inprocess"
input [ { name: "FLAGS", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "DIR", data_type: TYPE_STRING, dims: [ 1 ] } ]
"""


def _folder(repo, name: str, config: str, source: str) -> None:
    write_model(repo, name, config, {"model.py": source})


@pytest.fixture(scope="module")
def helpers_server(tmp_path_factory):
    """A server on a decoupled repeat model and a model that logs."""
    repo = tmp_path_factory.mktemp("pb_helpers_repo")
    _folder(repo, "repeat", _REPEAT_CONFIG.format(
        policy="model_transaction_policy { decoupled: true }"), _REPEAT)
    _folder(repo, "logs", _LOGS_CONFIG, _LOGS)
    server = start_server(model_repository=str(repo))
    try:
        yield server, repo
    finally:
        stop_within(server)


def test_a_decoupled_model_checking_its_transaction_policy(helpers_server):
    server, repo = helpers_server
    model = server.model("repeat")
    for values in ([4, 2, 0, 1], [9], []):
        got = [(int(np.from_dlpack(r.outputs["OUT"])[0]), int(np.from_dlpack(r.outputs["IDX"])[0]))
               for r in model.infer(inputs={"IN": np.array(values, np.int32)}) if r.outputs]
        assert got == [(v, i) for i, v in enumerate(values)]


def test_the_same_model_refuses_a_config_that_is_not_decoupled(explicit_empty, tmp_path):
    repo = tmp_path / "repo"
    _folder(repo, "repeat_coupled", _REPEAT_CONFIG.format(policy=""), _REPEAT)
    explicit_empty.register_model_repository(str(repo))
    try:
        with pytest.raises(tritonserver.TritonError,
                           match="model repeat_coupled needs the decoupled transaction policy"):
            explicit_empty.load("repeat_coupled")
    finally:
        explicit_empty.unregister_model_repository(str(repo))


def test_get_model_dir_from_a_model(helpers_server):
    server, repo = helpers_server
    out = next(server.model("logs").infer(inputs={"FLAGS": np.array(
        [pb_utils.TRITONSERVER_REQUEST_RELEASE_ALL], np.int32)}))
    assert out.outputs["DIR"].to_bytes_array().tolist() == [str(repo / "logs" / "1").encode()]


_LOG_RUN = """
import sys
import numpy as np
import tritonserver
repo, log_file, verbose = sys.argv[1], sys.argv[2], int(sys.argv[3])
server = tritonserver.Server(model_repository=repo, log_file=log_file, log_info=True,
                             log_warn=True, log_error=True, log_verbose=verbose).start()
next(server.model("logs").infer(inputs={"FLAGS": np.array([1], np.int32)}))
assert [r.error for r in server.model("late_error").infer(inputs={"IN": np.array([1], np.int32)})
        ] == [None]
server.stop()
"""
# A decoupled model that finishes its request, then raises (QA's
# async_execute_decouple with a negative wait): no request is left to take
# the error, so it is a line of the server's log.
_LATE_ERROR = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        for request in requests:
            request.get_response_sender().send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        raise ValueError("raised after the last response")
"""


@pytest.mark.parametrize("verbose", [0, 1])
def test_logger_lines_are_the_servers_log_lines(tmp_path, verbose):
    """As the python backend's: each line the server's own (its log file,
    its format, its levels), naming the model's file and line; verbose
    lines only with log_verbose."""
    repo = tmp_path / "repo"
    _folder(repo, "logs", _LOGS_CONFIG, _LOGS)
    _folder(repo, "late_error", _REPEAT_CONFIG.format(
        policy="model_transaction_policy { decoupled: true }"), _LATE_ERROR)
    log_file = tmp_path / "server.log"
    done = subprocess.run([sys.executable, "-c", _LOG_RUN, str(repo), str(log_file), str(verbose)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = log_file.read_text().splitlines()

    def written(message: str) -> list[str]:
        return [line for line in lines if line.endswith(f'"{message}"')]

    assert [line[0] for line in written("execute info")] == ["I"]
    assert [line[0] for line in written("execute error")] == ["E"]
    warn = written("execute warn")
    assert [line[0] for line in warn] == ["W"]
    line_no = _LOGS.splitlines().index('        logger.log_warn("execute warn")') + 1
    assert f"model.py:{line_no}]" in warn[0]
    assert len(written("initialize verbose")) == verbose
    assert len(written("execute verbose")) == verbose
    late = [line for line in lines if "ValueError: raised after the last response" in line]
    assert late and late[0].startswith("E") and "late_error" in late[0]


def test_rescheduling_where_the_scheduler_cannot_fails_the_request(helpers_server):
    # The default scheduler gives nothing back to reschedule (the core's
    # iterative sequences do: tests/inprocess/test_pb_bls.py).
    server, _ = helpers_server
    with pytest.raises(tritonserver.UnsupportedError, match="could not be rescheduled"):
        next(server.model("logs").infer(inputs={"FLAGS": np.array(
            [pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE], np.int32)}))


def test_get_model_dir_outside_a_model():
    # From a file of its own (no model on the stack): that file's folder.
    assert pb_utils.get_model_dir() == os.path.dirname(os.path.abspath(__file__))
    with running_for(ModelContext("m", "/some/model/1")):
        assert pb_utils.get_model_dir() == "/some/model/1"
    assert json.dumps(pb_utils.get_model_dir())  # a str again after the block
