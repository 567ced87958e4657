"""An ensemble joining three runtimes in one request: a TorchScript model,
an ONNX model and a PythonModel, each step's output the next one's input,
the answer checked against the three computed directly."""

from __future__ import annotations

import os
import textwrap

import numpy as np
import pytest

from conftest import start_server, stats_when, stop_within

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from frameworks import models_onnx as onnx_models  # noqa: E402
from frameworks import models_torch as models  # noqa: E402

TORCH_CONFIG = """
backend: "pytorch"
max_batch_size: 8
input [ { name: "a" data_type: TYPE_FP32 dims: [ 4 ] },
        { name: "b" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "SUM__0" data_type: TYPE_FP32 dims: [ 4 ] },
         { name: "DIFF__1" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""
ONNX_CONFIG = """
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""
PYTHON_CONFIG = """
backend: "inprocess"
max_batch_size: 8
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""
PYTHON_MODEL = """
import numpy as np
from tritonserver import PythonModel


class Negate(PythonModel):
    def execute(self, requests):
        return [{"OUT": -np.asarray(r.inputs["IN"]) + 0.5} for r in requests]
"""
ENSEMBLE_CONFIG = """
platform: "ensemble"
max_batch_size: 8
input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] },
        { name: "B" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "RESULT" data_type: TYPE_FP32 dims: [ 4 ] },
         { name: "DIFF" data_type: TYPE_FP32 dims: [ 4 ] } ]
ensemble_scheduling { step [
  { model_name: "torch_add_sub" model_version: -1
    input_map { key: "a" value: "A" } input_map { key: "b" value: "B" }
    output_map { key: "SUM__0" value: "sum" } output_map { key: "DIFF__1" value: "DIFF" } },
  { model_name: "onnx_scaled" model_version: -1
    input_map { key: "X" value: "sum" } output_map { key: "Y" value: "scaled" } },
  { model_name: "python_negate" model_version: -1
    input_map { key: "IN" value: "scaled" } output_map { key: "OUT" value: "RESULT" } }
] }
"""


def test_ensemble_of_torch_onnx_and_python(tmp_path):
    repo = str(tmp_path)
    scripted = models.script(models.AddSub())
    models.write(repo, "torch_add_sub", scripted, TORCH_CONFIG)
    onnx_models.write(repo, "onnx_scaled", onnx_models.scaled(3.0), ONNX_CONFIG)
    python_dir = os.path.join(repo, "python_negate", "1")
    os.makedirs(python_dir)
    with open(os.path.join(python_dir, "model.py"), "w") as f:
        f.write(textwrap.dedent(PYTHON_MODEL))
    with open(os.path.join(repo, "python_negate", "config.pbtxt"), "w") as f:
        f.write(PYTHON_CONFIG)
    os.makedirs(os.path.join(repo, "pipeline", "1"))
    with open(os.path.join(repo, "pipeline", "config.pbtxt"), "w") as f:
        f.write(ENSEMBLE_CONFIG)

    s = start_server(model_repository=repo)
    try:
        rng = np.random.default_rng(5)
        for _ in range(3):
            a, b = (rng.standard_normal((1, 4)).astype(np.float32) for _ in range(2))
            (response,) = list(s.model("pipeline").infer(inputs={"A": a, "B": b}))
            with torch.inference_mode():
                total, diff = (t.numpy() for t in scripted(torch.from_numpy(a),
                                                           torch.from_numpy(b)))
            expected = -(total * 3.0) + 0.5
            np.testing.assert_allclose(np.from_dlpack(response.outputs["RESULT"]), expected,
                                       rtol=1e-6)
            np.testing.assert_allclose(np.from_dlpack(response.outputs["DIFF"]), diff, rtol=1e-6)
        for name in ("torch_add_sub", "onnx_scaled", "python_negate"):
            # a step's statistics are recorded just after its response goes on
            stats = stats_when(s.model(name), lambda st: st["inference_count"] >= 3)
            assert stats["inference_count"] == 3, (name, stats["inference_count"])
    finally:
        stop_within(s)
