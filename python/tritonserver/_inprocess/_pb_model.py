"""Runs a python-backend ``TritonPythonModel`` as a PythonModel: one object
of it per instance (as the python backend's one stub per instance), with
the python backend's ``args`` for ``initialize``. Each hook runs for its
model (tritonserver._inprocess._pb_types.running_for: what get_model_dir
and BLS read), an ``async def execute`` included. A model's ``is_ready()``
is each of its instances' readiness check (tritonserver._inprocess._readiness)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Optional

from tritonserver._inprocess._model import ModelInstance, PythonModel
from tritonserver._inprocess._pb_bls import InferenceRequest, close_senders, returned_response
from tritonserver._inprocess._pb_types import (
    ModelContext,
    TritonModelException,
    cpu_only_inputs,
    model_response,
    running_for,
)
from tritonserver._inprocess._readiness import InstanceReadiness
from tritonserver._registries import add_readiness_check, remove_readiness_check

if TYPE_CHECKING:
    from tritonserver._inprocess._request import ModelRequest


def _responses(responses: Optional[list[Any]]) -> Optional[list[Any]]:
    if responses is None:
        return None
    return [None if r is None else model_response(r) for r in responses]


class PbUtilsModel(PythonModel):
    def __init__(self, legacy_class: type):
        self._class = legacy_class
        self._objects: dict[str, Any] = {}  # instance name -> its TritonPythonModel
        self._context: Optional[ModelContext] = None
        self._cpu_inputs: Optional[bool] = None  # FORCE_CPU_ONLY_INPUT_TENSORS, read once

    def _for_model(self) -> ModelContext:
        if self._context is None:
            filename = str(self.config.get("default_model_filename") or "model.py")
            folder = os.path.dirname(os.path.join(self.repository_path, str(self.version),
                                                  filename))
            self._context = ModelContext(self.name, folder, self.server_address,
                                         module_name=self._class.__module__)
        return self._context

    def _outside_execute(self) -> ModelContext:
        return dataclasses.replace(self._for_model(), bls=False)

    def initialize_instance(self, instance: ModelInstance) -> None:
        legacy = self._class()
        self._objects[instance.name] = legacy
        if hasattr(legacy, "initialize"):
            with running_for(self._outside_execute()):
                legacy.initialize({
                    "model_config": json.dumps(self.config),
                    "model_instance_kind": instance.kind,
                    "model_instance_name": instance.name,
                    "model_instance_device_id": str(instance.device_id),
                    "model_repository": self.repository_path,
                    "model_version": str(self.version),
                    "model_name": self.name,
                })
        if hasattr(legacy, "is_ready"):
            add_readiness_check(self.server_address, self.name, self.version, instance.name,
                                InstanceReadiness(self.name, self.version, instance.name,
                                                  instance, self._readiness_of(legacy)))

    def _readiness_of(self, legacy: Any) -> Callable[[], Any]:
        def is_ready() -> Any:
            with running_for(self._outside_execute()):
                return legacy.is_ready()

        return is_ready

    def finalize_instance(self, instance: ModelInstance) -> None:
        remove_readiness_check(self.server_address, self.name, self.version, instance.name)
        legacy = self._objects.pop(instance.name, None)
        if legacy is not None and hasattr(legacy, "finalize"):
            with running_for(self._outside_execute()):
                legacy.finalize()

    def execute(self, requests: list[ModelRequest]) -> Any:
        instance = requests[0].instance.name
        legacy = self._objects[instance]
        if self._cpu_inputs is None:
            self._cpu_inputs = cpu_only_inputs(self.config)
        wrapped = [InferenceRequest.of(r, self._cpu_inputs) for r in requests]
        try:
            with running_for(self._for_model()):
                responses = legacy.execute(wrapped)
        except BaseException:
            close_senders(wrapped)
            raise
        if asyncio.iscoroutine(responses):
            return self._converted(instance, wrapped, responses)
        return self._returned(instance, wrapped, responses)

    async def _converted(self, instance: str, wrapped: list[InferenceRequest],
                         coroutine: Coroutine[Any, Any, Any]) -> Optional[list[Any]]:
        try:
            with running_for(self._for_model()):
                responses = await coroutine
        except BaseException:
            close_senders(wrapped)
            raise
        return self._returned(instance, wrapped, responses)

    def _returned(self, instance: str, wrapped: list[InferenceRequest],
                  responses: Any) -> Optional[list[Any]]:
        """What execute returned, checked as the python backend checks it:
        a decoupled model returns None; a response returned for a request
        counts against its sender (one response in all)."""
        try:
            if responses is None:
                return None
            if bool(self.config.get("model_transaction_policy", {}).get("decoupled")):
                raise TritonModelException(
                    f"Python model '{instance}' is using the decoupled mode and the execute "
                    "function must return None.")
            if isinstance(responses, list) and len(responses) == len(wrapped):
                for request, response in zip(wrapped, responses):
                    if response is not None:
                        returned_response(request)
            return _responses(responses)
        except BaseException:
            close_senders(wrapped)
            raise
