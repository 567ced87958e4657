"""Public enums, built from the binding's tables of the C enums.

Each value is written once, in csrc/bindings/enums.cc; a test checks that the
tables cover every value of the C header.
"""

from __future__ import annotations

import enum
from typing import Any

from tritonserver._c import triton_bindings as _bindings
from tritonserver._enum_names import named

_TABLES = _bindings.enum_tables()


def _make(name: str, flag: bool = False) -> Any:
    base = enum.IntFlag if flag else enum.IntEnum
    return named(base(name, _TABLES[name], module=__name__))


DataType = _make("DataType")
MemoryType = _make("MemoryType")
ParameterType = _make("ParameterType")
InstanceGroupKind = _make("InstanceGroupKind")
LogLevel = _make("LogLevel")
LogFormat = _make("LogFormat")
ErrorCode = _make("ErrorCode")
# JSON is not a C value: the 2.51 core formats Prometheus text only, and
# Server.metrics() converts that text (see _metrics.py). Its value is far
# from the C enum's so a later core's own formats cannot collide with it.
MetricFormat = named(enum.IntEnum("MetricFormat", {**_TABLES["MetricFormat"], "JSON": 1 << 16},
                                  module=__name__))
RequestFlag = _make("RequestFlag", flag=True)
ModelBatchFlag = _make("ModelBatchFlag", flag=True)
ModelIndexFlag = _make("ModelIndexFlag", flag=True)
ModelTxnPropertyFlag = _make("ModelTxnPropertyFlag", flag=True)
ModelControlMode = _make("ModelControlMode")
RateLimitMode = _make("RateLimitMode")

# int -> member, for hot paths (calling an enum class costs more).
DATA_TYPES = {int(m): m for m in DataType}
MEMORY_TYPES = {int(m): m for m in MemoryType}

RESPONSE_COMPLETE_FINAL: int = _TABLES["ResponseCompleteFlag"]["FINAL"]

__all__ = [
    "DataType",
    "MemoryType",
    "ParameterType",
    "InstanceGroupKind",
    "LogLevel",
    "LogFormat",
    "ErrorCode",
    "MetricFormat",
    "RequestFlag",
    "ModelBatchFlag",
    "ModelIndexFlag",
    "ModelTxnPropertyFlag",
    "ModelControlMode",
    "RateLimitMode",
]
