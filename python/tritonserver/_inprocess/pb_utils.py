"""``triton_python_backend_utils`` for python-backend models run in-process.

A ``model.py`` written for Triton's python backend imports this module
under that name (``import triton_python_backend_utils as pb_utils``) when
its model folder's config says ``backend: "inprocess"``. What it covers,
and what it does not, is listed in docs/inprocess.md.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from tritonserver import _datatypes as dt
from tritonserver._enums import DataType
from tritonserver._tensor import Tensor as _Tensor

if TYPE_CHECKING:
    from tritonserver._inprocess._request import ModelRequest, ResponseSender

TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2

_logger = logging.getLogger("tritonserver.inprocess")


class TritonError(Exception):
    """An error for one request (``InferenceResponse(error=...)``), or raised."""

    UNKNOWN, INTERNAL, NOT_FOUND, INVALID_ARG, UNAVAILABLE, UNSUPPORTED, ALREADY_EXISTS, \
        CANCELLED = range(8)

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self._message = message
        self._code = code

    @property
    def _triton_code(self) -> int:  # read by tritonserver._errors.code_of
        from tritonserver._c import triton_bindings as _bindings

        names = ("UNKNOWN", "INTERNAL", "NOT_FOUND", "INVALID_ARG", "UNAVAILABLE",
                 "UNSUPPORTED", "ALREADY_EXISTS", "CANCELLED")
        name = names[self._code] if 0 <= self._code < len(names) else "INTERNAL"
        return _bindings.enum_tables()["ErrorCode"][name]

    def code(self) -> int:
        return self._code

    def message(self) -> str:
        return self._message


class TritonModelException(TritonError):
    """Raised by a model: fails the batch with its message."""


def triton_string_to_numpy(triton_type: str) -> Any:
    data_type = dt.from_config_name(triton_type)
    return np.object_ if data_type == DataType.BYTES else dt.to_numpy_dtype(data_type).type


def numpy_to_triton_type(data_type: Any) -> Optional[int]:
    try:
        return int(dt.from_numpy_dtype(np.dtype(data_type)))
    except Exception:
        return None


def triton_to_numpy_type(data_type: int) -> Any:
    return np.object_ if data_type == int(DataType.BYTES) else dt.to_numpy_dtype(DataType(data_type)).type


class Tensor:
    """A named tensor: ``Tensor(name, numpy_array)``."""

    def __init__(self, name: str, data: Any):
        if not isinstance(name, str):
            raise TritonError("Tensor name must be a str")
        self._name = name
        self._data = data

    def name(self) -> str:
        return self._name

    def as_numpy(self) -> np.ndarray[Any, Any]:
        data = self._data
        if isinstance(data, np.ndarray):
            return data
        if isinstance(data, _Tensor) and data.data_type == DataType.BYTES:
            return data.to_bytes_array()
        return np.from_dlpack(data)

    def shape(self) -> list[int]:
        return list(np.shape(self._data)) if not isinstance(self._data, _Tensor) \
            else list(self._data.shape)

    def triton_dtype(self) -> Optional[int]:
        if isinstance(self._data, _Tensor):
            return int(self._data.data_type)
        return numpy_to_triton_type(self._data.dtype)

    def is_cpu(self) -> bool:
        return not isinstance(self._data, _Tensor) or self._data.memory_type.name != "GPU"

    def to_dlpack(self) -> Any:
        return self._data.__dlpack__()

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self._data.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> Any:
        return self._data.__dlpack_device__()

    @staticmethod
    def from_dlpack(name: str, capsule: Any) -> "Tensor":
        if hasattr(capsule, "__dlpack__"):
            return Tensor(name, capsule)
        return Tensor(name, _Tensor.from_dlpack(capsule))


class InferenceResponse:
    """``InferenceResponse(output_tensors, error=None, parameters=None)``."""

    def __init__(self, output_tensors: Optional[list[Tensor]] = None,
                 error: Optional[TritonError] = None, parameters: Any = None):
        self._outputs = list(output_tensors or [])
        self._error = error
        if isinstance(parameters, str):
            parameters = json.loads(parameters or "{}")
        self._parameters = parameters

    def output_tensors(self) -> list[Tensor]:
        return self._outputs

    def has_error(self) -> bool:
        return self._error is not None

    def error(self) -> Optional[TritonError]:
        return self._error


class InferenceResponseSender:
    """A decoupled request's sender: ``send(response=None, flags=0)``."""

    def __init__(self, sender: ResponseSender):
        self._sender = sender

    def send(self, response: Optional[InferenceResponse] = None, flags: int = 0) -> None:
        final = bool(flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        self._sender.send(None if response is None else model_response(response), final)

    def is_cancelled(self) -> bool:
        return self._sender.is_cancelled()


class InferenceRequest:
    """A request given to ``TritonPythonModel.execute``. (Building one to
    call another model, BLS, is not supported in-process.)"""

    _request: ModelRequest  # set by wrapped_request (the constructor refuses)

    def __init__(self, *args: Any, **kwargs: Any):
        raise TritonError("pb_utils.InferenceRequest(...).exec() (BLS) is not supported by the "
                          "inprocess backend; call the other model through the tritonserver API",
                          TritonError.UNSUPPORTED)

    def inputs(self) -> list[Tensor]:
        return [Tensor(n, v) for n, v in self._request.inputs.items()]

    def request_id(self) -> str:
        return self._request.id

    def correlation_id(self) -> Any:
        return self._request.correlation_id

    def flags(self) -> int:
        return self._request.flags

    def parameters(self) -> str:
        return json.dumps(self._request.parameters)

    def requested_output_names(self) -> list[str]:
        return list(self._request.requested_outputs)

    def timeout(self) -> int:
        return self._request.timeout_us

    def is_cancelled(self) -> bool:
        return self._request.is_cancelled()

    def get_response_sender(self) -> InferenceResponseSender:
        return InferenceResponseSender(self._request.sender)


def get_input_tensor_by_name(request: InferenceRequest, name: str) -> Optional[Tensor]:
    value = request._request.inputs.get(name)
    return None if value is None else Tensor(name, value)


def get_output_tensor_by_name(response: InferenceResponse, name: str) -> Optional[Tensor]:
    for tensor in response.output_tensors():
        if tensor.name() == name:
            return tensor
    return None


def get_input_config_by_name(model_config: dict[str, Any], name: str) -> Optional[dict[str, Any]]:
    return next((i for i in model_config.get("input", []) if i.get("name") == name), None)


def get_output_config_by_name(model_config: dict[str, Any], name: str) -> Optional[dict[str, Any]]:
    return next((o for o in model_config.get("output", []) if o.get("name") == name), None)


class Logger:
    """``pb_utils.Logger.log_info(...)`` and friends, to Python logging."""

    @staticmethod
    def log_info(message: str) -> None:
        _logger.info(message)

    @staticmethod
    def log_warn(message: str) -> None:
        _logger.warning(message)

    @staticmethod
    def log_error(message: str) -> None:
        _logger.error(message)

    @staticmethod
    def log_verbose(message: str) -> None:
        _logger.debug(message)

    @staticmethod
    def log(message: str, level: int = 0) -> None:
        _logger.info(message)


# The two functions below are the in-process backend's (tritonserver._inprocess._pb_model),
# not the python backend's API.


def wrapped_request(request: ModelRequest) -> InferenceRequest:
    """A PythonModel's request as the pb_utils.InferenceRequest that
    ``TritonPythonModel.execute`` gets."""
    wrapped = object.__new__(InferenceRequest)
    wrapped._request = request
    return wrapped


def model_response(response: Any) -> Any:
    """A pb_utils.InferenceResponse as the PythonModel response it stands for."""
    from tritonserver._inprocess._response import ModelResponse

    if not isinstance(response, InferenceResponse):
        raise TritonError(f"expected a pb_utils.InferenceResponse, not {type(response).__name__}")
    if response.has_error():
        return ModelResponse(error=response.error())
    outputs = {t.name(): t._data for t in response.output_tensors()}
    return ModelResponse(outputs, response._parameters)
