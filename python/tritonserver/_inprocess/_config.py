"""The model configuration of a registered Python model, and its
``config.pbtxt`` text (protobuf text format)."""

from __future__ import annotations

import json
from typing import Any, Optional, Union

import numpy as np

from tritonserver import _datatypes as dt
from tritonserver._enums import DataType
from tritonserver._errors import InvalidArgumentError

BACKEND = "inprocess"
# Fields whose values are protobuf enum names, written without quotes.
_ENUM_FIELDS = {"data_type", "kind", "timeout_action", "format"}
# Map fields: written as repeated { key: ... value: ... } entries.
_MAP_FIELDS = {"parameters", "input_map", "output_map", "metric_tags", "cc_model_filenames"}


def type_name(data_type: Any) -> str:
    """``TYPE_FP32`` and the like, from a DataType, a numpy dtype, a Python
    type or a name ("FP32", "TYPE_FP32", "BYTES", "STRING")."""
    if isinstance(data_type, DataType):
        found = data_type
    elif isinstance(data_type, str):
        found = dt.from_config_name(data_type)
    elif data_type in (bytes, str, object):
        found = DataType.BYTES
    else:
        try:
            found = dt.from_numpy_dtype(np.dtype(data_type))
        except TypeError:
            raise InvalidArgumentError(f"unknown data type {data_type!r}") from None
    return dt.to_config_name(found)


def _tensors(kind: str, specs: Any) -> list[dict[str, Any]]:
    """Inputs or outputs: {name: (dtype, dims)} or {name: {"data_type":..., "dims":...}},
    or a list of dicts with a "name"."""
    if isinstance(specs, dict):
        items = []
        for name, spec in specs.items():
            if isinstance(spec, dict):
                items.append({"name": name, **spec})
            elif isinstance(spec, (tuple, list)) and len(spec) == 2:
                items.append({"name": name, "data_type": spec[0], "dims": spec[1]})
            else:
                raise InvalidArgumentError(
                    f"{kind} {name!r}: give (data_type, dims) or a dict, not {spec!r}")
    elif isinstance(specs, (list, tuple)):
        items = [dict(s) for s in specs]
    else:
        raise InvalidArgumentError(f"{kind}: give a dict of name to (data_type, dims)")
    out = []
    for item in items:
        if not isinstance(item.get("name"), str) or "data_type" not in item or "dims" not in item:
            raise InvalidArgumentError(f"{kind}: each needs a name, a data_type and dims")
        dims = item["dims"]
        dims = [dims] if isinstance(dims, int) else list(dims)
        if not all(isinstance(d, (int, np.integer)) and d >= -1 for d in dims):
            raise InvalidArgumentError(f"{kind} {item['name']!r}: dims are ints (-1: any)")
        out.append({**item, "data_type": type_name(item["data_type"]),
                    "dims": [int(d) for d in dims]})
    return out


def model_config(name: str, python_model: str, *, inputs: Any, outputs: Any,
                 max_batch_size: int = 0, dynamic_batching: Union[bool, dict[str, Any]] = False,
                 instance_count: int = 1, decoupled: bool = False,
                 sequence_batching: Union[bool, dict[str, Any], None] = None,
                 parameters: Optional[dict[str, str]] = None,
                 config: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """The configuration (as the core's JSON) of a registered model."""
    if not isinstance(max_batch_size, int) or max_batch_size < 0:
        raise InvalidArgumentError("max_batch_size must be an int >= 0")
    if not isinstance(instance_count, int) or instance_count < 1:
        raise InvalidArgumentError("instance_count must be an int >= 1")
    params = {"python_model": {"string_value": python_model}}
    for key, value in (parameters or {}).items():
        params[str(key)] = {"string_value": str(value)}
    cfg: dict[str, Any] = {
        "name": name,
        "backend": BACKEND,
        "max_batch_size": max_batch_size,
        "input": _tensors("inputs", inputs),
        "output": _tensors("outputs", outputs),
        "instance_group": [{"kind": "KIND_CPU", "count": instance_count}],
        "parameters": params,
    }
    if dynamic_batching:
        if max_batch_size == 0:
            raise InvalidArgumentError("dynamic_batching needs max_batch_size > 0")
        cfg["dynamic_batching"] = dynamic_batching if isinstance(dynamic_batching, dict) else {}
    if sequence_batching:
        cfg["sequence_batching"] = sequence_batching if isinstance(sequence_batching, dict) else {}
    if decoupled:
        cfg["model_transaction_policy"] = {"decoupled": True}
    for key, value in (config or {}).items():
        if key in ("name", "backend"):
            raise InvalidArgumentError(f"config may not set {key!r}")
        cfg[key] = value
    return cfg


def to_pbtxt(message: dict[str, Any], indent: str = "") -> str:
    """Protobuf text format for a configuration dict."""
    lines = []
    for key, value in message.items():
        if key in _MAP_FIELDS and isinstance(value, dict):
            for k, v in value.items():
                inner = (f"{{\n{to_pbtxt(v, indent + '    ')}{indent}  }}" if isinstance(v, dict)
                         else _scalar("", v))
                sep = " " if isinstance(v, dict) else ": "
                lines.append(f"{indent}{key} {{\n{indent}  key: {json.dumps(str(k))}\n"
                             f"{indent}  value{sep}{inner}\n{indent}}}")
        elif isinstance(value, dict):
            lines.append(f"{indent}{key} {{\n{to_pbtxt(value, indent + '  ')}{indent}}}")
        elif isinstance(value, (list, tuple)):
            if value and all(isinstance(v, dict) for v in value):
                for v in value:
                    lines.append(f"{indent}{key} {{\n{to_pbtxt(v, indent + '  ')}{indent}}}")
            else:
                lines.append(f"{indent}{key}: [" + ", ".join(_scalar(key, v) for v in value) + "]")
        else:
            lines.append(f"{indent}{key}: {_scalar(key, value)}")
    return "".join(line + "\n" for line in lines)


def _scalar(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, np.integer, np.floating)):
        return str(value)
    if isinstance(value, str) and key in _ENUM_FIELDS:
        return value
    return json.dumps(str(value))
