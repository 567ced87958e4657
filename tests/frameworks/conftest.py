"""The framework backends (ONNX Runtime, PyTorch's TorchScript, OpenVINO)
share one layer (python/tritonserver/_framework), so they share tests: the
`framework` fixture runs a test once per framework, each described by a
Framework object (its backend and platform names, its extra, its file
name, how it names tensors, how to build and write its test models), and
skips a framework that is not installed. What one framework alone does is
tested in test_onnx*.py, test_pytorch*.py and test_openvino.py."""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any, Optional

import numpy as np
import pytest

import tritonserver
from conftest import start_server, stop_within

EXPLICIT = tritonserver.ModelControlMode.EXPLICIT
DYNAMIC_BATCHING = "dynamic_batching { max_queue_delay_microseconds: 200000 }"
# Strings of several lengths and scripts, for TYPE_STRING tensors.
WORDS = ["a", "h\u00e9llo", "", "x" * 300, "\u00e9t\u00e9", "z"]


def numpy_type(config_type: str) -> np.dtype:
    """The numpy dtype of a Triton config type (other than TYPE_STRING)."""
    short = config_type[len("TYPE_"):]
    named = {"BOOL": np.bool_, "FP16": np.float16, "FP32": np.float32, "FP64": np.float64}
    return np.dtype(named.get(short, short.lower()))


class Framework:
    """One framework backend as the shared tests see it. The subclasses
    give its names and build its models; `models` (the builders) is
    imported only once the framework is known to be installed."""

    name = ""  # the test id, and the backend's logger: tritonserver.<name>
    needs: tuple[str, ...] = ()  # the packages the tests import (skipped without them)
    runtime = ""  # the package the backend imports (the extra installs it)
    backend = ""
    platform: Optional[str] = None
    extra = ""  # pip install "tritonserver-embedded[<extra>]"
    filename = ""  # the model file the backend looks for
    builders = ""  # the module of model builders
    max_batch_size = 8  # of the loading tests' configurations
    dims = "[ 4 ]"  # of their FP32 tensors (A, B, SUM, DIFF; X, Y)
    config_extra = ""  # what every configuration of the tests adds
    add_sub_names: tuple[tuple[str, str], tuple[str, str]] = (("A", "B"), ("SUM", "DIFF"))
    scaled_names = ("X", "Y")
    # The load error's texts for a model file that is missing, or not a model.
    missing_file_text = ""
    unreadable_file_texts: tuple[str, ...] = ()

    @property
    def models(self) -> ModuleType:
        return importlib.import_module(f"frameworks.{self.builders}")

    def naming(self, by: str = "backend") -> str:
        """The configuration line that names the framework (by "backend" or "platform")."""
        return f'backend: "{self.backend}"' if by == "backend" else \
            f'platform: "{self.platform}"'

    def output(self, name: str, index: int) -> str:
        """The name the configuration gives the model's output `index`."""
        return name

    def config(self, inputs, outputs, extra: str = "", naming: Optional[str] = None,
               max_batch_size: Optional[int] = None, dims: Optional[str] = None) -> str:
        """A configuration of FP32 inputs and outputs."""
        def listed(names) -> str:
            return ", ".join(f'{{ name: "{n}" data_type: TYPE_FP32 dims: {dims or self.dims} }}'
                             for n in names)

        batch = self.max_batch_size if max_batch_size is None else max_batch_size
        return (f"{naming or self.naming()}\nmax_batch_size: {batch}\n"
                f"input [ {listed(inputs)} ]\noutput [ {listed(outputs)} ]\n"
                f"{self.config_extra}\n{extra}\n")

    def add_sub_config(self, naming: Optional[str] = None, extra: str = "") -> str:
        return self.config(*self.add_sub_names, extra=extra, naming=naming)

    def batched_add_sub_config(self) -> str:
        """add_sub batched by the dynamic batcher, up to 8 rows."""
        return self.config(*self.add_sub_names, extra=DYNAMIC_BATCHING, max_batch_size=8,
                           dims="[ 4 ]")

    def write(self, repo: str, name: str, model: Any, config: Optional[str] = None,
              version: int = 1, filename: Optional[str] = None) -> str:
        """<repo>/<name>/<version>/<filename or the default>, and config.pbtxt when given."""
        return self.models.write(repo, name, model, config, version=version,
                                 filename=filename or self.filename)

    def add_sub(self) -> Any:
        """SUM = A + B, DIFF = A - B (FP32, [batch, 4])."""
        return self.models.add_sub()

    def scaled(self, scale: float) -> Any:
        """Y = X * scale (FP32, [batch, 4])."""
        return self.models.scaled(scale)

    slow_output = "Y"

    def write_slow(self, repo: str) -> None:
        """A model "slow" of two CPU instances whose run takes a while."""
        raise NotImplementedError

    def slow_inputs(self) -> dict:
        raise NotImplementedError

    def slow_answer(self, repo: str, inputs: dict) -> tuple[Any, float]:
        """What "slow" answers (and the relative tolerance)."""
        return 1.0, 1e-4

    identity_types: tuple[str, ...] = ()
    identity_shape: tuple[int, ...] = (2, 3)

    def write_identities(self, repo: str) -> None:
        """A model "identities": OUT_<T> = IN_<T> for each identity type."""
        raise NotImplementedError


