"""Runs a python-backend ``TritonPythonModel`` as a PythonModel: one object
of it per instance (as the python backend's one stub per instance), with
the python backend's ``args`` for ``initialize``."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tritonserver._inprocess import pb_utils
from tritonserver._inprocess._model import ModelInstance, PythonModel

if TYPE_CHECKING:
    from tritonserver._inprocess._request import ModelRequest


class PbUtilsModel(PythonModel):
    def __init__(self, legacy_class: type):
        self._class = legacy_class

    def initialize_instance(self, instance: ModelInstance) -> None:
        legacy = self._class()
        setattr(instance, "_pb_model", legacy)  # not a declared attribute of ModelInstance
        if hasattr(legacy, "initialize"):
            legacy.initialize({
                "model_config": json.dumps(self.config),
                "model_instance_kind": instance.kind,
                "model_instance_name": instance.name,
                "model_instance_device_id": str(instance.device_id),
                "model_repository": self.repository_path,
                "model_version": str(self.version),
                "model_name": self.name,
            })

    def finalize_instance(self, instance: ModelInstance) -> None:
        legacy = getattr(instance, "_pb_model", None)
        if legacy is not None and hasattr(legacy, "finalize"):
            legacy.finalize()

    def execute(self, requests: list[ModelRequest]) -> Any:
        legacy = requests[0].instance._pb_model
        wrapped = [pb_utils.InferenceRequest._wrap(r) for r in requests]
        responses = legacy.execute(wrapped)
        if responses is None:
            return None
        return [None if r is None else pb_utils._to_model_response(r) for r in responses]
