"""TritonPythonModel.auto_complete_config run in-process, as the python
backend runs it: called at load when the server allows auto-complete
(strict_model_config=False), with a pb_utils.ModelConfig of the current
configuration; what it returns is the model's configuration (Model.config(),
initialize's args["model_config"]). pb_utils.ModelConfig's checks and error
texts are the python backend's."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

import tritonserver
from conftest import start_server, stop_within
from tritonserver._inprocess import pb_utils

# initialize keeps what it was given; execute answers the sum, and (SEEN)
# the input names and max_batch_size of the model_config initialize got.
_EXECUTE = """
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.seen = json.dumps({"inputs": [i["name"] for i in config["input"]],
                                "max_batch_size": config["max_batch_size"],
                                "model_dir": pb_utils.get_model_dir()})

    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "A").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "B").as_numpy()
            seen = np.full(a.shape[:-1] + (1,), self.seen.encode(), dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("SUM", a + b), pb_utils.Tensor("SEEN", seen)]))
        return responses
"""

_HEADER = """
import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils

"""

_IOS = textwrap.dedent("""
    for name in ("A", "B"):
        config.add_input({"name": name, "data_type": "TYPE_FP32", "dims": [4]})
    config.add_output({"name": "SUM", "data_type": "TYPE_FP32", "dims": [4]})
    config.add_output({"name": "SEEN", "data_type": "TYPE_STRING", "dims": [1]})