class OnnxRuntime(Framework):
    name = "onnxruntime"
    needs = ("onnx", "onnxruntime")
    runtime = "onnxruntime"
    backend = "onnxruntime"
    platform = "onnxruntime_onnx"
    extra = "onnx"
    filename = "model.onnx"
    builders = "models_onnx"
    # One CPU instance where a load fails beside a loaded model (models_onnx.ONE_INSTANCE).
    config_extra = "instance_group [ { kind: KIND_CPU count: 1 } ]"
    missing_file_text = "unable to find the ONNX model file"
    unreadable_file_texts = ("ONNX Runtime could not load", "ONNXRuntimeError")
    identity_types = ("TYPE_BOOL", "TYPE_INT8", "TYPE_INT16", "TYPE_INT32", "TYPE_INT64",
                      "TYPE_UINT8", "TYPE_UINT16", "TYPE_UINT32", "TYPE_UINT64", "TYPE_FP16",
                      "TYPE_FP32", "TYPE_FP64", "TYPE_STRING")

    def slow_inputs(self) -> dict:
        return {"X": np.ones((512, 512), np.float32)}

    def write_slow(self, repo: str) -> None:
        self.write(repo, "slow", self.models.slow(), """
platform: "onnxruntime_onnx"
instance_group [ { kind: KIND_CPU count: 2 } ]
parameters { key: "intra_op_thread_count" value: { string_value: "1" } }
""")

    def write_identities(self, repo: str) -> None:
        assert set(self.identity_types) == set(self.models.TYPES)
        self.write(repo, "identities", self.models.identities())  # auto-completed


class PyTorch(Framework):
    name = "pytorch"
    needs = ("torch",)
    runtime = "torch"
    backend = "pytorch"
    platform = "pytorch_libtorch"
    extra = "torch"
    filename = "model.pt"
    builders = "models_torch"
    # forward()'s argument names in, <name>__<index> out.
    add_sub_names = (("a", "b"), ("SUM__0", "DIFF__1"))
    scaled_names = ("x", "y__0")
    missing_file_text = "unable to find the TorchScript model file"
    unreadable_file_texts = ("failed to load model 'bad'",)
    identity_types = ("TYPE_BOOL", "TYPE_UINT8", "TYPE_INT8", "TYPE_INT16", "TYPE_INT32",
                      "TYPE_INT64", "TYPE_FP16", "TYPE_FP32", "TYPE_FP64", "TYPE_STRING")
    identity_shape = (5,)  # strings are a List[str]: one dimension, no batch
    slow_output = "y__0"

    def output(self, name: str, index: int) -> str:
        return f"{name}__{index}"

    def add_sub(self) -> Any:
        return self.models.script(self.models.AddSub())

    def scaled(self, scale: float) -> Any:
        import torch

        return self.models.trace(self.models.Scale(scale), torch.ones(1, 4))

    def slow_inputs(self) -> dict:
        return {"x": np.ones((384, 384), np.float32)}

    def write_slow(self, repo: str) -> None:
        self.write(repo, "slow", self.models.script(self.models.Slow()), """
backend: "pytorch"
input [ { name: "x" data_type: TYPE_FP32 dims: [ -1, -1 ] } ]
output [ { name: "y__0" data_type: TYPE_FP32 dims: [ -1, -1 ] } ]
instance_group [ { kind: KIND_CPU count: 2 } ]
""")

    def write_identities(self, repo: str) -> None:
        assert self.identity_types == tuple(self.models.TYPES) + ("TYPE_STRING",)

        def listed(prefix: str, outputs: bool) -> str:
            return ", ".join(
                f'{{ name: "{self.output(prefix + t[5:], i) if outputs else prefix + t[5:]}" '
                f'data_type: {t} dims: [ -1 ] }}' for i, t in enumerate(self.identity_types))

        self.write(repo, "identities", self.models.script(self.models.Identities()),
                   f'backend: "pytorch"\ninput [ {listed("IN_", False)} ]\n'
                   f'output [ {listed("OUT_", True)} ]\n')


