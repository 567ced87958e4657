"""Static view of the enums _enums.py builds from the binding's tables,
for type checkers (tests/binding/test_stubs.py checks it against the runtime)."""

import enum

class DataType(enum.IntEnum):
    INVALID = 0
    BOOL = 1
    UINT8 = 2
    UINT16 = 3
    UINT32 = 4
    UINT64 = 5
    INT8 = 6
    INT16 = 7
    INT32 = 8
    INT64 = 9
    FP16 = 10
    FP32 = 11
    FP64 = 12
    BYTES = 13
    BF16 = 14

class MemoryType(enum.IntEnum):
    CPU = 0
    CPU_PINNED = 1
    GPU = 2

class ParameterType(enum.IntEnum):
    STRING = 0
    INT = 1
    BOOL = 2
    DOUBLE = 3
    BYTES = 4

class InstanceGroupKind(enum.IntEnum):
    AUTO = 0
    CPU = 1
    GPU = 2
    MODEL = 3

class LogLevel(enum.IntEnum):
    INFO = 0
    WARN = 1
    ERROR = 2
    VERBOSE = 3

class LogFormat(enum.IntEnum):
    DEFAULT = 0
    ISO8601 = 1

class ErrorCode(enum.IntEnum):
    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7

class MetricFormat(enum.IntEnum):
    PROMETHEUS = 0
    JSON = 65536

class RequestFlag(enum.IntFlag):
    SEQUENCE_START = 1
    SEQUENCE_END = 2

class ModelBatchFlag(enum.IntFlag):
    UNKNOWN = 1
    FIRST_DIM = 2

class ModelIndexFlag(enum.IntFlag):
    READY = 1

class ModelTxnPropertyFlag(enum.IntFlag):
    ONE_TO_ONE = 1
    DECOUPLED = 2

class ModelControlMode(enum.IntEnum):
    NONE = 0
    POLL = 1
    EXPLICIT = 2

class RateLimitMode(enum.IntEnum):
    OFF = 0
    EXEC_COUNT = 1

DATA_TYPES: dict[int, DataType]
MEMORY_TYPES: dict[int, MemoryType]
RESPONSE_COMPLETE_FINAL: int

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