""")


def _model(folder, config_text: str, hook_body: str, rest: str = _EXECUTE) -> None:
    """A model folder: config.pbtxt, and 1/model.py whose TritonPythonModel's
    auto_complete_config(config) runs `hook_body` (None: no hook)."""
    (folder / "1").mkdir(parents=True)
    (folder / "config.pbtxt").write_text(textwrap.dedent(config_text))
    source = _HEADER + "\nclass TritonPythonModel:\n"
    if hook_body is not None:
        source += ("    @staticmethod\n    def auto_complete_config(config):\n"
                   + textwrap.indent(textwrap.dedent(hook_body), " " * 8))
    source += textwrap.indent(textwrap.dedent(rest), " " * 4)
    (folder / "1" / "model.py").write_text(source)


def _ios(config: dict) -> dict:
    return {"input": [(t["name"], t["data_type"], t["dims"]) for t in config["input"]],
            "output": [(t["name"], t["data_type"], t["dims"]) for t in config["output"]]}


COMPLETED_IOS = {"input": [("A", "TYPE_FP32", [4]), ("B", "TYPE_FP32", [4])],
                 "output": [("SUM", "TYPE_FP32", [4]), ("SEEN", "TYPE_STRING", [1])]}


@pytest.fixture(scope="module")
def completed(tmp_path_factory):
    """A server (auto-complete allowed, the default) on models whose
    config.pbtxt names only the backend, completed by the model."""
    repo = tmp_path_factory.mktemp("auto_complete_repo")
    _model(repo / "nobatch", 'backend: "inprocess"\n',
           _IOS + "config.set_max_batch_size(0)\nreturn config\n")
    _model(repo / "batch", 'backend: "inprocess"\n',
           _IOS + "config.set_max_batch_size(4)\nconfig.set_dynamic_batching()\nreturn config\n")
    # Partly configured: what the configuration has is kept and completed.
    _model(repo / "partial", """
        backend: "inprocess"
        max_batch_size: 2
        input [ { name: "A", data_type: TYPE_FP32, dims: [ 4 ] } ]
        output [ { name: "SUM", data_type: TYPE_INVALID, dims: [ ] } ]
        parameters { key: "kept", value: { string_value: "yes" } }
    """, _IOS + "config.set_max_batch_size(8)\nreturn config\n")
    # Decoupled by auto-complete: initialize refuses to run otherwise.
    _model(repo / "decoupled", 'backend: "inprocess"\n', """
        config.add_input({"name": "N", "data_type": "TYPE_INT32", "dims": [1]})
        config.add_output({"name": "I", "data_type": "TYPE_INT32", "dims": [1]})
        config.set_model_transaction_policy({"decoupled": True})
        return config
    """, """
        def initialize(self, args):
            if not pb_utils.using_decoupled_model_transaction_policy(
                    json.loads(args["model_config"])):
                raise pb_utils.TritonModelException("not decoupled")

        def execute(self, requests):
            for request in requests:
                sender = request.get_response_sender()
                n = int(pb_utils.get_input_tensor_by_name(request, "N").as_numpy()[0])
                for i in range(n):
                    sender.send(pb_utils.InferenceResponse(
                        [pb_utils.Tensor("I", np.array([i], np.int32))]))
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            return None
    """)
    server = start_server(model_repository=str(repo))
    yield server
    stop_within(server)


def _infer(model, batch: bool):
    a = np.arange(4, dtype=np.float32)
    b = np.full(4, 10, np.float32)
    if batch:
        a, b = a[None], b[None]
    out = next(model.infer(inputs={"A": a, "B": b}))
    np.testing.assert_array_equal(np.from_dlpack(out.outputs["SUM"]), a + b)
    return json.loads(out.outputs["SEEN"].to_bytes_array().reshape(-1)[0])


def test_a_config_naming_only_the_backend_is_completed_by_the_model(completed):
    model = completed.model("nobatch")
    config = model.config()
    assert _ios(config) == COMPLETED_IOS
    assert config["max_batch_size"] == 0 and "dynamic_batching" not in config
    seen = _infer(model, batch=False)
    # initialize's args["model_config"] is the completed configuration too.
    assert seen["inputs"] == ["A", "B"] and seen["max_batch_size"] == 0
    assert seen["model_dir"].endswith("/nobatch/1")


def test_max_batch_size_and_dynamic_batching_from_the_model(completed):
    model = completed.model("batch")
    config = model.config()
    assert _ios(config) == COMPLETED_IOS
    assert config["max_batch_size"] == 4 and "dynamic_batching" in config
    assert _infer(model, batch=True)["max_batch_size"] == 4


def test_a_partial_config_is_completed_and_keeps_the_rest(completed):
    config = completed.model("partial").config()
    assert _ios(config) == COMPLETED_IOS  # SUM's TYPE_INVALID and [] completed in place
    assert config["max_batch_size"] == 8
    assert config["parameters"]["kept"]["string_value"] == "yes"
    assert _infer(completed.model("partial"), batch=True)["inputs"] == ["A", "B"]


def test_decoupled_set_by_auto_complete(completed):
    model = completed.model("decoupled")
    assert model.config()["model_transaction_policy"]["decoupled"] is True
    got = [int(np.from_dlpack(r.outputs["I"])[0])
           for r in model.infer(inputs={"N": np.array([3], np.int32)}) if r.outputs]
    assert got == [0, 1, 2]


def test_not_called_with_strict_model_config(tmp_path):
    repo = tmp_path / "repo"
    # A complete configuration, which the hook would change (and mark).
    _model(repo / "strict", """
        backend: "inprocess"
        input [ { name: "A", data_type: TYPE_FP32, dims: [ 4 ] },
                { name: "B", data_type: TYPE_FP32, dims: [ 4 ] } ]
        output [ { name: "SUM", data_type: TYPE_FP32, dims: [ 4 ] },
                 { name: "SEEN", data_type: TYPE_STRING, dims: [ 1 ] } ]
    """, """
        open(os.path.join(pb_utils.get_model_dir(), "called"), "w").close()
        config.set_max_batch_size(4)
        return config
    """)
    server = start_server(model_repository=str(repo), strict_model_config=True)
    try:
        model = server.model("strict")
        assert model.config()["max_batch_size"] == 0
        assert _infer(model, batch=False)["max_batch_size"] == 0
        assert not (repo / "strict" / "1" / "called").exists()
    finally:
        stop_within(server)


def test_called_once_per_load_and_files_without_the_hook_are_imported_once(explicit_empty,
                                                                            tmp_path):
    repo = tmp_path / "repo"
    count = 'open(os.path.join(os.path.dirname(__file__), "imports"), "a").write("x")\n'
    _model(repo / "with_hook", 'backend: "inprocess"\n',
           _IOS + "config.set_max_batch_size(0)\nreturn config\n")
    _model(repo / "without_hook", """
        backend: "inprocess"
        input [ { name: "A", data_type: TYPE_FP32, dims: [ 4 ] },
                { name: "B", data_type: TYPE_FP32, dims: [ 4 ] } ]
        output [ { name: "SUM", data_type: TYPE_FP32, dims: [ 4 ] },
                 { name: "SEEN", data_type: TYPE_STRING, dims: [ 1 ] } ]
    """, None)
    (repo / "python_model" / "1").mkdir(parents=True)
    (repo / "python_model" / "config.pbtxt").write_text(
        (repo / "without_hook" / "config.pbtxt").read_text())
    (repo / "python_model" / "1" / "model.py").write_text(textwrap.dedent("""
        import os
        import numpy as np
        import tritonserver

        class Summer(tritonserver.PythonModel):
            def execute(self, requests):
                return [{"SUM": r.inputs["A"] + r.inputs["B"],
                         "SEEN": np.array(['{"inputs": [], "max_batch_size": 0}'], object)}
                        for r in requests]
    """))
    for name in ("with_hook", "without_hook", "python_model"):
        path = repo / name / "1" / "model.py"
        text = path.read_text()
        path.write_text(text.replace("import os\n", "import os\n" + count, 1))
    explicit_empty.register_model_repository(str(repo))
    try:
        for name in ("with_hook", "without_hook", "python_model"):
            _infer(explicit_empty.load(name), batch=False)
            explicit_empty.unload(name, wait_until_unloaded=True, timeout=30)
        # The python backend imports a model.py for auto_complete_config in a
        # process of its own, then again to run it: twice here too, only
        # when the file has the hook.
        assert (repo / "with_hook" / "1" / "imports").read_text() == "xx"
        assert (repo / "without_hook" / "1" / "imports").read_text() == "x"
        assert (repo / "python_model" / "1" / "imports").read_text() == "x"
    finally:
        explicit_empty.unregister_model_repository(str(repo))


_BAD_HOOKS = {
    # name: (config.pbtxt, hook body, message expected in the load's error)
    "smaller_batch": (
        'backend: "inprocess"\nmax_batch_size: 8\n',
        "config.set_max_batch_size(4)\nreturn config\n",
        "configuration specified max_batch_size 8, but in auto-complete-config function for "
        "model 'smaller_batch' specified max_batch_size 4"),
    "other_datatype": (
        'backend: "inprocess"\ninput [ { name: "A", data_type: TYPE_INT32, dims: [ 4 ] } ]\n',
        _IOS + "return config\n",
        "unable to load model 'other_datatype', configuration expects datatype TYPE_INT32 "
        "for input 'A', model provides TYPE_FP32"),
    "other_dims": (
        'backend: "inprocess"\noutput [ { name: "SUM", data_type: TYPE_FP32, dims: [ 2 ] } ]\n',
        _IOS + "return config\n",
        "model 'other_dims', tensor 'SUM': the model expects dims [4] but the model "
        "configuration specifies dims [2]"),
    "sequence_scheduler": (
        'backend: "inprocess"\nmax_batch_size: 2\nsequence_batching { }\n',
        "config.set_dynamic_batching()\nreturn config\n",
        "Configuration specified scheduling_choice as 'sequence_batching', but "
        "auto-complete-config function for model 'sequence_scheduler' tries to set "
        "scheduling_choice as 'dynamic_batching'"),
    "undecoupled": (
        'backend: "inprocess"\nmodel_transaction_policy { decoupled: false }\n',
        "config.set_model_transaction_policy({'decoupled': True})\nreturn config\n",
        "trying to change decoupled property in auto-complete-config for model "
        "'undecoupled', which is already set to 'False'."),
    "returns_none": (
        'backend: "inprocess"\n', "return None\n",
        "auto_complete_config function in model 'returns_none' must return a valid "
        "pb.ModelConfig object."),
    "raises": (
        'backend: "inprocess"\n', "raise RuntimeError('no completion today')\n",
        "model 'raises': auto_complete_config raised RuntimeError: no completion today"),
}


def test_a_failing_auto_complete_fails_the_load_with_the_python_backends_text(
        explicit_empty, tmp_path):
    repo = tmp_path / "repo"
    for name, (config_text, hook, _) in _BAD_HOOKS.items():
        _model(repo / name, config_text, hook)
    explicit_empty.register_model_repository(str(repo))
    try:
        for name, (_, _, message) in _BAD_HOOKS.items():
            with pytest.raises(tritonserver.TritonError) as raised:
                explicit_empty.load(name)
            assert message in str(raised.value), name
        assert explicit_empty.live()
    finally:
        explicit_empty.unregister_model_repository(str(repo))


# pb_utils.ModelConfig alone (no server): the python backend's checks.

def _config(**fields) -> pb_utils.ModelConfig:
    base = {"name": "m", "max_batch_size": 0, "input": [], "output": []}
    base.update(fields)
    return pb_utils.ModelConfig(json.dumps(base))


def test_model_config_as_dict_and_setters():
    config = _config()
    assert config.as_dict() == {"name": "m", "max_batch_size": 0, "input": [], "output": []}
    config.set_max_batch_size(4)
    config.set_max_batch_size(6)  # larger is allowed, as in the python backend
    config.set_dynamic_batching()
    config.set_dynamic_batching()  # already set: nothing to do
    config.add_input({"name": "X", "data_type": "TYPE_FP32", "dims": [2], "optional": True})
    config.add_output({"name": "Y", "data_type": "TYPE_FP32", "dims": [2]})
    config.set_model_transaction_policy({"decoupled": False})
    config.set_model_transaction_policy({"decoupled": False})
    assert config.as_dict() == {
        "name": "m", "max_batch_size": 6, "dynamic_batching": {},
        "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [2], "optional": True}],
        "output": [{"name": "Y", "data_type": "TYPE_FP32", "dims": [2]}],
        "model_transaction_policy": {"decoupled": False}}
    # An existing tensor is completed where it is unset, left where it agrees.
    partial = _config(input=[{"name": "X", "data_type": "TYPE_INVALID", "dims": []}])
    partial.add_input({"name": "X", "data_type": "TYPE_INT8", "dims": [-1]})
    partial.add_input({"name": "X", "data_type": "TYPE_INT8", "dims": [-1], "optional": False})
    assert partial.as_dict()["input"] == [{"name": "X", "data_type": "TYPE_INT8", "dims": [-1],
                                           "optional": False}]


@pytest.mark.parametrize("call, message", [
    (lambda c: c.set_max_batch_size(1),
     "configuration specified max_batch_size 2, but in auto-complete-config function for "
     "model 'm' specified max_batch_size 1"),
    (lambda c: c.add_input({"name": "X", "data_type": "TYPE_FP32", "dims": [1], "format": 1}),
     "input 'X' in auto-complete-config function for model 'm' contains property other than "
     "'name', 'data_type', 'dims' and 'optional'."),
    (lambda c: c.add_input({"data_type": "TYPE_FP32", "dims": [1]}),
     "input in auto-complete-config function for model 'm' is missing 'name' property."),
    (lambda c: c.add_input({"name": "X", "dims": [1]}),
     "input 'X' in auto-complete-config function for model 'm' is missing 'data_type' "
     "property."),
    (lambda c: c.add_input({"name": "X", "data_type": "TYPE_FP32"}),
     "input 'X' in auto-complete-config function for model 'm' is missing 'dims' property."),
    (lambda c: c.add_input({"name": "IN", "data_type": "TYPE_FP32", "dims": [3]}),
     "unable to load model 'm', configuration expects datatype TYPE_INT32 for input 'IN', "
     "model provides TYPE_FP32"),
    (lambda c: c.add_input({"name": "IN", "data_type": "TYPE_INT32", "dims": [4]}),
     "model 'm', tensor 'IN': the model expects dims [4] but the model configuration "
     "specifies dims [3]"),
    (lambda c: c.add_input({"name": "IN", "data_type": "TYPE_INT32", "dims": [3],
                            "optional": True}),
     "model 'm', tensor 'IN': the model expects optional True but the model configuration "
     "specifies optional False"),
    (lambda c: c.add_output({"name": "Y", "data_type": "TYPE_FP32", "dims": [1],
                             "optional": True}),
     "output 'Y' in auto-complete-config function for model 'm' contains property other than "
     "'name', 'data_type' and 'dims'."),
    (lambda c: c.add_output({"name": "Y", "data_type": "TYPE_FP32"}),
     "output 'Y' in auto-complete-config function for model 'm' is missing 'dims' property."),
    (lambda c: c.add_output({"name": "OUT", "data_type": "TYPE_FP64", "dims": [3]}),
     "unable to load model 'm', configuration expects datatype TYPE_INT32 for output 'OUT', "
     "model provides TYPE_FP64"),
    (lambda c: c.add_output({"name": "OUT", "data_type": "TYPE_INT32", "dims": [1, 3]}),
     "model 'm', tensor 'OUT': the model expects dims [1, 3] but the model configuration "
     "specifies dims [3]"),
    (lambda c: c.set_model_transaction_policy({"decoupled": True, "other": 1}),
     "model transaction property in auto-complete-config function for model 'm' contains "
     "property other than 'decoupled'."),
    (lambda c: c.set_model_transaction_policy({"decoupled": True}),
     "trying to change decoupled property in auto-complete-config for model 'm', which is "
     "already set to 'False'."),
])
def test_model_config_errors(call, message):
    config = _config(
        max_batch_size=2,
        input=[{"name": "IN", "data_type": "TYPE_INT32", "dims": [3], "optional": False}],
        output=[{"name": "OUT", "data_type": "TYPE_INT32", "dims": [3]}],
        model_transaction_policy={"decoupled": False})
    with pytest.raises(ValueError) as raised:
        call(config)
    assert str(raised.value) == message


@pytest.mark.parametrize("scheduler", ["sequence_batching", "ensemble_scheduling"])
def test_set_dynamic_batching_under_another_scheduler(scheduler):
    with pytest.raises(ValueError, match=f"Configuration specified scheduling_choice as "
                                         f"'{scheduler}', but auto-complete-config function for "
                                         "model 'm' tries to set scheduling_choice as "
                                         "'dynamic_batching'"):
        _config(**{scheduler: {}}).set_dynamic_batching()


def test_a_parse_disturbed_by_another_thread_leaves_the_decision_to_the_import(monkeypatch):
    """CPython 3.11's ast.parse, run in two threads at once, can raise
    SystemError ("AST constructor recursion depth mismatch"; seen in CI, two
    models loading): the files whose text cannot decide are imported, and the
    package's own parses take turns."""
    from tritonserver._inprocess import _pb_autocomplete

    source = "import base\n\nclass TritonPythonModel:\n    pass\n"
    assert _pb_autocomplete._may_define_hook(source) is False  # parsed: no hook possible

    def disturbed(text):
        assert _pb_autocomplete._PARSE_LOCK.locked()  # parses take turns
        raise SystemError("AST constructor recursion depth mismatch (before=12, after=8)")

    monkeypatch.setattr(_pb_autocomplete.ast, "parse", disturbed)
    assert _pb_autocomplete._may_define_hook(source) is True
