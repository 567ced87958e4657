"""A Python model that fails: each hook's error goes to the load or to the
requests concerned, with a clear message, and the server stays live."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tritonserver

ROW = (np.float32, [1])
SPECS = dict(inputs={"X": ROW}, outputs={"Y": ROW})


def infer1(model, value=1.0):
    return next(model.infer(inputs={"X": np.array([value], np.float32)}))


def raiser(hook):
    def method(self, *args):
        raise RuntimeError(f"{hook} failed on purpose")
    return method


@pytest.mark.parametrize("hook", ["initialize", "initialize_instance"])
def test_an_exception_in_an_initialize_hook_fails_the_load(explicit_empty, hook):
    cls = type(f"Broken_{hook}", (tritonserver.PythonModel,),
               {hook: raiser(hook), "execute": lambda self, requests: []})
    with pytest.raises(tritonserver.TritonError, match=f"{hook} failed on purpose"):
        explicit_empty.register_model(f"broken_{hook}", cls, **SPECS)
    assert not explicit_empty.model(f"broken_{hook}").ready()
    assert explicit_empty.live()


@pytest.mark.parametrize("hook", ["finalize", "finalize_instance"])
def test_an_exception_in_a_finalize_hook_still_unloads(explicit_empty, hook):
    cls = type(f"Sloppy_{hook}", (tritonserver.PythonModel,),
               {hook: raiser(hook),
                "execute": lambda self, requests: [{"Y": r.inputs["X"]} for r in requests]})
    model = explicit_empty.register_model(f"sloppy_{hook}", cls, **SPECS)
    infer1(model)
    explicit_empty.unload(model, wait_until_unloaded=True, timeout=30)
    assert not model.ready() and explicit_empty.live()


def test_an_exception_in_execute_fails_its_batch_with_a_traceback(explicit_empty):
    class Fails(tritonserver.PythonModel):
        def execute(self, requests):
            return self.helper()

        def helper(self):
            raise KeyError("no such thing")

    model = explicit_empty.register_model("fails", Fails, **SPECS)
    with pytest.raises(tritonserver.InternalError) as caught:
        infer1(model)
    message = str(caught.value)
    assert "model 'fails': execute raised KeyError" in message
    assert "in helper" in message and os.path.basename(__file__) in message
    assert "_dispatch.py" not in message  # the summary shows the model's frames
    infer_after = explicit_empty.register_model("fine_after", type(
        "Fine", (tritonserver.PythonModel,),
        {"execute": lambda self, requests: [{"Y": r.inputs["X"]} for r in requests]}), **SPECS)
    assert infer1(infer_after).outputs  # the server goes on


def test_a_tritonserver_error_keeps_its_class(explicit_empty):
    class Refuses(tritonserver.PythonModel):
        def execute(self, requests):
            return [tritonserver.InvalidArgumentError("x must be positive")
                    if float(r.inputs["X"][0]) < 0 else {"Y": r.inputs["X"]}
                    for r in requests]

    model = explicit_empty.register_model("refuses", Refuses, **SPECS)
    with pytest.raises(tritonserver.InvalidArgumentError, match="x must be positive"):
        infer1(model, -1.0)
    assert infer1(model, 2.0).outputs  # one request's error is its own
    error_response = tritonserver.ModelResponse(error="plain message")
    assert "plain message" in repr(error_response)


@pytest.mark.parametrize("returned, match", [
    ([], "returned 0 responses for 1 requests"),
    ([{"Y": np.ones(1, np.float32)}] * 2, "returned 2 responses for 1 requests"),
    (None, "returned None"),
    ([None], "returned None for this request"),
    (42, "must return a list"),
    (["text"], "a response is a dict of outputs"),
])
def test_wrong_responses_get_a_clear_error(explicit_empty, returned, match):
    cls = type("Wrong", (tritonserver.PythonModel,),
               {"execute": lambda self, requests: returned})
    model = explicit_empty.register_model("wrong", cls, **SPECS)
    with pytest.raises(tritonserver.TritonError, match=match):
        infer1(model)
    assert explicit_empty.live()


def test_a_bad_model_folder_fails_its_load_only(explicit_empty, tmp_path):
    repo = tmp_path / "repo"
    for name, source in (("syntax_error", "def broken(:\n"),
                         ("no_class", "X = 1\n"),
                         ("good", "import tritonserver\n"
                                  "class Good(tritonserver.PythonModel):\n"
                                  "    def execute(self, requests):\n"
                                  "        return [{'Y': r.inputs['X']} for r in requests]\n")):
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "1" / "model.py").write_text(source)
        (repo / name / "config.pbtxt").write_text(
            'backend: "inprocess"\n'
            'input [ { name: "X", data_type: TYPE_FP32, dims: [ 1 ] } ]\n'
            'output [ { name: "Y", data_type: TYPE_FP32, dims: [ 1 ] } ]\n')
    (repo / "missing_file" / "1").mkdir(parents=True)
    (repo / "missing_file" / "config.pbtxt").write_text((repo / "good" / "config.pbtxt").read_text())
    explicit_empty.register_model_repository(str(repo))
    try:
        for name, match in (("syntax_error", "SyntaxError"),
                            ("no_class", "defines no PythonModel subclass"),
                            ("missing_file", "model.py does not exist")):
            with pytest.raises(tritonserver.TritonError, match=match):
                explicit_empty.load(name)
        assert infer1(explicit_empty.load("good")).outputs
        assert explicit_empty.live()
    finally:
        explicit_empty.unload("good", wait_until_unloaded=True, timeout=30)
        explicit_empty.unregister_model_repository(str(repo))
