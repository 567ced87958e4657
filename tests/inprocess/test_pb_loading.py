"""How a python-backend model.py is found and loaded in-process, against
what Triton's python-backend QA (qa/L0_backend_python) checks of the stub:
a model of several files (absolute and relative imports), a missing
model.py (the python backend's text), BLS refused outside execute (its
text), and BF16 tensors through DLPack (numpy has no BF16). Real core,
``backend: "python"`` folders on ``python_backend="inprocess"``."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tritonserver
from conftest import failure_output, run_python, start_server, stop_within, write_model

IDENTITY_CONFIG = """
backend: "python"
input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [-1] }]
output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [-1] }]
"""

MULTI_FILE = """
import numpy as np
import helper
import triton_python_backend_utils as pb_utils

from . import sibling


class TritonPythonModel:
    def execute(self, requests):
        value = np.array([helper.VALUE, sibling.VALUE], np.float32)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", value)])
                for _ in requests]
"""


def _folder(repo, name: str, files: dict[str, str], config: str = IDENTITY_CONFIG) -> None:
    write_model(repo, name, config, files)


def _explicit(repo) -> tritonserver.Server:
    return start_server(model_repository=str(repo), python_backend="inprocess",
                        model_control_mode=tritonserver.ModelControlMode.EXPLICIT)


def test_a_model_of_several_files_and_two_models_with_the_same_helper(tmp_path):
    """``import helper`` and ``from . import sibling``, as the python
    backend imports a model (``<version>.model``); each model gets its own
    ``helper``, as each stub has its own interpreter."""
    repo = tmp_path / "repo"
    for name, value in (("first", 1.0), ("second", 2.0)):
        _folder(repo, name, {"model.py": MULTI_FILE, "helper.py": f"VALUE = {value}\n",
                             "sibling.py": f"VALUE = {value * 10}\n"})
    server = start_server(model_repository=str(repo), python_backend="inprocess")
    try:
        for name, value in (("first", 1.0), ("second", 2.0)):
            response = next(server.model(name).infer(inputs={"INPUT0": np.ones(1, np.float32)}))
            assert np.from_dlpack(response.outputs["OUTPUT0"]).tolist() == [value, value * 10]
    finally:
        stop_within(server)


def test_a_missing_model_file_fails_with_the_python_backends_text(tmp_path):
    repo = tmp_path / "repo"
    _folder(repo, "non_existent_model", {})
    server = _explicit(repo)
    try:
        with pytest.raises(tritonserver.TritonError) as caught:
            server.load("non_existent_model")
        path = repo / "non_existent_model" / "1" / "model.py"
        assert ("Failed to preinitialize Python stub: Python model file not found in "
                f"'{path}'") in str(caught.value)
        assert server.live()
    finally:
        stop_within(server)


BLS_IN = """
import numpy as np
import triton_python_backend_utils as pb_utils


def call():
    request = pb_utils.InferenceRequest(
        model_name="identity", inputs=[pb_utils.Tensor("INPUT0", np.ones(1, np.float32))],
        requested_output_names=["OUTPUT0"])
    return request.exec()


class TritonPythonModel:
    def initialize(self, args):
        self.where = "{where}"
        if self.where == "initialize":
            call()

    def execute(self, requests):
        response = call()
        if response.has_error():
            raise pb_utils.TritonModelException(response.error().message())
        out = pb_utils.get_output_tensor_by_name(response, "OUTPUT0")
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", out.as_numpy())])
                for _ in requests]

    def finalize(self):
        if self.where == "finalize":
            try:
                call()
            except pb_utils.TritonModelException as e:
                pb_utils.Logger.log_error(f"finalize: {{e}}")
                raise
"""
IDENTITY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())])
            for r in requests]
"""
BLS_ONLY = "BLS is only supported during the 'execute' function."


def test_bls_is_refused_in_initialize_and_finalize_and_runs_in_execute(tmp_path):
    repo = tmp_path / "repo"
    _folder(repo, "identity", {"model.py": IDENTITY})
    for where in ("initialize", "finalize"):
        _folder(repo, f"bls_{where}", {"model.py": BLS_IN.format(where=where)})
    server = _explicit(repo)
    try:
        server.load("identity")
        with pytest.raises(tritonserver.TritonError, match=BLS_ONLY):
            server.load("bls_initialize")
        server.load("bls_finalize")
        response = next(server.model("bls_finalize").infer(
            inputs={"INPUT0": np.ones(1, np.float32)}))
        assert np.from_dlpack(response.outputs["OUTPUT0"]).tolist() == [1.0]
        server.unload("bls_finalize", wait_until_unloaded=True)
        assert server.live() and server.model("identity").ready()
    finally:
        stop_within(server)


BF16 = """
import torch
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            tensor = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            try:
                tensor.as_numpy()
            except pb_utils.TritonModelException as e:
                refused = str(e)
            else:
                raise pb_utils.TritonModelException("as_numpy took a BF16 tensor")
            doubled = torch.utils.dlpack.from_dlpack(tensor.to_dlpack()) * 2
            out = pb_utils.Tensor.from_dlpack("OUTPUT0", torch.utils.dlpack.to_dlpack(doubled))
            assert out.triton_dtype() == tensor.triton_dtype() and out.shape() == tensor.shape()
            responses.append(pb_utils.InferenceResponse(
                [out], parameters={"refused": refused}))
        return responses
"""
BF16_CONFIG = IDENTITY_CONFIG.replace("TYPE_FP32", "TYPE_BF16").replace("[-1]", "[-1, -1]")


