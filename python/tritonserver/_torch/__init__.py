"""The ``pytorch`` backend's framework module: TorchScript models
(``<version>/model.pt``) of ordinary Triton model repositories, run by
libtorch through torch's Python API inside this process
(tritonserver._framework says how framework modules are used). _io binds
configuration tensors to the model's forward() arguments and results,
_types maps data types, _model loads and runs. Installed with
``pip install "tritonserver-embedded[torch]"`` (docs/pytorch.md).
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from tritonserver._torch._types import BACKEND

__all__ = ["BACKEND", "complete"]


def complete(name: str, version: int, config: dict[str, Any], repository_path: str,
             settings: dict[str, str]) -> Optional[dict[str, Any]]:
    """Triton's pytorch backend completes nothing: a TorchScript module does
    not say its tensors' types and shapes. The configuration stays as it is."""
    logging.getLogger("tritonserver.pytorch").warning(
        "skipping model configuration auto-complete for '%s': not supported for pytorch "
        "backend", name)
    return None


def __getattr__(attribute: str) -> Any:
    if attribute == "Model":  # imported when a model loads, not with the package
        from tritonserver._torch._model import TorchModel

        return TorchModel
    raise AttributeError(attribute)
