"""Every value of the C enums we declare is exposed, with the same number."""

from __future__ import annotations

import os
import re

import tritonserver
from tritonserver._c import triton_bindings

HEADER = os.path.join(os.path.dirname(__file__), "..", "..", "third_party", "triton", "tritonserver.h")

# C enum typedef name -> key of the binding's table.
ENUMS = {
    "TRITONSERVER_DataType": "DataType", "TRITONSERVER_MemoryType": "MemoryType",
    "TRITONSERVER_ParameterType": "ParameterType",
    "TRITONSERVER_InstanceGroupKind": "InstanceGroupKind", "TRITONSERVER_LogLevel": "LogLevel",
    "TRITONSERVER_LogFormat": "LogFormat", "TRITONSERVER_Error_Code": "ErrorCode",
    "TRITONSERVER_MetricFormat": "MetricFormat", "TRITONSERVER_MetricKind": "MetricKind",
    "TRITONSERVER_RequestFlag": "RequestFlag",
    "TRITONSERVER_RequestReleaseFlag": "RequestReleaseFlag",
    "TRITONSERVER_ResponseCompleteFlag": "ResponseCompleteFlag",
    "TRITONSERVER_ModelBatchFlag": "ModelBatchFlag", "TRITONSERVER_ModelIndexFlag": "ModelIndexFlag",
    "TRITONSERVER_ModelTxnPropertyFlag": "ModelTxnPropertyFlag",
    "TRITONSERVER_ModelControlMode": "ModelControlMode", "TRITONSERVER_RateLimitMode": "RateLimitMode",
    "TRITONSERVER_InferenceTraceLevel": "InferenceTraceLevel",
    "TRITONSERVER_InferenceTraceActivity": "InferenceTraceActivity",
}


def c_enums() -> dict[str, dict[str, int]]:
    text = open(HEADER).read()
    out = {}
    for body, name in re.findall(r"typedef enum \w+ \{(.*?)\} (\w+);", text, re.S):
        out[name] = {k: int(v) for k, v in re.findall(r"(\w+) = (\d+)", body)}
    return out


def test_every_c_enum_value_is_in_the_tables():
    tables = triton_bindings.enum_tables()
    enums = c_enums()
    assert set(enums) == set(ENUMS), "a C enum is not mapped to a table"
    for c_name, table_name in ENUMS.items():
        assert sorted(enums[c_name].values()) == sorted(tables[table_name].values()), c_name


def test_public_enums_match_the_reference():
    assert tritonserver.ModelControlMode.NONE == 0
    assert tritonserver.ModelControlMode.POLL == 1
    assert tritonserver.ModelControlMode.EXPLICIT == 2
    assert tritonserver.MemoryType.CPU == 0 and tritonserver.MemoryType.GPU == 2
    assert tritonserver.DataType.BYTES == 13 and tritonserver.DataType.BF16 == 14


def test_every_error_code_has_a_class():
    from tritonserver._errors import _CLASS_BY_CODE

    assert set(_CLASS_BY_CODE) == set(triton_bindings.enum_tables()["ErrorCode"].values())
