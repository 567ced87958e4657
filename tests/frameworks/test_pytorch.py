"""What the pytorch backend alone does (python/tritonserver/_torch), as
Triton's does: no auto-complete, its three naming conventions, sequence
control and state names, the data types it refuses, forward() signatures
it cannot feed, bad parameters (each failing the load with Triton's text,
never the server); results equal to the module run directly with torch,
scripted or traced, a Dict[str, Tensor] input, strings as List[str],
sequence controls and implicit state, the parameters, a model saved on a
GPU; results of the wrong kind or type fail the requests, never the
server. Shared with the other frameworks: test_loading.py,
test_execution.py."""

from __future__ import annotations

import logging
import os
import threading
import warnings

import numpy as np
import pytest

import tritonserver
from conftest import start_server, stop_within
from frameworks.conftest import refused

torch = pytest.importorskip("torch")

from frameworks import models_torch as models  # noqa: E402

EXPLICIT = tritonserver.ModelControlMode.EXPLICIT
START, END = 1, 2  # request flags

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


CNN = """
backend: "pytorch"
max_batch_size: 8
input [ { name: "image" data_type: TYPE_FP32 dims: [ 3, 32, 32 ] } ]
output [ { name: "LOGITS__0" data_type: TYPE_FP32 dims: [ 10 ] } ]
"""

ONE_IN_ONE_OUT = """
backend: "pytorch"
input [ { name: "x" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "%s" data_type: %s dims: [ -1 ] } ]
"""


@pytest.fixture(scope="module")
def cnn() -> torch.nn.Module:
    return models.ConvNet().eval()


@pytest.fixture(scope="module")
def repo(tmp_path_factory, cnn):
    root = str(tmp_path_factory.mktemp("torch_repo"))
    example = torch.rand(2, 3, 32, 32)
    models.write(root, "cnn_scripted", models.script(cnn), CNN)
    models.write(root, "cnn_traced", models.trace(cnn, example), CNN)
    models.write(root, "add_sub", models.script(models.AddSub()), """
backend: "pytorch"
max_batch_size: 16
dynamic_batching { max_queue_delay_microseconds: 200000 }
input [ { name: "a" data_type: TYPE_FP32 dims: [ 4 ] },
        { name: "b" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "SUM__0" data_type: TYPE_FP32 dims: [ 4 ] },
         { name: "DIFF__1" data_type: TYPE_FP32 dims: [ 4 ] } ]
""")
    models.write(root, "dict_input", models.script(models.DictInput()), """
backend: "pytorch"
max_batch_size: 4
input [ { name: "y" data_type: TYPE_FP32 dims: [ 3 ] },
        { name: "x" data_type: TYPE_FP32 dims: [ 3 ] } ]
output [ { name: "OUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]
""")
    models.write(root, "words", models.script(models.Words()), """
backend: "pytorch"
input [ { name: "words" data_type: TYPE_STRING dims: [ -1 ] } ]
output [ { name: "SHOUTED__0" data_type: TYPE_STRING dims: [ -1 ] },
         { name: "LENGTHS__1" data_type: TYPE_INT64 dims: [ -1 ] } ]
""")
    for name, module in (("dict_output", models.DictOutput()), ("list_output",
                         models.TensorList()), ("scalar", models.Scalar()),
                         ("failing", models.Failing())):
        models.write(root, name, models.script(module), ONE_IN_ONE_OUT % ("y__0", "TYPE_FP32"))
    models.write(root, "index_beyond", models.script(models.Identity()),
                 ONE_IN_ONE_OUT % ("y__1", "TYPE_FP32"))
    models.write(root, "wrong_type", models.script(models.Identity()),
                 ONE_IN_ONE_OUT % ("y__0", "TYPE_INT32"))
    models.write(root, "gated", models.script(models.Gated()), """
backend: "pytorch"
max_batch_size: 4
sequence_batching {
  control_input [
    { name: "START__1" control [ { kind: CONTROL_SEQUENCE_START fp32_false_true: [ 0, 1 ] } ] },
    { name: "READY__2" control [ { kind: CONTROL_SEQUENCE_READY fp32_false_true: [ 0, 1 ] } ] }
  ]
}
input [ { name: "x__0" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "y__0" data_type: TYPE_FP32 dims: [ 1 ] } ]
""")
    models.write(root, "running_sum", models.script(models.RunningSum()), """
backend: "pytorch"
max_batch_size: 4
sequence_batching {
  state [ { input_name: "STATE__1" output_name: "STATE_OUT__1" data_type: TYPE_FP32
            dims: [ 1 ] initial_state { data_type: TYPE_FP32 dims: [ 1 ] zero_data: true
                                        name: "zero" } } ]
}
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 1 ] } ]
""")
    return root


