"""``triton_python_backend_utils`` for python-backend models run in-process.

A ``model.py`` written for Triton's python backend imports this module
under that name (``import triton_python_backend_utils as pb_utils``) when
its model folder's config says ``backend: "inprocess"``. What it covers,
and what it does not, is listed in docs/inprocess.md.
"""

from __future__ import annotations

import enum
import json
import logging
import os
import struct
import sys
from typing import Any, Optional

import numpy as np

from tritonserver import _datatypes as dt
from tritonserver._enums import DataType
from tritonserver._inprocess import _server_log
from tritonserver._inprocess._pb_bls import (
    TRITONSERVER_MEMORY_CPU,
    TRITONSERVER_MEMORY_GPU,
    TRITONSERVER_REQUEST_RELEASE_ALL,
    TRITONSERVER_REQUEST_RELEASE_RESCHEDULE,
    TRITONSERVER_RESPONSE_COMPLETE_FINAL,
    InferenceRequest,
    InferenceResponseSender,
    InferenceTrace,
    PreferredMemory,
    ResponseIterator,
    is_model_ready,
    load_model,
    unload_model,
)
from tritonserver._inprocess._pb_metrics import Metric, MetricFamily, MetricKind
from tritonserver._inprocess._pb_types import (
    InferenceResponse,
    Tensor,
    TritonError,
    TritonModelException,
    current_model,
    numpy_to_triton_type,
    triton_string_to_numpy,
    triton_to_numpy_type,
)

COUNTER, GAUGE, HISTOGRAM = MetricKind.COUNTER, MetricKind.GAUGE, MetricKind.HISTOGRAM
TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2

# The configuration's type names and the numpy types the python backend
# gives for them (BF16 has none).
TRITON_STRING_TO_NUMPY = {
    "TYPE_BOOL": bool,
    "TYPE_UINT8": np.uint8,
    "TYPE_UINT16": np.uint16,
    "TYPE_UINT32": np.uint32,
    "TYPE_UINT64": np.uint64,
    "TYPE_INT8": np.int8,
    "TYPE_INT16": np.int16,
    "TYPE_INT32": np.int32,
    "TYPE_INT64": np.int64,
    "TYPE_FP16": np.float16,
    "TYPE_FP32": np.float32,
    "TYPE_FP64": np.float64,
    "TYPE_STRING": np.object_,
}

_logger = logging.getLogger("tritonserver.inprocess")


def serialize_byte_tensor(input_tensor: np.ndarray[Any, Any]) -> Any:
    """The elements of a BYTES array (object or ``np.bytes_`` dtype) as
    Triton's wire form: each one's length (4 bytes, little-endian), then
    its bytes, in C order. ``()`` for an empty array, None for another
    dtype (as the python backend)."""
    if input_tensor.size == 0:
        return ()
    is_object = input_tensor.dtype == np.object_
    if not is_object and input_tensor.dtype.type != np.bytes_:
        return None
    chunks = []
    for item in input_tensor.flat:  # C order whatever the array's layout
        if isinstance(item, bytes):
            data = bytes(item)
        else:  # str, numbers...: their text in UTF-8
            data = str(item).encode("utf-8")
        chunks.append(struct.pack("<I", len(data)))
        chunks.append(data)
    return b"".join(chunks)


def deserialize_bytes_tensor(encoded_tensor: Any) -> np.ndarray[Any, Any]:
    """The reverse of serialize_byte_tensor: a 1-D object array of bytes."""
    buffer = memoryview(encoded_tensor).cast("B")
    items = []
    position, end = 0, len(buffer)
    while position < end:
        if end - position < 4:
            raise struct.error(f"{end - position} bytes left where an element's length "
                               "(4 bytes) was expected")
        (length,) = struct.unpack_from("<I", buffer, position)
        position += 4
        if end - position < length:
            raise struct.error(f"an element of {length} bytes, but {end - position} left")
        items.append(bytes(buffer[position:position + length]))
        position += length
    result = np.empty(len(items), dtype=np.object_)
    result[:] = items
    return result


def using_decoupled_model_transaction_policy(model_config: dict[str, Any]) -> bool:
    """Whether the model configuration (a dict) says decoupled."""
    policy = model_config.get("model_transaction_policy")
    return bool(policy.get("decoupled", False)) if policy else False


