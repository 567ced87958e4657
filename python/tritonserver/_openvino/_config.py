"""OpenVINO models' tensors as configurations name them, and the rules of
Triton's openvino backend for completing and checking a configuration: a
model batches when every input and output has a layout with a batch ('N')
dimension; inputs and outputs are filled only as whole lists; the shapes
are compared the way the backend compares them (its texts)."""

from __future__ import annotations

import os
from typing import Any, Optional

from tritonserver._errors import InternalError, InvalidArgumentError, NotFoundError
from tritonserver._framework import _config as _checks
from tritonserver._framework._config import Completion, Tensor
from tritonserver._framework._params import runtime

DEFAULT_FILENAME = "model.xml"

# OpenVINO element type names <-> Triton's configuration types (what the
# backend maps; f64, bf16, strings and the sub-byte types are not).
CONFIG_TYPE = {
    "boolean": "TYPE_BOOL", "u8": "TYPE_UINT8", "u16": "TYPE_UINT16", "u32": "TYPE_UINT32",
    "u64": "TYPE_UINT64", "i8": "TYPE_INT8", "i16": "TYPE_INT16", "i32": "TYPE_INT32",
    "i64": "TYPE_INT64", "f16": "TYPE_FP16", "f32": "TYPE_FP32",
}
ELEMENT = {config_type: element for element, config_type in CONFIG_TYPE.items()}

# Triton's backend: default-max-batch-size 0 but at least 1 for a batching
# model; only whole empty lists filled; max_batch_size on a model without
# batch layouts only warned about; batching completed even when both lists
# are given.
COMPLETION = Completion("openvino", default_max_batch_size=0, at_least_one=True,
                        per_entry=False, refuse_unbatchable=False, batching_when_listed=True)


def openvino() -> Any:
    """The openvino module, or UnavailableError naming the extra."""
    return runtime("openvino", "openvino", "openvino")


def model_path(name: str, version: int, repository_path: str, config: dict[str, Any]) -> str:
    """<version>/<default_model_filename or model.xml> (a file, or a folder
    OpenVINO reads, such as a TensorFlow SavedModel); Triton's text when it
    is missing."""
    filename = config.get("default_model_filename") or DEFAULT_FILENAME
    path = os.path.join(repository_path, str(version), filename)
    if not os.path.exists(path):
        raise NotFoundError(f"unable to find '{path}' for model '{name}'")
    return path


def read_model(core: Any, name: str, path: str) -> Any:
    try:
        return core.read_model(path)
    except Exception as e:  # OpenVINO's own exception types
        raise InvalidArgumentError(
            f"model '{name}': OpenVINO could not read '{path}': {e}") from None


def config_type(port: Any) -> str:
    """The configuration type of a model input or output (TYPE_INVALID for
    the types the backend does not map, as Triton's completion writes it)."""
    return CONFIG_TYPE.get(port.get_element_type().get_type_name(), "TYPE_INVALID")


def signed_shape(shape: Any) -> list[int]:
    """A PartialShape as dims, -1 where dynamic."""
    return [d.get_length() if d.is_static else -1 for d in shape]


def model_tensors(model: Any) -> tuple[list[Tensor], list[Tensor]]:
    """The inputs and outputs as Triton's completion reads them: every dim
    -1 when the shape is not fully static."""

    def read(ports: Any) -> list[Tensor]:
        tensors = []
        for port in ports:
            shape = port.get_partial_shape()
            dims = signed_shape(shape) if shape.is_static else [-1] * len(shape)
            tensors.append(Tensor(port.get_any_name(), config_type(port), dims))
        return tensors

    return read(model.inputs), read(model.outputs)


def batchable(model: Any) -> bool:
    """Every input and output has a layout with a batch dimension."""
    layouts = openvino().layout_helpers
    return all(layouts.get_layout(port).has_name("N")
               for port in list(model.inputs) + list(model.outputs))


def complete(name: str, config: dict[str, Any], model: Any,
             default_max_batch_size: Optional[str]) -> Optional[dict[str, Any]]:
    """Triton's openvino completion: max_batch_size (and dynamic_batching)
    from the layouts even when the inputs and outputs are listed; each empty
    list filled from the model."""
    inputs, outputs = model_tensors(model)
    return _checks.complete(name, COMPLETION, config, inputs, outputs, batchable(model),
                            default_max_batch_size)


def element(name: str, kind: str, tensor: str, declared: str) -> str:
    """The OpenVINO element type of a configuration type (Triton's text
    for the types the backend cannot serve)."""
    found = ELEMENT.get(declared)
    if found is None:
        raise InternalError(
            f"unsupported datatype {declared} for {kind} '{tensor}' for model '{name}'")
    return found


def check_name(name: str, kind: str, tensor: str, names: list[str]) -> None:
    if tensor not in names:
        raise _checks.unexpected(name, kind, tensor, names)


def check_dims(name: str, tensor: str, shape: Any, dims: list[int], max_batch: int,
               exact: bool) -> None:
    """Triton's CompareDimsSupported: with batching the first dim is the
    batch (compared only when `exact`, with max_batch_size); a -1 of the
    configuration accepts any model dim."""
    model_dims = list(shape)
    model_text = _text(signed_shape(shape))
    if max_batch > 0:
        if not model_dims:
            raise InvalidArgumentError(
                f"model '{name}', tensor '{tensor}': for the model to support batching the "
                "shape should have at least 1 dimension")
        full = [max_batch] + dims
        agree = len(model_dims) == len(full) and all(
            _matches(m, c) for i, (m, c) in enumerate(zip(model_dims, full))
            if exact or (i != 0 and c != -1))
        if not agree:
            raise InvalidArgumentError(
                f"model '{name}', tensor '{tensor}': the model expects {len(model_dims)} "
                f"dimensions (shape {model_text}) but the model configuration specifies "
                f"{len(full)} dimensions (an initial batch dimension because max_batch_size "
                f"> 0 followed by the explicit tensor shape, making complete shape "
                f"{_text(full)})")
        return
    agree = len(model_dims) == len(dims) and all(
        _matches(m, c) for m, c in zip(model_dims, dims))
    if not agree:
        raise InvalidArgumentError(
            f"model '{name}', tensor '{tensor}': the model expects {len(model_dims)} dimensions "
            f"(shape {model_text}) but the model configuration specifies {len(dims)} "
            f"dimensions (shape {_text(dims)})")


def _matches(dim: Any, config_dim: int) -> bool:
    if config_dim == -1:
        # Triton's backend refuses -1 against a static model dim, which makes
        # its own completion of a partly dynamic shape ([?,4] -> [-1,-1])
        # fail this check; here -1 accepts any dim.
        return True
    if dim.is_static:
        return bool(dim.get_length() == config_dim)
    if dim.get_max_length() < 0:  # no upper bound
        return True
    return bool(dim.get_min_length() < config_dim < dim.get_max_length())


def _text(dims: list[int]) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"
