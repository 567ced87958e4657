"""TorchScript models found and checked as Triton's pytorch backend does:
platform or backend names, default_model_filename, versions, no
auto-complete, the three naming conventions, the input count, sequence
control and state names, the data types it refuses, forward() signatures
it cannot feed, bad files and bad parameters: each fails the load with
Triton's text, never the server."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest
import torch

import tritonserver
from conftest import run_python, start_server, stop_within
from pytorch_backend import models

EXPLICIT = tritonserver.ModelControlMode.EXPLICIT

ADD_SUB = """
{naming}
max_batch_size: 8
input [ {{ name: "{a}" data_type: TYPE_FP32 dims: [ 4 ] }},
        {{ name: "{b}" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "{total}" data_type: TYPE_FP32 dims: [ 4 ] }},
         {{ name: "{diff}" data_type: TYPE_FP32 dims: [ 4 ] }} ]
"""


def add_sub_config(naming: str = 'backend: "pytorch"', a: str = "a", b: str = "b",
                   total: str = "SUM__0", diff: str = "DIFF__1") -> str:
    return ADD_SUB.format(naming=naming, a=a, b=b, total=total, diff=diff)


def add_sub_works(model: tritonserver.Model, names=("a", "b"), outputs=("SUM__0", "DIFF__1"),
                  batch: int = 2) -> None:
    a = np.arange(4 * batch, dtype=np.float32).reshape(batch, 4)
    b = np.full((batch, 4), 0.5, np.float32)
    out = next(model.infer(inputs={names[0]: a, names[1]: b})).outputs
    np.testing.assert_array_equal(np.from_dlpack(out[outputs[0]]), a + b)
    np.testing.assert_array_equal(np.from_dlpack(out[outputs[1]]), a - b)


@pytest.fixture
def explicit(tmp_path):
    """An EXPLICIT-mode server over an empty repository (tmp_path/repo), not strict."""
    repo = tmp_path / "repo"
    repo.mkdir()
    s = start_server(model_repository=str(repo), model_control_mode=EXPLICIT,
                     strict_model_config=False)
    yield s, str(repo)
    stop_within(s)


def refused(s: tritonserver.Server, name: str) -> str:
    """The load error's text; the server stays live."""
    with pytest.raises(tritonserver.TritonError) as caught:
        s.load(name)
    assert s.live()
    return str(caught.value)


@pytest.mark.parametrize("naming", ['platform: "pytorch_libtorch"', 'backend: "pytorch"'])
def test_found_by_platform_or_backend(tmp_path, naming):
    models.write(str(tmp_path), "add_sub", models.script(models.AddSub()),
                 add_sub_config(naming))
    s = start_server(model_repository=str(tmp_path))  # strict model config
    try:
        add_sub_works(s.model("add_sub"))
        assert s.model("add_sub").config()["backend"] == "pytorch"
    finally:
        stop_within(s)


def test_default_model_filename_and_versions(explicit):
    s, repo = explicit
    config = """
backend: "pytorch"
default_model_filename: "net.pt"
version_policy: { all { } }
max_batch_size: 2
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "y__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""

    class Scale(torch.nn.Module):
        def __init__(self, scale: float):
            super().__init__()
            self.scale = scale

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.scale

    x = torch.ones(1, 4)
    models.write(repo, "versions", models.trace(Scale(2.0), x), config, filename="net.pt")
    models.write(repo, "versions", models.trace(Scale(3.0), x), None, version=2,
                 filename="net.pt")
    s.load("versions")
    for version, scale in ((1, 2.0), (2, 3.0)):
        out = next(s.model("versions", version).infer(inputs={"x": x.numpy()}))
        assert np.from_dlpack(out.outputs["y__0"]).tolist() == [[scale] * 4]


@pytest.mark.parametrize("strict", [False, True], ids=["auto-complete-allowed", "strict"])
def test_no_configuration_is_not_completed(tmp_path, caplog, strict):
    """Triton's pytorch backend completes nothing: a model.pt alone fails to
    load, saying the configuration lists no inputs."""
    models.write(str(tmp_path), "bare", models.script(models.AddSub()))
    s = start_server(model_repository=str(tmp_path), model_control_mode=EXPLICIT,
                     strict_model_config=strict)
    try:
        with caplog.at_level(logging.WARNING, logger="tritonserver.pytorch"):
            text = refused(s, "bare")
        if strict:  # the core's own refusal: no config.pbtxt
            assert "config.pbtxt" in text and "strict_model_config=False" in text
        else:
            assert "model configuration must contain at least one input, none were " \
                   "specified." in text
        said = "skipping model configuration auto-complete for 'bare': not supported for " \
               "pytorch backend"
        assert (said in caplog.text) is not strict
        models.write(str(tmp_path), "good", models.script(models.AddSub()), add_sub_config())
        s.load("good")
        add_sub_works(s.model("good"))
    finally:
        stop_within(s)


def test_outputs_must_be_listed(explicit):
    s, repo = explicit
    models.write(repo, "no_outputs", models.script(models.Identity()), """
