"""Data types as Triton's pytorch backend maps them: configuration types
to torch dtypes (by attribute name, so that this module needs no torch),
and back. TYPE_STRING is a 1-D List[str], not a tensor; UINT16/32/64 and
BF16 are refused, as Triton refuses them."""

from __future__ import annotations

from typing import Any, Optional

from tritonserver._errors import InternalError

BACKEND = "pytorch"  # the backend's name, as configs give it

# TYPE_* -> torch dtype attribute name (TYPE_STRING: None, a List[str]).
TORCH_TYPE: dict[str, Optional[str]] = {
    "TYPE_BOOL": "bool", "TYPE_UINT8": "uint8", "TYPE_INT8": "int8", "TYPE_INT16": "int16",
    "TYPE_INT32": "int32", "TYPE_INT64": "int64", "TYPE_FP16": "float16",
    "TYPE_FP32": "float32", "TYPE_FP64": "float64", "TYPE_STRING": None,
}


def check_supported(model: str, kind: str, name: str, config_type: str) -> None:
    """`kind`: "input", "output", "input state" or "state" (Triton's words)."""
    if config_type not in TORCH_TYPE:
        raise InternalError(
            f"unsupported datatype {config_type} for {kind} '{name}' for model '{model}'")


def config_types(torch: Any) -> dict[Any, str]:
    """torch dtype -> TYPE_* (a dtype Triton lacks is absent)."""
    return {getattr(torch, attribute): config_type
            for config_type, attribute in TORCH_TYPE.items() if attribute is not None}
