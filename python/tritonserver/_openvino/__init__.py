"""The ``openvino`` backend's framework module: OpenVINO IR models
(``model.xml`` + ``model.bin``, or any file OpenVINO reads, such as ONNX)
of ordinary Triton model repositories, run on the CPU by OpenVINO's Python
API inside this process (tritonserver._framework says how framework
modules are used). _config reads the model's tensors and checks the
configuration, _compile turns the configuration's parameters into a
compiled model, _model runs it. Installed with
``pip install "tritonserver-embedded[openvino]"``; docs/openvino.md.
"""

from __future__ import annotations

from typing import Any

BACKEND = "openvino"


def __getattr__(attribute: str) -> Any:
    if attribute == "Model":  # imported when a model loads, not with the package
        from tritonserver._openvino._model import OpenVINOModel

        return OpenVINOModel
    raise AttributeError(attribute)
