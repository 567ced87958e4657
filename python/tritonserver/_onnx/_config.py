"""ONNX models' tensors as configurations name them; completion and checks
are the framework layer's (tritonserver._framework._config), with Triton's
onnxruntime backend's rules."""

from __future__ import annotations

from typing import Any

from tritonserver._errors import UnsupportedError
from tritonserver._framework._config import Completion, Tensor

# ONNX Runtime's tensor type strings <-> Triton's configuration types.
CONFIG_TYPE = {
    "tensor(bool)": "TYPE_BOOL", "tensor(uint8)": "TYPE_UINT8", "tensor(uint16)": "TYPE_UINT16",
    "tensor(uint32)": "TYPE_UINT32", "tensor(uint64)": "TYPE_UINT64", "tensor(int8)": "TYPE_INT8",
    "tensor(int16)": "TYPE_INT16", "tensor(int32)": "TYPE_INT32", "tensor(int64)": "TYPE_INT64",
    "tensor(float16)": "TYPE_FP16", "tensor(float)": "TYPE_FP32", "tensor(double)": "TYPE_FP64",
    "tensor(string)": "TYPE_STRING",
}
# Triton's backend: default-max-batch-size 4; entries filled one by one; a
# model that cannot batch with a max_batch_size fails.
COMPLETION = Completion("onnxruntime", default_max_batch_size=4)


def model_tensors(name: str, session: Any) -> tuple[list[Tensor], list[Tensor]]:
    """The model's inputs (initializers that may be overridden excluded) and outputs."""

    def read(args: Any) -> list[Tensor]:
        tensors = []
        for arg in args:
            config_type = CONFIG_TYPE.get(arg.type)
            if config_type is None:
                raise UnsupportedError(
                    f"model '{name}': '{arg.name}' is of type {arg.type}, which Triton's "
                    "ONNX Runtime backend does not support (tensors of bool, integers, "
                    "float16/32/64 and strings)" + _type_hint(arg.type))
            dims = [d if isinstance(d, int) and d >= 0 else -1 for d in arg.shape]
            tensors.append(Tensor(arg.name, config_type, dims))
        return tensors

    return read(session.get_inputs()), read(session.get_outputs())


def defaulted_inputs(name: str, session: Any) -> list[Tensor]:
    """Initializers a request may override: the inputs a configuration may
    declare optional (a request without one runs on the model's value)."""
    return [Tensor(arg.name, CONFIG_TYPE.get(arg.type, "TYPE_INVALID"),
                   [d if isinstance(d, int) and d >= 0 else -1 for d in arg.shape])
            for arg in session.get_overridable_initializers()]


def _type_hint(onnx_type: str) -> str:
    if onnx_type.startswith("seq(map("):
        # The default output of classifiers exported by skl2onnx and onnxmltools.
        return (". A sequence of maps is the ZipMap output of a classifier exported by "
                "skl2onnx or onnxmltools; export it without ZipMap to get the probabilities "
                "as a tensor: skl2onnx.to_onnx(model, X, options={\"zipmap\": False}) (also "
                "for LightGBM and XGBoost models converted through skl2onnx), or "
                "onnxmltools.convert_lightgbm(..., zipmap=False) (docs/onnx.md)")
    return ""


def batchable(inputs: list[Tensor], outputs: list[Tensor]) -> bool:
    """Triton's onnxruntime backend batches a model when every input and
    output has a free first dimension."""
    return all(len(t.dims) >= 1 and t.dims[0] == -1 for t in inputs + outputs)
