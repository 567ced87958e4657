"""OnnxRuntimeModel: one load of an ONNX model. One ONNX Runtime session per
instance (instance_group count N gives N sessions, running in parallel:
ONNX Runtime releases the GIL while it runs); batches, sequences and
requested outputs are the framework layer's (tritonserver._framework)."""

from __future__ import annotations

from typing import Any, Optional

from tritonserver._framework import _config as _checks
from tritonserver._framework._model import FrameworkModel
from tritonserver._framework._params import text_inputs
from tritonserver._framework._plugins import API_VERSION
from tritonserver._inprocess._model import ModelInstance
from tritonserver._onnx import _config, _session


class OnnxRuntimeModel(FrameworkModel):
    api_version = API_VERSION
    requires = ("onnxruntime",)

    @classmethod
    def complete(cls, name: str, version: int, config: dict[str, Any], repository_path: str,
                 settings: dict[str, str]) -> Optional[dict[str, Any]]:
        """The configuration completed from the model (a CPU session reads it)."""
        ort = _session.onnxruntime()
        path = _session.model_path(name, version, repository_path, config)
        session = _session.open_session(ort, name, path, ort.SessionOptions(),
                                        ["CPUExecutionProvider"])
        inputs, outputs = _config.model_tensors(name, session)
        return _checks.complete(name, _config.COMPLETION, config, inputs, outputs,
                                _config.batchable(inputs, outputs),
                                settings.get("default-max-batch-size"))

    def load(self) -> None:
        """Everything that can refuse the model is checked here, once per
        load, before any instance exists (a load that fails in an instance
        leaves the core 2.51 more work to undo)."""
        self._ort = _session.onnxruntime()
        self._path = _session.model_path(self.name, self.version, self.repository_path,
                                          self.config)
        self._options = _session.session_options(self._ort, self.config, self.parameters)
        self.prepare = text_inputs(self.config, "ONNX")
        kinds = {g.get("kind", "KIND_CPU") for g in self.config.get("instance_group", [])}
        self._providers = {kind: _session.providers(self._ort, self.name, self.config, kind)
                           for kind in kinds | {"KIND_CPU"}}
        first = sorted(kinds)[0] if kinds else "KIND_CPU"
        session = _session.open_session(self._ort, self.name, self._path, self._options,
                                        self._providers[first])
        _checks.check(self.name, self.config, *_config.model_tensors(self.name, session),
                      defaulted=tuple(_config.defaulted_inputs(self.name, session)))
        self._spare: Optional[tuple[str, Any]] = (first, session)  # for the first instance

    def open_instance(self, instance: ModelInstance) -> Any:
        kind = instance.kind if instance.kind.startswith("KIND_") else f"KIND_{instance.kind}"
        spare, self._spare = self._spare, None
        if spare is not None and spare[0] == kind and instance.device_id == 0:
            session = spare[1]
        else:
            chosen = self._providers.get(kind) or self._providers["KIND_CPU"]
            session = _session.open_session(self._ort, self.name, self._path, self._options,
                                            chosen, instance.device_id)
        return (session, _session.run_options(self._ort, self.parameters))

    def finalize(self) -> None:
        self._spare = None  # an instance that was never made leaves its session here

    def run(self, runner: Any, names: list[str], feed: dict[str, Any]) -> list[Any]:
        session, options = runner
        return session.run(names, feed, options)  # type: ignore[no-any-return]