@pytest.fixture(scope="module")
def server(repo):
    s = start_server(model_repository=repo)
    yield s
    stop_within(s)


@pytest.mark.parametrize("name", ["cnn_scripted", "cnn_traced"])
def test_a_cnn_answers_what_torch_answers(server, cnn, name):
    images = np.random.default_rng(5).random((3, 3, 32, 32), dtype=np.float32)
    out = next(server.model(name).infer(inputs={"image": images})).outputs
    with torch.no_grad():
        expected = cnn(torch.from_numpy(images)).numpy()
    np.testing.assert_allclose(np.from_dlpack(out["LOGITS__0"]), expected, rtol=1e-5,
                               atol=1e-6)
    # The traced module runs in inference mode every time (a first run
    # outside it would make the next one inside fail).
    again = next(server.model(name).infer(inputs={"image": images[:1]})).outputs
    np.testing.assert_allclose(np.from_dlpack(again["LOGITS__0"]), expected[:1], rtol=1e-5,
                               atol=1e-6)


def test_a_dict_input_takes_every_input_by_name(server):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.full((2, 3), 0.5, np.float32)
    out = next(server.model("dict_input").infer(inputs={"x": x, "y": y})).outputs
    assert np.from_dlpack(out["OUT__0"]).tolist() == (x * 2 + y).tolist()


def test_strings_in_and_out(server):
    words = np.array(["hello", "h\u00e9t\u00e9", ""], dtype=object)
    out = next(server.model("words").infer(inputs={"words": words})).outputs
    shouted, lengths = models.script(models.Words())(list(words))  # TorchScript's upper()
    assert shouted[0] == "HELLO!"
    assert out["SHOUTED__0"].to_bytes_array().tolist() == [w.encode() for w in shouted]
    assert np.from_dlpack(out["LENGTHS__1"]).tolist() == lengths.tolist()
    with pytest.raises(tritonserver.InvalidArgumentError, match="UTF-8"):
        list(server.model("words").infer(inputs={"words": np.array([b"\xff"], dtype=object)}))
    assert server.live()


@pytest.mark.parametrize("name,message", [
    ("dict_output", "PyTorch execute failure: output must be of type Tensor, List[str] or "
                    "Tuple containing one of these two types. It should not be a List / "
                    "Dictionary of Tensors or a Scalar"),
    ("list_output", "PyTorch execute failure: output must be of type Tensor or List[str], "
                    "received List[Tensor]"),
    ("scalar", "output 'y__0' is a scalar which is not supported."),
    ("index_beyond", "The output y__1 in the model configuration refers to an output index "
                     "which doesn't exist. This model has 1 outputs"),
    ("wrong_type", "configuration expects datatype TYPE_INT32 for output 'y__0', model "
                   "provides TYPE_FP32"),
    ("failing", "PyTorch execute failure: "),
])
def test_results_it_cannot_serve_fail_the_request(server, name, message):
    model = server.model(name)
    x = np.array([-1.0, 2.0], np.float32)
    with pytest.raises(tritonserver.TritonError) as caught:
        list(model.infer(inputs={"x": x}))
    assert message in str(caught.value)
    assert server.live()
    if name == "failing":
        assert "negative input" in str(caught.value)
        out = next(model.infer(inputs={"x": np.abs(x)})).outputs
        assert np.from_dlpack(out["y__0"]).tolist() == [1.0, 2.0]
    a = np.ones((1, 4), np.float32)
    out = next(server.model("add_sub").infer(inputs={"a": a, "b": a})).outputs
    assert np.from_dlpack(out["SUM__0"]).tolist() == [[2.0] * 4]


def step(model, name: str, output: str, value: float, sequence, flags: int = 0) -> float:
    x = np.array([[value]], np.float32)
    (response,) = list(model.infer(inputs={name: x}, correlation_id=sequence, flags=flags))
    return float(np.from_dlpack(response.outputs[output])[0, 0])


def run_sequence(model, name: str, output: str, sequence, values: list) -> list:
    return [step(model, name, output, v, sequence,
                 (START if k == 0 else 0) | (END if k == len(values) - 1 else 0))
            for k, v in enumerate(values)]


