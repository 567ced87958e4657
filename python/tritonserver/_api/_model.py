"""``tritonserver._api._model``: aliases (see tritonserver._api)."""

from tritonserver._enums import ModelBatchFlag, ModelTxnPropertyFlag
from tritonserver._model import Model

__all__ = ["Model", "ModelBatchFlag", "ModelTxnPropertyFlag"]
