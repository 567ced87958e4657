"""Data type tables: Triton DataType <-> numpy dtype <-> DLPack dtype, and the
names model configurations give data types ("TYPE_FP32")."""

from __future__ import annotations

from typing import Any

import numpy as np

from tritonserver._enums import DataType

# DLPack type codes (third_party/dlpack/dlpack.h).
DL_INT, DL_UINT, DL_FLOAT, DL_BFLOAT, DL_BOOL = 0, 1, 2, 4, 6
# DLPack device types.
DL_CPU, DL_CUDA, DL_CUDA_HOST = 1, 2, 3

# One row per fixed-size type: (DataType, numpy dtype or None, (code, bits)).
_ROWS = [
    (DataType.BOOL, np.dtype(np.bool_), (DL_BOOL, 8)),
    (DataType.UINT8, np.dtype(np.uint8), (DL_UINT, 8)),
    (DataType.UINT16, np.dtype(np.uint16), (DL_UINT, 16)),
    (DataType.UINT32, np.dtype(np.uint32), (DL_UINT, 32)),
    (DataType.UINT64, np.dtype(np.uint64), (DL_UINT, 64)),
    (DataType.INT8, np.dtype(np.int8), (DL_INT, 8)),
    (DataType.INT16, np.dtype(np.int16), (DL_INT, 16)),
    (DataType.INT32, np.dtype(np.int32), (DL_INT, 32)),
    (DataType.INT64, np.dtype(np.int64), (DL_INT, 64)),
    (DataType.FP16, np.dtype(np.float16), (DL_FLOAT, 16)),
    (DataType.FP32, np.dtype(np.float32), (DL_FLOAT, 32)),
    (DataType.FP64, np.dtype(np.float64), (DL_FLOAT, 64)),
    (DataType.BF16, None, (DL_BFLOAT, 16)),
]

_TO_NUMPY = {dt: npt for dt, npt, _ in _ROWS if npt is not None}
_FROM_NUMPY = {npt: dt for dt, npt, _ in _ROWS if npt is not None}
DLPACK_DTYPES: dict[DataType, tuple[int, int]] = {dt: dl for dt, _, dl in _ROWS}
_FROM_DLPACK = {dl: dt for dt, _, dl in _ROWS}
# Some producers describe bool as an unsigned byte of 8 bits; keep uint8.
_FROM_DLPACK[(DL_UINT, 1)] = DataType.BOOL



def from_config_name(name: str) -> DataType:
    """The DataType of a name as model configurations ("TYPE_FP32",
    "TYPE_STRING") and model metadata ("FP32", "BYTES") spell it; any case."""
    key = name.upper()
    if key.startswith("TYPE_"):
        key = key[len("TYPE_"):]
    if key == "STRING":
        key = "BYTES"
    member = DataType.__members__.get(key)
    if member is None or member == DataType.INVALID:
        raise _invalid(f"unknown data type {name!r}")
    return member


def to_config_name(data_type: DataType) -> str:
    """The model configuration's name of a DataType: "TYPE_FP32", and
    "TYPE_STRING" for BYTES."""
    return "TYPE_STRING" if data_type == DataType.BYTES else f"TYPE_{DataType(data_type).name}"


def data_type_by_dtype() -> dict[np.dtype[Any], int]:
    """{numpy dtype: int DataType} for the fixed-size types (native order)."""
    return {npt: int(dt) for npt, dt in _FROM_NUMPY.items()}


def to_numpy_dtype(data_type: DataType) -> np.dtype[Any]:
    if data_type == DataType.BYTES:
        return np.dtype(np.object_)
    try:
        return _TO_NUMPY[data_type]
    except KeyError:
        raise _unsupported(f"{DataType(data_type).name} has no numpy dtype") from None


def from_numpy_dtype(dtype: np.dtype[Any]) -> DataType:
    dtype = np.dtype(dtype)
    if dtype.kind in "OSU":
        return DataType.BYTES
    try:
        return _FROM_NUMPY[dtype.newbyteorder("=") if dtype.byteorder == ">" else dtype]
    except KeyError:
        raise _invalid(f"numpy dtype {dtype} has no Triton data type") from None


def to_dlpack_dtype(data_type: DataType) -> tuple[int, int]:
    try:
        return DLPACK_DTYPES[data_type]
    except KeyError:
        raise _unsupported(f"{DataType(data_type).name} tensors cannot be exported through DLPack") from None


def from_dlpack_dtype(code: int, bits: int, lanes: int) -> DataType:
    if lanes != 1 or (code, bits) not in _FROM_DLPACK:
        raise _unsupported(f"DLPack dtype (code={code}, bits={bits}, lanes={lanes}) has no Triton data type")
    return _FROM_DLPACK[(code, bits)]


def _unsupported(message: str) -> Exception:
    from tritonserver._errors import UnsupportedError

    return UnsupportedError(message)


def _invalid(message: str) -> Exception:
    from tritonserver._errors import InvalidArgumentError

    return InvalidArgumentError(message)