backend: "pytorch"
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
""")
    assert "model configuration must contain at least one output, none were specified." \
        in refused(s, "no_outputs")


@pytest.mark.parametrize("inputs,outputs,warned", [
    (("a", "b"), ("SUM__0", "DIFF__1"), []),  # forward() argument names
    (("INPUT__0", "INPUT__1"), ("OUTPUT__0", "OUTPUT__1"), []),  # <name>__<index>
    (("X", "Y"), ("SUM", "DIFF"), ["input 'X'", "output 'SUM'"]),  # configuration order
    (("a", "B__x"), ("SUM__0", "DIFF__one"), ["input 'a'", "output 'DIFF__one'"]),
], ids=["forward-arguments", "named-index", "strict-order", "bad-index"])
def test_naming_conventions(explicit, caplog, inputs, outputs, warned):
    s, repo = explicit
    models.write(repo, "named", models.script(models.AddSub()),
                 add_sub_config(a=inputs[0], b=inputs[1], total=outputs[0], diff=outputs[1]))
    with caplog.at_level(logging.WARNING, logger="tritonserver.pytorch"):
        s.load("named")
    add_sub_works(s.model("named"), inputs, outputs)
    fallbacks = [r.getMessage() for r in caplog.records
                 if r.name.startswith("tritonserver") and "Falling back" in r.getMessage()]
    assert len(fallbacks) == len(warned), fallbacks
    for said, expected in zip(fallbacks, warned):
        assert said.startswith(expected) and "model 'named'" in said
        assert "Falling back to enforcing strict ordering from model configuration." in said


def test_named_indices_bind_by_index_not_by_order(explicit):
    """INPUT__1 listed first still feeds forward()'s second argument; the
    outputs likewise come from the result their index names."""
    s, repo = explicit
    models.write(repo, "swapped", models.script(models.AddSub()), add_sub_config(
        a="INPUT__1", b="INPUT__0", total="OUTPUT__1", diff="OUTPUT__0"))
    s.load("swapped")
    a, b = np.full((1, 4), 3.0, np.float32), np.full((1, 4), 1.0, np.float32)
    out = next(s.model("swapped").infer(inputs={"INPUT__0": a, "INPUT__1": b})).outputs
    assert np.from_dlpack(out["OUTPUT__0"]).tolist() == [[4.0] * 4]  # a + b
    assert np.from_dlpack(out["OUTPUT__1"]).tolist() == [[2.0] * 4]  # a - b


def test_input_count_must_match_forward(explicit):
    s, repo = explicit
    models.write(repo, "count", models.script(models.AddSub()), """
