"""TorchScript models run as Triton's pytorch backend runs them on CPU:
results equal to the module run directly with torch, batches of the dynamic
batcher in one run, instances in parallel (libtorch releases the GIL), a
Dict[str, Tensor] input, strings as List[str], every data type, sequence
controls and implicit state, the parameters; results of the wrong kind or
type fail the requests, never the server."""

from __future__ import annotations

import logging
import os
import threading
import warnings

import numpy as np
import pytest
import torch

import tritonserver
from conftest import start_server, stop_within
from parallel_runs import all_at_once, batched, overlapping
from pytorch_backend import models

EXPLICIT = tritonserver.ModelControlMode.EXPLICIT
START, END = 1, 2  # request flags

CNN = """
backend: "pytorch"
max_batch_size: 8
input [ { name: "image" data_type: TYPE_FP32 dims: [ 3, 32, 32 ] } ]
output [ { name: "LOGITS__0" data_type: TYPE_FP32 dims: [ 10 ] } ]
"""

IDENTITIES = 'backend: "pytorch"\ninput [ %s ]\noutput [ %s ]\n' % (
    ", ".join(f'{{ name: "IN_{t[5:]}" data_type: {t} dims: [ -1 ] }}'
              for t in list(models.TYPES) + ["TYPE_STRING"]),
    ", ".join(f'{{ name: "OUT_{t[5:]}__{i}" data_type: {t} dims: [ -1 ] }}'
              for i, t in enumerate(list(models.TYPES) + ["TYPE_STRING"])))

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
    models.write(root, "identities", models.script(models.Identities()), IDENTITIES)
    models.write(root, "slow", models.script(models.Slow()), """
backend: "pytorch"
input [ { name: "x" data_type: TYPE_FP32 dims: [ -1, -1 ] } ]
output [ { name: "y__0" data_type: TYPE_FP32 dims: [ -1, -1 ] } ]
instance_group [ { kind: KIND_CPU count: 2 } ]
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


def test_requests_batched_by_the_dynamic_batcher_run_together(server):
    model = server.model("add_sub")
    before = model.statistics()["model_stats"][0]
    feeds = [{"a": np.full((1, 4), i, np.float32),
              "b": np.full((1, 4), 1, np.float32)} for i in range(12)]
    for i, out in enumerate(all_at_once(model, feeds)):
        assert out["SUM__0"].tolist() == [[i + 1.0] * 4]
        assert out["DIFF__1"].tolist() == [[i - 1.0] * 4]
    batched(model, before, 12)  # some requests shared a run


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


def test_every_data_type_round_trips(server):
    rng = np.random.default_rng(7)
    inputs = {}
    for config_type, dtype in models.TYPES.items():
        numpy_type = torch.empty(0, dtype=dtype).numpy().dtype
        values = rng.integers(0, 2, 5) if config_type == "TYPE_BOOL" else rng.random(5) * 100
        inputs["IN_" + config_type[5:]] = values.astype(numpy_type)
    inputs["IN_STRING"] = np.array(["a", "\u00e9t\u00e9", "x" * 300], dtype=object)
    out = next(server.model("identities").infer(inputs=inputs)).outputs
    assert len(out) == len(inputs)
    for index, (name, value) in enumerate(inputs.items()):
        tensor = out[f"OUT_{name[3:]}__{index}"]
        if value.dtype == object:
            assert tensor.to_bytes_array().tolist() == [v.encode() for v in value]
        else:
            got = np.from_dlpack(tensor)
            assert got.dtype == value.dtype
            np.testing.assert_array_equal(got, value)


def test_instances_run_in_parallel_with_the_gil_free(server):
    """Two instances, two long runs at once: they overlap (they end close
    together, where one after the other they would end a whole run apart),
    and a Python thread keeps ticking while they run (libtorch releases the
    GIL)."""
    model = server.model("slow")
    x = np.ones((384, 384), np.float32)
    for _ in range(2):
        next(model.infer(inputs={"x": x}))  # warm up
    for y in overlapping(model, {"x": x}, "y__0").outputs:
        np.testing.assert_allclose(np.from_dlpack(y), 1.0, rtol=1e-4)
    assert model.config()["instance_group"][0]["count"] == 2


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
