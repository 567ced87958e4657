"""The ``pytorch`` backend's framework module: TorchScript models
(``<version>/model.pt``) of ordinary Triton model repositories, run by
libtorch through torch's Python API inside this process
(tritonserver._framework says how framework modules are used). _io binds
configuration tensors to the model's forward() arguments and results,
_types maps data types, _model loads and runs. Installed with
``pip install "tritonserver-embedded[torch]"`` (docs/pytorch.md).
"""

from __future__ import annotations

from typing import Any

from tritonserver._torch._types import BACKEND

__all__ = ["BACKEND"]


def __getattr__(attribute: str) -> Any:
    if attribute == "Model":  # imported when a model loads, not with the package
        from tritonserver._torch._model import TorchModel

        return TorchModel
    raise AttributeError(attribute)
