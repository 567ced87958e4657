"""The framework backends: models of ordinary Triton repositories in ONNX
(``onnxruntime``), TorchScript (``pytorch``) and OpenVINO IR (``openvino``),
run by the framework's Python API inside this process.

Each backend library (csrc/backends/framework) forwards to the inprocess
backend, whose dispatch hands a model whose configuration names one of
these backends to its framework module. A framework module defines:

- ``complete(name, version, config, repository_path, settings)``: the
  configuration completed from the model, or None (only called when the
  server allows completion);
- ``Model``: a subclass of ``_framework._model.FrameworkModel``.

What they share lives here: ``_config`` (completion and checks with
Triton's texts), ``_batch`` (batches, batch inputs, ragged inputs, sequence
states), ``_params`` (the runtime import, the model file, parameters).
docs/backends.md says how to add a framework.
"""

from __future__ import annotations

import importlib
from typing import Any, Optional

# backend name -> the module that serves it
FRAMEWORKS = {
    "onnxruntime": "tritonserver._onnx",
    "pytorch": "tritonserver._torch",
    "openvino": "tritonserver._openvino",
}


def framework(backend: Optional[str]) -> Optional[Any]:
    """The module serving `backend`, or None for other backends."""
    module = FRAMEWORKS.get(backend or "")
    return None if module is None else importlib.import_module(module)