def test_sequence_controls_are_forward_arguments(server):
    """START__1 and READY__2, filled by the core, feed forward()'s second
    and third arguments: y = x * start + x * 10 * ready."""
    model = server.model("gated")
    assert run_sequence(model, "x__0", "y__0", 7, [1.0, 2.0, 3.0]) == [11.0, 20.0, 30.0]


def test_implicit_state_is_fed_back(server):
    model = server.model("running_sum")
    assert run_sequence(model, "INPUT__0", "OUTPUT__0", 40, [1.0, 2.0, 3.0]) == [1.0, 3.0, 6.0]
    assert run_sequence(model, "INPUT__0", "OUTPUT__0", 40, [5.0, 1.0]) == [5.0, 6.0]


def test_parameters_reach_torch(tmp_path, caplog, cnn):
    """The thread counts (process-wide in torch, as in Triton), inference
    mode off (a traced module then runs under no_grad), no optimized
    execution and the JIT switches: the model loads and answers the same."""
    models.write(str(tmp_path), "tuned", models.trace(cnn, torch.rand(1, 3, 32, 32)),
                 CNN + "".join(f'parameters {{ key: "{k}" value: {{ string_value: "{v}" }} }}\n'
                               for k, v in (("INTRA_OP_THREAD_COUNT", "1"),
                                            ("INFERENCE_MODE", "false"),
                                            ("DISABLE_OPTIMIZED_EXECUTION", "true"),
                                            ("ENABLE_JIT_PROFILING", "false"),
                                            ("ENABLE_JIT_EXECUTOR", "true"),
                                            ("ENABLE_TENSOR_FUSER", "false"),
                                            ("ENABLE_CACHE_CLEANING", "true"))))
    threads, fuser = torch.get_num_threads(), torch._C._jit_texpr_fuser_enabled()
    optimize = torch._C._get_graph_executor_optimize()
    profiling = torch._C._jit_set_profiling_mode(True)  # setters answer the old value
    executor = torch._C._jit_set_profiling_executor(True)
    torch._C._jit_set_profiling_mode(profiling)
    torch._C._jit_set_profiling_executor(executor)
    caplog.set_level(logging.INFO, logger="tritonserver.pytorch")
    s = start_server(model_repository=str(tmp_path))
    try:
        # torch applies it to the threads that start torch work after the load
        # (a thread that already ran torch keeps its count): read on a new one.
        seen: list[int] = []
        reader = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
        reader.start()
        reader.join()
        assert seen == [1]
        images = np.random.default_rng(9).random((2, 3, 32, 32), dtype=np.float32)
        for _ in range(3):  # past the profiling executor's first runs
            out = next(s.model("tuned").infer(inputs={"image": images})).outputs
        with torch.no_grad():
            expected = cnn(torch.from_numpy(images)).numpy()
        np.testing.assert_allclose(np.from_dlpack(out["LOGITS__0"]), expected, rtol=1e-5,
                                   atol=1e-6)
    finally:
        stop_within(s)
        torch.set_num_threads(threads)  # all process-wide: as they were
        torch._C._set_graph_executor_optimize(optimize)
        torch._C._jit_set_profiling_mode(profiling)
        torch._C._jit_set_profiling_executor(executor)
        torch._C._jit_set_texpr_fuser_enabled(fuser)
    assert "Intra op thread count is set to 1 for model 'tuned'" in caplog.text


def test_a_model_saved_on_cuda_loads_on_cpu(tmp_path):
    """A TorchScript archive whose tensors were saved on cuda:0 (as on a GPU
    machine) loads and answers on this CPU-only torch: the backend maps it
    to the CPU, where torch.jit.load alone refuses it."""
    cnn = models.ConvNet().eval()
    scripted = models.script(cnn)
    folder = models.write(str(tmp_path), "from_gpu", scripted, CNN)
    path = os.path.join(folder, "1", "model.pt")
    models.move_to_cuda_on_save(path)
    with pytest.raises(RuntimeError, match="CUDA"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            torch.jit.load(path)
    s = start_server(model_repository=str(tmp_path))
    try:
        images = np.random.default_rng(11).random((2, 3, 32, 32), dtype=np.float32)
        out = next(s.model("from_gpu").infer(inputs={"image": images})).outputs
        with torch.inference_mode():
            expected = cnn(torch.from_numpy(images)).numpy()
        np.testing.assert_allclose(np.from_dlpack(out["LOGITS__0"]), expected, rtol=1e-5,
                                   atol=1e-6)
    finally:
        stop_within(s)