backend: "pytorch"
input [ { name: "a" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "SUM__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
""")
    assert "unable to load model 'count', configuration expects 1 inputs, model provides 2" \
        in refused(s, "count")


SEQUENCE = """
backend: "pytorch"
max_batch_size: 4
sequence_batching {{
  control_input [
    {{ name: "{start}" control [ {{ kind: CONTROL_SEQUENCE_START fp32_false_true: [ 0, 1 ] }} ] }},
    {{ name: "READY__2" control [ {{ kind: CONTROL_SEQUENCE_READY fp32_false_true: [ 0, 1 ] }} ] }}
  ]
}}
input [ {{ name: "{x}" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "y__0" data_type: TYPE_FP32 dims: [ 1 ] }} ]
"""

STATE = """
backend: "pytorch"
max_batch_size: 4
sequence_batching {{
  state [ {{ input_name: "{state_in}" output_name: "{state_out}" data_type: TYPE_FP32
            dims: [ 1 ] initial_state {{ data_type: TYPE_FP32 dims: [ 1 ] zero_data: true
                                         name: "zero" }} }} ]
}}
input [ {{ name: "{x}" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 1 ] }} ]
"""


@pytest.mark.parametrize("module,config,message", [
    (models.Gated, SEQUENCE.format(start="START", x="x__0"),
     "input 'START' does not follow <name>__<index> naming convention."),
    (models.RunningSum, STATE.format(state_in="STATE__1", state_out="STATE_OUT__1", x="x"),
     "PyTorch model 'seq' is using sequence batching with state but not all inputs and "
     "outputs follow the <name>__<index> naming convention."),
    (models.RunningSum, STATE.format(state_in="STATE", state_out="STATE_OUT__1", x="x__0"),
     "PyTorch model 'seq' is using sequence batching with state but state 'STATE' does not "
     "follow the <name>__<index> naming convention."),
], ids=["control", "inputs-with-state", "state"])
def test_sequence_tensors_need_named_indices(explicit, module, config, message):
    s, repo = explicit
    models.write(repo, "seq", models.script(module()), config)
    assert message in refused(s, "seq")


@pytest.mark.parametrize("config_type", ["TYPE_UINT16", "TYPE_UINT32", "TYPE_UINT64",
                                         "TYPE_BF16"])
@pytest.mark.parametrize("kind", ["input", "output"])
def test_types_torch_lacks_are_refused(explicit, config_type, kind):
    s, repo = explicit
    types = {"input": "TYPE_FP32", "output": "TYPE_FP32", kind: config_type}
    models.write(repo, "typed", models.script(models.Identity()), f"""
backend: "pytorch"
input [ {{ name: "x" data_type: {types["input"]} dims: [ 4 ] }} ]
output [ {{ name: "y__0" data_type: {types["output"]} dims: [ 4 ] }} ]
""")
    name = "x" if kind == "input" else "y__0"
    assert f"unsupported datatype {config_type} for {kind} '{name}' for model 'typed'" \
        in refused(s, "typed")


@pytest.mark.parametrize("batching,dims", [(True, "[ 2 ]"), (False, "[ 2, 2 ]")],
                         ids=["batched", "two-dims"])
def test_strings_are_one_dimensional(explicit, batching, dims):
    s, repo = explicit
    models.write(repo, "words", models.script(models.Words()), f"""
backend: "pytorch"
max_batch_size: {4 if batching else 0}
input [ {{ name: "words" data_type: TYPE_STRING dims: {dims} }} ]
output [ {{ name: "OUT__0" data_type: TYPE_STRING dims: [ -1 ] }},
         {{ name: "LEN__1" data_type: TYPE_INT64 dims: [ -1 ] }} ]
""")
    assert "Triton only supports 1 dimensional List of String as input for 'words' for " \
           "model 'words'" in refused(s, "words")


@pytest.mark.parametrize("module,message", [
    (models.TakesAnInt, "An input of type 'int' was detected in the model. Only a single input "
                        "of type Dict(str, Tensor) or input(s) of type Tensor are supported."),
    (models.TwoDicts, "Multiple inputs of kind DictType were detected. Only a single input of "
                      "type Dict(str, Tensor) is supported."),
], ids=["int-argument", "two-dicts"])
def test_forward_arguments_it_cannot_feed(explicit, module, message):
    s, repo = explicit
    models.write(repo, "args", models.script(module()), """
backend: "pytorch"
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] },
        { name: "n" data_type: TYPE_INT64 dims: [ 1 ] } ]
output [ { name: "y__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
""")
    assert message in refused(s, "args")


@pytest.mark.parametrize("content", [b"", b"not a torchscript archive" * 100, None],
                         ids=["empty", "garbage", "missing"])
def test_a_bad_model_file_fails_the_load(explicit, content):
    s, repo = explicit
    folder = os.path.join(repo, "bad", "1")
    os.makedirs(folder)
    with open(os.path.join(repo, "bad", "config.pbtxt"), "w") as f:
        f.write(add_sub_config())
    if content is not None:
        with open(os.path.join(folder, "model.pt"), "wb") as f:
            f.write(content)
    text = refused(s, "bad")
    if content is None:
        assert "unable to find the TorchScript model file" in text
    else:
        assert "failed to load model 'bad'" in text
    models.write(repo, "good", models.script(models.AddSub()), add_sub_config())
    s.load("good")
    add_sub_works(s.model("good"))


@pytest.mark.parametrize("key,value,message", [
    ("INFERENCE_MODE", "maybe", "parameter INFERENCE_MODE: failed to convert 'maybe'"),
    ("ENABLE_CACHE_CLEANING", "x", "parameter ENABLE_CACHE_CLEANING"),
    ("INTRA_OP_THREAD_COUNT", "many", "parameter INTRA_OP_THREAD_COUNT"),
])
def test_bad_parameters_fail_the_load(explicit, key, value, message):
    s, repo = explicit
    models.write(repo, "params", models.script(models.AddSub()), add_sub_config() +
                 f'parameters {{ key: "{key}" value: {{ string_value: "{value}" }} }}')
    assert message in refused(s, "params")


def test_without_torch_the_error_names_the_extra(tmp_path):
    models.write(str(tmp_path), "add_sub", models.script(models.AddSub()), add_sub_config())
    code = (
        "import sys; sys.modules['torch'] = None  # as if not installed\n"
        "import tritonserver as t\n"
        f"s = t.Server(model_repository={str(tmp_path)!r}, exit_timeout=10,"
        " model_control_mode=t.ModelControlMode.EXPLICIT).start(wait_until_ready=True)\n"
        "try:\n"
        "    s.load('add_sub')\n"
        "except t.TritonError as e:\n"
        "    print('REFUSED', type(e).__name__, e)\n"
        "print('LIVE', s.live())\n"
        "s.stop()\n")
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    assert 'pip install "tritonserver-embedded[torch]"' in done.stdout, done.stdout
    assert "LIVE True" in done.stdout
