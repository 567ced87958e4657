"""The ``onnxruntime`` backend's framework module: ONNX models of ordinary
Triton model repositories, run by ONNX Runtime's Python API inside this
process (tritonserver._framework says how framework modules are used).
_config reads the model's tensors, _session makes ONNX Runtime sessions
from the configuration, _model runs them. Installed with
``pip install "tritonserver-embedded[onnx]"``.
"""

from __future__ import annotations

from typing import Any, Optional

BACKEND = "onnxruntime"


def complete(name: str, version: int, config: dict[str, Any], repository_path: str,
             settings: dict[str, str]) -> Optional[dict[str, Any]]:
    """The configuration completed from the model (a CPU session reads it)."""
    from tritonserver._framework import _config as _checks
    from tritonserver._onnx import _config, _session

    ort = _session.onnxruntime()
    path = _session.model_path(name, version, repository_path, config)
    session = _session.open_session(ort, name, path, ort.SessionOptions(),
                                    ["CPUExecutionProvider"])
    inputs, outputs = _config.model_tensors(name, session)
    return _checks.complete(name, _config.COMPLETION, config, inputs, outputs,
                            _config.batchable(inputs, outputs),
                            settings.get("default-max-batch-size"))


def __getattr__(attribute: str) -> Any:
    if attribute == "Model":  # imported when a model loads, not with the package
        from tritonserver._onnx._model import OnnxRuntimeModel

        return OnnxRuntimeModel
    raise AttributeError(attribute)
