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
        self._objects: dict[str, Any] = {}  # instance name -> its TritonPythonModel

    def initialize_instance(self, instance: ModelInstance) -> None:
        legacy = self._class()
        self._objects[instance.name] = legacy
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
        legacy = self._objects.pop(instance.name, None)
        if legacy is not None and hasattr(legacy, "finalize"):
            legacy.finalize()

    def execute(self, requests: list[ModelRequest]) -> Any:
        legacy = self._objects[requests[0].instance.name]
        wrapped = [pb_utils.wrapped_request(r) for r in requests]
        responses = legacy.execute(wrapped)
        if responses is None:
            return None
        return [None if r is None else pb_utils.model_response(r) for r in responses]