class OpenVino(Framework):
    name = "openvino"
    needs = ("onnx", "openvino")  # ONNX models, converted by OpenVINO
    runtime = "openvino"
    backend = "openvino"
    extra = "openvino"
    filename = "model.xml"
    builders = "models_openvino"
    # A model without a batch layout: no batching, the batch dimension its own.
    max_batch_size = 0
    dims = "[ -1, 4 ]"
    missing_file_text = "unable to find '{path}' for model 'bad'"
    unreadable_file_texts = ("OpenVINO could not read",)
    identity_types = ("TYPE_BOOL", "TYPE_INT8", "TYPE_INT16", "TYPE_INT32", "TYPE_INT64",
                      "TYPE_UINT8", "TYPE_UINT16", "TYPE_UINT32", "TYPE_UINT64", "TYPE_FP16",
                      "TYPE_FP32")  # not FP64 nor STRING: test_openvino.py

    def batched_add_sub_config(self) -> str:
        """At exactly max_batch_size rows unless padded (test_openvino.py)."""
        return self.config(*self.add_sub_names, extra=DYNAMIC_BATCHING + "\n" + padding(),
                           max_batch_size=8, dims="[ 4 ]")

    def slow_inputs(self) -> dict:
        return {"X": np.ones((1024, 1024), np.float32)}

    def write_slow(self, repo: str) -> None:
        self.write(repo, "slow", self.models.slow(), """
backend: "openvino"
instance_group [ { kind: KIND_CPU count: 2 } ]
parameters { key: "INFERENCE_NUM_THREADS" value: { string_value: "2" } }
parameters { key: "NUM_STREAMS" value: { string_value: "2" } }
""")

    def slow_answer(self, repo: str, inputs: dict) -> tuple[Any, float]:
        return openvino_answers(repo, "slow", inputs)["Y"], 1e-5

    def write_identities(self, repo: str) -> None:
        served = {t: self.models.onnx_models.TYPES[t] for t in self.identity_types}
        assert served == self.models.SERVED
        self.write(repo, "identities", self.models.identities(served),
                   identity_config(self.identity_types))


def padding(value: str = "YES") -> str:
    """OpenVINO's parameter that pads a smaller batch to max_batch_size."""
    return f'parameters {{ key: "ENABLE_BATCH_PADDING" value: {{ string_value: "{value}" }} }}'


def identity_config(types, dims: str = "[ -1 ]") -> str:
    """An OpenVINO identities configuration: batched to 4, padded."""
    def entries(prefix: str) -> str:
        return ", ".join(f'{{ name: "{prefix}_{t[5:]}" data_type: {t} dims: {dims} }}'
                         for t in types)
    return (f'backend: "openvino"\nmax_batch_size: 4\ninput [ {entries("IN")} ]\n'
            f'output [ {entries("OUT")} ]\n{padding()}\n')


def openvino_answers(repo: str, name: str, feed: dict) -> dict:
    """What OpenVINO itself answers for `feed` (the model file as it is)."""
    import openvino as ov

    compiled = ov.Core().compile_model(f"{repo}/{name}/1/model.xml", "CPU")
    return {k.get_any_name(): v for k, v in compiled(feed).items()}


FRAMEWORKS = {f.name: f for f in (OnnxRuntime(), PyTorch(), OpenVino())}


@pytest.fixture(scope="module", params=list(FRAMEWORKS))
def framework(request) -> Framework:
    """Each framework in turn (or the one an indirect parametrization names)."""
    chosen = FRAMEWORKS[request.param]
    for module in chosen.needs:
        pytest.importorskip(module)
    return chosen


@pytest.fixture(scope="module")
def server(repo):
    """A server on the test module's ``repo`` (each module makes its own),
    configurations completed from the models."""
    s = start_server(model_repository=repo, strict_model_config=False)
    yield s
    stop_within(s)


def add_sub_works(framework: Framework, model: tritonserver.Model, rows: int = 2) -> None:
    """The add_sub model answers A + B and A - B for `rows` rows."""
    (a_name, b_name), (sum_name, diff_name) = framework.add_sub_names
    a = np.arange(4 * rows, dtype=np.float32).reshape(rows, 4)
    b = np.full((rows, 4), 0.5, np.float32)
    out = next(model.infer(inputs={a_name: a, b_name: b})).outputs
    np.testing.assert_array_equal(np.from_dlpack(out[sum_name]), a + b)
    np.testing.assert_array_equal(np.from_dlpack(out[diff_name]), a - b)


def refused(s: tritonserver.Server, name: str,
            error: type = tritonserver.TritonError) -> str:
    """The load error's text (an `error`); the server stays live."""
    with pytest.raises(error) as caught:
        s.load(name)
    assert s.live()
    return str(caught.value)


def typed_values(types, shape: tuple[int, ...], seed: int = 7) -> dict:
    """IN_<T>: one value of `shape` for each config type."""
    rng = np.random.default_rng(seed)
    values = {}
    for config_type in types:
        if config_type == "TYPE_STRING":
            value = np.array(WORDS[:int(np.prod(shape))], dtype=object).reshape(shape)
        elif config_type == "TYPE_BOOL":
            value = rng.integers(0, 2, shape).astype(bool)
        else:
            value = (rng.random(shape) * 100).astype(numpy_type(config_type))
        values["IN_" + config_type[len("TYPE_"):]] = value
    return values


@pytest.fixture
def explicit(tmp_path):
    """An EXPLICIT-mode server over an empty repository (tmp_path/repo), not strict."""
    repo = tmp_path / "repo"
    repo.mkdir()
    s = start_server(model_repository=str(repo), model_control_mode=EXPLICIT,
                     strict_model_config=False)
    yield s, str(repo)
    stop_within(s)


def model_file(repo: str, name: str, framework: Framework) -> str:
    return os.path.join(repo, name, "1", framework.filename)