def test_bf16_through_dlpack_and_as_numpy_refused_in_the_python_backends_words(tmp_path):
    torch = pytest.importorskip("torch")
    repo = tmp_path / "repo"
    _folder(repo, "identity_bf16", {"model.py": BF16}, BF16_CONFIG)
    server = start_server(model_repository=str(repo), python_backend="inprocess")
    try:
        values = torch.tensor([[1.5, -2.0], [0.25, 8.0]], dtype=torch.bfloat16)
        response = next(server.model("identity_bf16").infer(
            inputs={"INPUT0": tritonserver.Tensor.from_dlpack(values)}))
        out = response.outputs["OUTPUT0"]
        assert out.data_type == tritonserver.DataType.BF16
        assert torch.equal(torch.from_dlpack(out), values * 2)
        assert "tensor dtype is bf16 and cannot be converted to numpy" in \
            response.parameters["refused"].lower()
    finally:
        stop_within(server)


ERROR_THEN_MORE = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            sender.send(pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUTPUT0", x)], error=pb_utils.TritonError("first one failed")))
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x * 3)]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
"""


def test_a_decoupled_error_response_without_the_final_flag_lets_the_stream_go_on(tmp_path):
    # QA's decoupled_execute_error: as in the python backend, the error is
    # one response of the stream, and the model goes on sending.
    repo = tmp_path / "repo"
    _folder(repo, "error_then_more", {"model.py": ERROR_THEN_MORE},
            IDENTITY_CONFIG + "model_transaction_policy { decoupled: true }\n")
    server = start_server(model_repository=str(repo), python_backend="inprocess")
    try:
        responses = list(server.model("error_then_more").infer(
            inputs={"INPUT0": np.ones(1, np.float32)}, raise_on_error=False))
        assert "first one failed" in str(responses[0].error)
        assert np.from_dlpack(responses[1].outputs["OUTPUT0"]).tolist() == [3.0]
        assert responses[-1].final
    finally:
        stop_within(server)


SELF_IMPORT = """
import unittest

import numpy as np
import triton_python_backend_utils as pb_utils

VALUE = {value}


class SelfTest(unittest.TestCase):
    def test_value(self):
        import model

        self.assertEqual(model.VALUE, {value})


class TritonPythonModel:
    def execute(self, requests):
        import model

        test = unittest.main("model", exit=False)  # parses sys.argv, as QA models do
        value = np.array([model.VALUE, float(test.result.wasSuccessful())], np.float32)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", value)])
                for _ in requests]
"""


def test_a_model_imports_itself_as_model_as_in_its_stub(tmp_path, monkeypatch):
    """QA's models run their test cases with ``unittest.main("model")``:
    each stub imported its file as ``model``. In-process ``import model``
    gives, inside each model's hooks, that model's own file; elsewhere a
    program's own ``model`` module on sys.path."""
    repo = tmp_path / "repo"
    for name, value in (("first", 1.0), ("second", 2.0)):
        _folder(repo, name, {"model.py": SELF_IMPORT.format(value=value)})
    own = tmp_path / "program"
    own.mkdir()
    (own / "model.py").write_text("OWNER = 'the program'\n")
    monkeypatch.syspath_prepend(str(own))
    server = start_server(model_repository=str(repo), python_backend="inprocess")
    try:
        for name, value in (("first", 1.0), ("second", 2.0)):
            response = next(server.model(name).infer(inputs={"INPUT0": np.ones(1, np.float32)}))
            assert np.from_dlpack(response.outputs["OUTPUT0"]).tolist() == [value, 1.0]
        import model  # noqa: the program's own module, outside the models' hooks

        assert model.OWNER == "the program"
        with pytest.raises(AttributeError):
            model.VALUE
    finally:
        stop_within(server)
        import sys

        if not hasattr(sys.modules.get("model"), "_target"):
            sys.modules.pop("model", None)


# A program's own ``model`` module whose import makes a collection run a
# finalizer that asks ``model`` for an attribute: the alias looks for the
# module while the import runs.
FINALIZER_ASKS = """
import gc
import sys


class Cycle:
    def __del__(self):
        sys.stdout.write("finalizer asked: %s\\n" % hasattr(sys.modules["model"], "OWNER"))


c = Cycle()
c.me = c
del c
gc.collect()
OWNER = "the program"
"""