def get_model_dir() -> str:
    """The folder of the model's ``model.py`` (``<model>/<version>``), as
    the python backend's stub gives it: known while the model's hooks run
    (and in the asyncio tasks they start); elsewhere, the folder of the
    calling file."""
    context = current_model()
    if context is not None:
        return context.model_dir
    caller_file = str(sys._getframe(1).f_globals.get("__file__") or "")
    if caller_file and os.path.isfile(caller_file):
        return os.path.dirname(os.path.abspath(caller_file))
    raise TritonError("get_model_dir() is known while a model's hooks run",
                      TritonError.UNAVAILABLE)


class ModelConfig:
    """The model configuration given to ``TritonPythonModel.auto_complete_config``
    and returned by it completed. The core takes from it ``max_batch_size``,
    ``input``, ``output``, a scheduler when the configuration names none
    (``dynamic_batching``) and ``model_transaction_policy.decoupled``."""

    def __init__(self, model_config: Any):
        text = model_config if isinstance(model_config, (str, bytes, bytearray)) \
            else json.dumps(model_config)  # a dict: a copy of it
        self._model_config: dict[str, Any] = json.loads(text)

    def as_dict(self) -> dict[str, Any]:
        """The configuration as a dict (the object itself: to change it, use
        the setters, which check what they are given)."""
        return self._model_config

    def _name(self) -> str:
        return str(self._model_config.get("name", ""))

    def set_max_batch_size(self, max_batch_size: int) -> None:
        current = self._model_config.get("max_batch_size", 0)
        if current > max_batch_size:
            raise ValueError(
                f"configuration specified max_batch_size {current}, but in auto-complete-config "
                f"function for model '{self._name()}' specified max_batch_size {max_batch_size}")
        self._model_config["max_batch_size"] = max_batch_size

    def set_dynamic_batching(self) -> None:
        """dynamic_batching as the scheduler, unless another one is configured
        (an error) or it already is (nothing to do)."""
        for other in ("sequence_batching", "ensemble_scheduling"):
            if other in self._model_config:
                raise ValueError(
                    f"Configuration specified scheduling_choice as '{other}', but "
                    f"auto-complete-config function for model '{self._name()}' tries to set "
                    "scheduling_choice as 'dynamic_batching'")
        self._model_config.setdefault("dynamic_batching", {})

    def add_input(self, input: dict[str, Any]) -> None:
        """Add an input, or complete the configured one of that name (whose
        data_type, dims and optional must agree where they are set)."""
        self._add("input", input, ("name", "data_type", "dims", "optional"),
                  "'name', 'data_type', 'dims' and 'optional'")

    def add_output(self, output: dict[str, Any]) -> None:
        """Add an output, or complete the configured one of that name."""
        self._add("output", output, ("name", "data_type", "dims"),
                  "'name', 'data_type' and 'dims'")

    def _add(self, kind: str, tensor: dict[str, Any], allowed: tuple[str, ...],
             allowed_text: str) -> None:
        model = self._name()
        if "name" not in tensor:
            raise ValueError(f"{kind} in auto-complete-config function for model '{model}' is "
                             "missing 'name' property.")
        name = tensor["name"]
        if any(key not in allowed for key in tensor):
            raise ValueError(f"{kind} '{name}' in auto-complete-config function for model "
                             f"'{model}' contains property other than {allowed_text}.")
        for required in ("data_type", "dims"):
            if required not in tensor:
                raise ValueError(f"{kind} '{name}' in auto-complete-config function for model "
                                 f"'{model}' is missing '{required}' property.")
        configured = self._model_config.setdefault(kind, [])
        existing = next((t for t in configured if t.get("name") == name), None)
        if existing is None:
            configured.append(tensor)
            return
        data_type = existing.get("data_type", "TYPE_INVALID")
        if data_type != "TYPE_INVALID" and data_type != tensor["data_type"]:
            raise ValueError(f"unable to load model '{model}', configuration expects datatype "
                             f"{data_type} for {kind} '{name}', model provides "
                             f"{tensor['data_type']}")
        dims = existing.get("dims")
        if dims and list(dims) != list(tensor["dims"]):
            raise ValueError(f"model '{model}', tensor '{name}': the model expects dims "
                             f"{tensor['dims']} but the model configuration specifies dims "
                             f"{dims}")
        if "optional" in existing and "optional" in tensor \
                and existing["optional"] != tensor["optional"]:
            raise ValueError(f"model '{model}', tensor '{name}': the model expects optional "
                             f"{tensor['optional']} but the model configuration specifies "
                             f"optional {existing['optional']}")
        existing["data_type"] = tensor["data_type"]
        existing["dims"] = tensor["dims"]
        if "optional" in tensor:
            existing["optional"] = tensor["optional"]

    def set_model_transaction_policy(self, transaction_policy_dict: dict[str, Any]) -> None:
        """``{"decoupled": bool}``; a configured decoupled setting cannot change."""
        model = self._name()
        if any(key != "decoupled" for key in transaction_policy_dict):
            raise ValueError(f"model transaction property in auto-complete-config function for "
                             f"model '{model}' contains property other than 'decoupled'.")
        policy = self._model_config.setdefault("model_transaction_policy", {})
        if "decoupled" not in transaction_policy_dict:
            return
        wanted = transaction_policy_dict["decoupled"]
        if "decoupled" in policy and policy["decoupled"] != wanted:
            raise ValueError(f"trying to change decoupled property in auto-complete-config for "
                             f"model '{model}', which is already set to "
                             f"'{policy['decoupled']}'.")
        policy["decoupled"] = wanted


