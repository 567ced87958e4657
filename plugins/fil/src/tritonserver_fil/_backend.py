"""FilBackend: backend "fil" (Triton's FIL backend) on CPU, written on the
public plugin API (tritonserver.backend_api) alone."""

from __future__ import annotations

from typing import Any

import numpy as np

from tritonserver.backend_api import (
    API_VERSION,
    Backend,
    Instance,
    InvalidArgumentError,
    model_path,
)

from tritonserver_fil import _params

INPUT = "input__0"
OUTPUT = "output__0"
SHAP = "treeshap_output"


def _shape(entry: dict[str, Any], batching: bool) -> list[int]:
    """The shape FIL gives a tensor: its dims (or reshape), the batch first,
    every 1 removed (RAPIDS-Triton's squeeze_output, FIL's convention)."""
    dims = [int(d) for d in (entry.get("reshape") or {}).get("shape") or entry.get("dims", [])]
    if batching or not dims or dims[0] != -1:
        dims = [-1] + dims
    return [d for d in dims if d != 1]


class FilBackend(Backend):
    """Tree models of Triton FIL repositories: XGBoost (binary, JSON,
    UBJSON), LightGBM and Treelite checkpoints, predicted by Treelite's GTIL
    (or by the model's own library: parameter engine = native)."""

    api_version = "1.0"
    requires = ("treelite", "xgboost", "lightgbm")

    def load(self) -> None:
        from tritonserver_fil._forest import Forest

        params = _params.read(self.parameters)
        filename, what = _params.FORMATS[params.model_type]
        path = model_path(self.name, self.version, self.repository_path, self.config,
                          filename, f"{what} model")
        outputs = {e["name"]: e for e in self.config.get("output", [])}
        inputs = {e["name"]: e for e in self.config.get("input", [])}
        for entries, name, kind in ((inputs, INPUT, "input"), (outputs, OUTPUT, "output")):
            if name not in entries:
                raise InvalidArgumentError(
                    f"model '{self.name}': the fil backend needs an {kind} named '{name}' "
                    f"(has {', '.join(sorted(entries)) or 'none'})")
        for name, entry in list(inputs.items()) + list(outputs.items()):
            if entry.get("data_type") != "TYPE_FP32":
                raise InvalidArgumentError(
                    f"model '{self.name}': {name} is {entry.get('data_type')}; the fil backend's "
                    "inputs and outputs are TYPE_FP32")
        batching = int(self.config.get("max_batch_size", 0)) > 0
        self._shapes = {name: _shape(entry, batching) for name, entry in outputs.items()}
        per_row = int(np.prod([d for d in self._shapes[OUTPUT] if d != -1], dtype=np.int64))
        self._forest = Forest(path, params, per_row, SHAP in outputs)
        features = _shape(inputs[INPUT], batching)[1:]
        if features and features[-1] != -1 and features[-1] != self._forest.num_feature:
            raise InvalidArgumentError(
                f"model '{self.name}': {INPUT} has {features[-1]} features per row, the model "
                f"{self._forest.num_feature}")
        if SHAP in outputs:
            per_row = int(np.prod([d for d in self._shapes[SHAP] if d != -1], dtype=np.int64))
            wanted = (self._forest.num_feature + 1) * self._forest.num_class
            if per_row != wanted:
                raise InvalidArgumentError(
                    f"model '{self.name}': {SHAP} holds {per_row} values per row; the model's "
                    f"SHAP values are {wanted} ((features + 1) x classes)")

    def open_instance(self, instance: Instance) -> Any:
        return self._forest  # read-only: instances share it

    def run(self, runner: Any, names: list[str], feed: dict[str, Any]) -> list[Any]:
        x = np.ascontiguousarray(feed[INPUT], dtype=np.float32)
        rows = x.shape[0] if x.ndim > 1 else 1
        x = x.reshape(rows, -1)
        results = []
        for name in names:
            value = runner.outputs(x) if name == OUTPUT else runner.shap(x)
            shape = [rows] + [d for d in self._shapes[name][1:]]
            results.append(value.reshape(shape))
        return results