def test_a_finalizer_asking_model_while_it_imports_neither_deadlocks_nor_recurses(tmp_path):
    """The alias (``_pb_alias``) imports a program's own ``model`` module on
    first use outside the models' hooks; code run by that import, a
    finalizer of a collection it triggers among it, may ask ``model`` again.
    The first version held a lock across the import and deadlocked there."""
    repo = tmp_path / "repo"
    _folder(repo, "first", {"model.py": SELF_IMPORT.format(value=1.0)})
    own = tmp_path / "program"
    own.mkdir()
    (own / "model.py").write_text(FINALIZER_ASKS)
    out = run_python(f"""
        import sys
        import numpy as np
        import tritonserver
        server = tritonserver.Server(model_repository={str(repo)!r}, python_backend="inprocess",
                                     exit_timeout=10).start(wait_until_ready=True)
        response = next(server.model("first").infer(inputs={{"INPUT0": np.ones(1, np.float32)}}))
        sys.path.insert(0, {str(own)!r})
        import model
        print("owner:", model.OWNER)
        server.stop()
    """, timeout=60)
    assert out.returncode == 0, failure_output(out, 2000, 4000)
    assert "finalizer asked: False" in out.stdout  # not there yet, on the importing thread
    assert "owner: the program" in out.stdout


FAILING = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return lorem_ipsum
"""


def test_an_execute_error_is_worded_as_the_python_backend_words_it(tmp_path):
    """qa/L0_backend_python lifecycle test_infer_pymodel_error reads the
    start of the stub's text."""
    repo = tmp_path / "repo"
    _folder(repo, "wrong_model", {"model.py": FAILING})
    server = start_server(model_repository=str(repo), python_backend="inprocess")
    try:
        with pytest.raises(tritonserver.TritonError) as caught:
            list(server.model("wrong_model").infer(inputs={"INPUT0": np.ones(1, np.float32)}))
        path = repo / "wrong_model" / "1" / "model.py"
        # The instance's name, as the core gives it.
        assert re.match(
            r"Failed to process the request\(s\) for model 'wrong_model_0(_0)?', message: "
            r"NameError: name 'lorem_ipsum' is not defined\n\nAt:\n"
            + re.escape(f"  {path}(7): execute\n") + "$", str(caught.value)), str(caught.value)
    finally:
        stop_within(server)


SENDER = """
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            mode = int(pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()[0])
            if mode == 5:  # execute returns None, and nothing will answer
                return None
            sender = request.get_response_sender()
            assert sender is request.get_response_sender()
            response = pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUTPUT0", np.array([mode], np.float32))])
            if mode == 0:  # one response before execute returns, then the final flag
                sender.send(response)
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            elif mode == 1:  # after it returned, from a thread
                def later(sender=sender, response=response):
                    time.sleep(0.2)
                    sender.send(response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                threading.Thread(target=later, daemon=True).start()
            elif mode == 2:  # two: the second is refused, the first stands
                sender.send(response)
                try:
                    sender.send(response)
                except pb_utils.TritonModelException as e:
                    assert "cannot send more than one response" in str(e), e
                else:
                    raise AssertionError("a second response was taken")
            elif mode == 3:  # the final flag first: the batch fails with that text
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            elif mode == 4:  # execute returns None; the response, then the flag, come later
                def later(sender=sender, response=response):
                    time.sleep(0.2)
                    sender.send(response)
                    sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                threading.Thread(target=later, daemon=True).start()
                return None
            out.append(None)
        return out
"""


def test_a_model_that_is_not_decoupled_answers_through_its_response_sender(tmp_path):
    """The python backend's response sender on a model that is not
    decoupled (qa/L0_backend_python response_sender): exactly one response,
    sent during execute or after it returned (execute returning a list of
    None, or None); its rules' texts."""
    repo = tmp_path / "repo"
    _folder(repo, "sender", {"model.py": SENDER})
    server = start_server(model_repository=str(repo), python_backend="inprocess")
    try:
        model = server.model("sender")
        for mode in (0, 1, 2, 4):
            responses = list(model.infer(inputs={"INPUT0": np.array([mode], np.float32)}))
            assert len(responses) == 1
            assert np.from_dlpack(responses[0].outputs["OUTPUT0"]).tolist() == [mode]
        with pytest.raises(tritonserver.TritonError,
                           match="Non-decoupled model cannot send complete final before "
                                 "sending a response"):
            list(model.infer(inputs={"INPUT0": np.array([3], np.float32)}))
        # None from execute with no sender taken: nothing could answer; a clear error, not a hang.
        with pytest.raises(tritonserver.InternalError, match="no response sender was taken"):
            list(model.infer(inputs={"INPUT0": np.array([5], np.float32)}))
        assert model.ready()
    finally:
        stop_within(server)


DECOUPLED_RETURNS = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", np.ones(1, np.float32))])
                for _ in requests]
"""


def test_a_decoupled_model_that_returns_responses_fails_as_in_the_python_backend(tmp_path):
    repo = tmp_path / "repo"
    _folder(repo, "returns", {"model.py": DECOUPLED_RETURNS},
            IDENTITY_CONFIG + "model_transaction_policy { decoupled: true }\n")
    server = start_server(model_repository=str(repo), python_backend="inprocess")
    try:
        with pytest.raises(tritonserver.TritonError,
                           match="is using the decoupled mode and the execute function must "
                                 "return None"):
            list(server.model("returns").infer(inputs={"INPUT0": np.ones(1, np.float32)}))
    finally:
        stop_within(server)