def get_input_tensor_by_name(request: InferenceRequest, name: str) -> Optional[Tensor]:
    return next((t for t in request.inputs() if t.name() == name), None)


def get_output_tensor_by_name(response: InferenceResponse, name: str) -> Optional[Tensor]:
    for tensor in response.output_tensors():
        if tensor.name() == name:
            return tensor
    return None


def get_input_config_by_name(model_config: dict[str, Any], name: str) -> Optional[dict[str, Any]]:
    return next((i for i in model_config.get("input", []) if i.get("name") == name), None)


def get_output_config_by_name(model_config: dict[str, Any], name: str) -> Optional[dict[str, Any]]:
    return next((o for o in model_config.get("output", []) if o.get("name") == name), None)


class LogLevel(enum.IntEnum):
    """The python backend's log levels (``pb_utils.Logger.INFO``...)."""

    INFO = 0
    WARNING = 1
    ERROR = 2
    VERBOSE = 3

    __str__ = enum.Enum.__str__  # LogLevel.INFO, as the python backend's enum prints


# Python's logging has no verbose level: debug stands for it.
_PYTHON_LEVELS = {LogLevel.INFO: logging.INFO, LogLevel.WARNING: logging.WARNING,
                  LogLevel.ERROR: logging.ERROR, LogLevel.VERBOSE: logging.DEBUG}


def _log(message: str, level: Any) -> None:
    # The python backend's binding takes a str and a LogLevel, nothing else.
    if not isinstance(level, LogLevel):
        raise TypeError(f"Logger.log: level must be a pb_utils.Logger level (INFO, WARNING, "
                        f"ERROR, VERBOSE), not {level!r}")
    if not isinstance(message, str):
        raise TypeError(f"Logger: the message must be str, not {type(message).__name__}")
    known = level
    caller = sys._getframe(2)
    if not _server_log.write(int(known), str(message), caller.f_code.co_filename,
                             caller.f_lineno):
        # No server log yet. stacklevel 3: the record names the model's line.
        _logger.log(_PYTHON_LEVELS[known], message, stacklevel=3)


class Logger:
    """``pb_utils.Logger.log_info(...)`` and friends: lines of the server's
    log, as the python backend writes them (each names the model's file and
    line; the server's log options say which levels are written). Before
    any server has run a Python model, Python's logging (logger
    ``tritonserver.inprocess``; verbose is its debug level)."""

    LogLevel = LogLevel
    INFO = LogLevel.INFO
    WARNING = LogLevel.WARNING
    ERROR = LogLevel.ERROR
    VERBOSE = LogLevel.VERBOSE

    @staticmethod
    def log(message: str, level: int = LogLevel.INFO) -> None:
        _log(message, level)

    @staticmethod
    def log_info(message: str) -> None:
        _log(message, LogLevel.INFO)

    @staticmethod
    def log_warn(message: str) -> None:
        _log(message, LogLevel.WARNING)

    @staticmethod
    def log_error(message: str) -> None:
        _log(message, LogLevel.ERROR)

    @staticmethod
    def log_verbose(message: str) -> None:
        _log(message, LogLevel.VERBOSE)
