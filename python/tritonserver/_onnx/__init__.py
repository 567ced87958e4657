"""The ``onnxruntime`` backend's framework module: ONNX models of ordinary
Triton model repositories, run by ONNX Runtime's Python API inside this
process (tritonserver._framework says how framework modules are used).
_config reads the model's tensors, _session makes ONNX Runtime sessions
from the configuration, _model runs them. Installed with
``pip install "tritonserver-embedded[onnx]"``; declared as backend ``onnxruntime`` in
the entry point group ``tritonserver.backends`` (pyproject.toml), pointing to ``Model``.
"""

from __future__ import annotations

from typing import Any

BACKEND = "onnxruntime"


def __getattr__(attribute: str) -> Any:
    if attribute == "Model":  # imported when a model loads, not with the package
        from tritonserver._onnx._model import OnnxRuntimeModel

        return OnnxRuntimeModel
    raise AttributeError(attribute)
