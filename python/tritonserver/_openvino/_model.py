"""OpenVINOModel: one load of an OpenVINO model. The model is read, shaped
by its configuration and compiled once per load; each instance has its own
infer request (instance_group count N gives N, running in parallel:
OpenVINO releases the GIL while it infers). A batching model runs at
exactly max_batch_size rows, as in Triton: a smaller batch is padded with
zeros (ENABLE_BATCH_PADDING=yes) or refused."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from tritonserver._errors import InternalError, InvalidArgumentError
from tritonserver._framework._model import FrameworkModel
from tritonserver._framework._plugins import API_VERSION
from tritonserver._inprocess._model import ModelInstance
from tritonserver._openvino import _compile, _config


class OpenVINOModel(FrameworkModel):
    api_version = API_VERSION
    requires = ("openvino",)

    @classmethod
    def complete(cls, name: str, version: int, config: dict[str, Any], repository_path: str,
                 settings: dict[str, str]) -> Optional[dict[str, Any]]:
        """The configuration completed from the model (read, not compiled)."""
        ov = _config.openvino()
        path = _config.model_path(name, version, repository_path, config)
        return _config.complete(name, config, _config.read_model(ov.Core(), name, path),
                                settings.get("default-max-batch-size"))

    def load(self) -> None:
        """Everything that can refuse the model is checked here, once per
        load, before any instance exists."""
        for group in self.config.get("instance_group", []):
            if group.get("kind", "KIND_CPU") != "KIND_CPU":
                raise InvalidArgumentError(
                    f"unable to load model '{self.name}', Triton openVINO backend supports "
                    "only CPU device")
        ov = self._ov = _config.openvino()
        how = _compile.flags(self.parameters)
        properties = _compile.cpu_properties(self.parameters)
        core = ov.Core()
        extension = self.parameters.get("CPU_EXTENSION_PATH", "")
        if extension:
            try:
                core.add_extension(extension)
            except Exception as e:
                raise InvalidArgumentError(
                    f"model '{self.name}': loading custom CPU extensions from "
                    f"'{extension}': {e}") from None
        path = _config.model_path(self.name, self.version, self.repository_path, self.config)
        model = _compile.configure(ov, self.name, _config.read_model(core, self.name, path),
                                   self.config, how)
        self._max_batch = int(self.config.get("max_batch_size", 0))
        self._padding = how.batch_padding
        self._compiled = _compile.compile_model(
            core, self.name, model, properties,
            auto_batching=bool(self._max_batch and not how.skip_dynamic_batch))

    def open_instance(self, instance: ModelInstance) -> Any:
        return self._compiled.create_infer_request()

    def finalize(self) -> None:
        self._compiled = None

    def run(self, runner: Any, names: list[str], feed: dict[str, Any]) -> list[Any]:
        rows = self._rows(feed)
        if rows is not None and rows < self._max_batch:
            feed = {name: _pad(value, self._max_batch) for name, value in feed.items()}
        # The request's own tensors, then a synchronous infer: a third of the
        # time of infer(dict) for a small model (which converts every input
        # and output through Python dictionaries). The outputs are views of
        # the request's buffers: the responses copy them before this
        # instance's next run.
        tensor = self._ov.Tensor
        for name, value in feed.items():
            shared = value.flags.writeable and value.flags.c_contiguous
            runner.set_tensor(name, tensor(value, shared_memory=shared))
        runner.infer()
        outputs = [runner.get_tensor(name).data for name in names]
        if rows is not None and rows < self._max_batch:
            outputs = [output[:rows] for output in outputs]
        return outputs

    def _rows(self, feed: dict[str, Any]) -> Any:
        """The batch's rows when it must be padded up to max_batch_size
        (None when it runs as it is); Triton's errors otherwise."""
        if not self._max_batch or not feed:
            return None
        rows = int(np.shape(next(iter(feed.values())))[0])
        if rows == self._max_batch:
            return None
        if rows > self._max_batch:
            raise InternalError(
                f"batch size {rows} for '{self.name}', max allowed is {self._max_batch}")
        if not self._padding:
            raise InternalError(
                f"expected requests with batch size '{self._max_batch}', got '{rows}'... this "
                "error can be avoided by setting 'ENABLE_BATCH_PADDING' parameter in model "
                "configuration to 'YES' at a performance cost.")
        return rows


def _pad(value: Any, rows: int) -> Any:
    """`value` with zero rows appended up to `rows`."""
    value = np.asarray(value)
    padding = np.zeros((rows - value.shape[0],) + value.shape[1:], value.dtype)
    return np.concatenate([value, padding])
