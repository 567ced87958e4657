"""The values a python-backend model.py shares with Triton through
``triton_python_backend_utils`` (tritonserver._inprocess.pb_utils, which
re-exports them): errors, tensors, responses, and which model a call is
made for. Below pb_utils and its BLS and metrics modules, which all use
them."""

from __future__ import annotations

import contextlib
import contextvars
import json
from dataclasses import dataclass
from typing import Any, Iterator, Optional

import numpy as np

from tritonserver import _datatypes as dt
from tritonserver._enums import DataType
from tritonserver._tensor import Tensor as _Tensor


@dataclass(frozen=True)
class ModelContext:
    """The model a hook runs for: its name, the folder of its model.py, the
    address of the server that loaded it (0 while none is known), whether
    BLS may run (not in initialize, finalize or auto-complete, as in the
    python backend), and the name its model.py was imported under (what
    ``import model`` gives inside its hooks, see _pb_alias)."""

    name: str
    model_dir: str
    server_address: int = 0
    bls: bool = True
    module_name: str = ""


_context: contextvars.ContextVar[Optional[ModelContext]] = contextvars.ContextVar(
    "tritonserver_pb_utils_model", default=None)


@contextlib.contextmanager
def running_for(context: ModelContext) -> Iterator[None]:
    """Inside the block (and in the asyncio tasks it starts), calls are made
    for the model of ``context``."""
    token = _context.set(context)
    try:
        yield
    finally:
        _context.reset(token)


def current_model() -> Optional[ModelContext]:
    return _context.get()


_CODE_NAMES = ("UNKNOWN", "INTERNAL", "NOT_FOUND", "INVALID_ARG", "UNAVAILABLE", "UNSUPPORTED",
               "ALREADY_EXISTS", "CANCELLED")


def _core_codes() -> dict[str, int]:
    from tritonserver._c import triton_bindings as _bindings

    return dict(_bindings.enum_tables()["ErrorCode"])


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
        codes = _core_codes()
        name = _CODE_NAMES[self._code] if 0 <= self._code < len(_CODE_NAMES) else "INTERNAL"
        return codes[name]

    @classmethod
    def of(cls, error: BaseException) -> "TritonError":
        """`error` (a tritonserver error, or any exception) as a TritonError
        of its code, with its message."""
        if isinstance(error, TritonError):
            return error
        from tritonserver._errors import code_of

        names = {v: k for k, v in _core_codes().items()}
        name = names.get(code_of(error), "INTERNAL")
        return cls(str(error), _CODE_NAMES.index(name) if name in _CODE_NAMES else cls.INTERNAL)

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
        # The python backend's binding: arguments of the wrong type are
        # TypeErrors; an empty name is the model's error, in its words.
        if not isinstance(name, str):
            raise TypeError(f"Tensor: name must be str, not {type(name).__name__}")
        if data is None:
            raise TypeError("Tensor: the data must be a numpy array (or what numpy makes one "
                            "of), not None")
        _check_tensor_name(name)
        self._name = name
        # A numpy array (a list becomes one, as the python backend's
        # constructor converts it), or a DLPack producer.
        if not isinstance(data, (np.ndarray, _Tensor)) and not hasattr(data, "__dlpack__"):
            data = np.asarray(data)
        self._data = data

    def name(self) -> str:
        return self._name

    def as_numpy(self) -> np.ndarray[Any, Any]:
        data = self._data
        if isinstance(data, np.ndarray):
            return data
        tensor = self._tensor()
        # The python backend's refusals, in its words.
        if tensor.memory_type.name == "GPU":
            raise TritonModelException("Tensor is stored in GPU and cannot be converted to NumPy.")
        if tensor.data_type == DataType.BF16:
            raise TritonModelException("Tensor dtype is BF16 and cannot be converted to NumPy. "
                                       "Use to_dlpack() and from_dlpack() instead.")
        if tensor.data_type == DataType.BYTES:
            return tensor.to_bytes_array()
        return np.from_dlpack(tensor)

    def _tensor(self) -> _Tensor:
        """What the tensor holds (not a numpy array) as a tritonserver.Tensor."""
        return self._data if isinstance(self._data, _Tensor) else _Tensor.from_dlpack(self._data)

    def shape(self) -> list[int]:
        if isinstance(self._data, np.ndarray):
            return list(self._data.shape)
        return list(self._tensor().shape)

    def triton_dtype(self) -> Optional[int]:
        if isinstance(self._data, np.ndarray):
            return numpy_to_triton_type(self._data.dtype)
        return int(self._tensor().data_type)

    def is_cpu(self) -> bool:
        data = self._data
        if isinstance(data, np.ndarray):
            return True
        return int(data.__dlpack_device__()[0]) != dt.DL_CUDA

    def to_dlpack(self) -> Any:
        return self._data.__dlpack__()

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self._data.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> Any:
        return self._data.__dlpack_device__()

    def data(self) -> Any:
        """(Not the python backend's API) what the tensor holds: a numpy
        array, a tritonserver.Tensor or another DLPack producer."""
        return self._data

    @staticmethod
    def from_dlpack(name: str, capsule: Any) -> "Tensor":
        if not isinstance(name, str):
            raise TypeError(f"Tensor.from_dlpack: name must be str, not {type(name).__name__}")
        _check_tensor_name(name)
        if hasattr(capsule, "__dlpack__"):
            return Tensor(name, capsule)
        if type(capsule).__name__ != "PyCapsule":
            raise TritonModelException(
                "Provided tensor is not supported. Tensor must be a DLPack capsule or have "
                "`__dlpack__` and `__dlpack_device__` attributes")
        return Tensor(name, _Tensor.from_dlpack(capsule))


def host_input(value: Any) -> Any:
    """An input as a model gets it where FORCE_CPU_ONLY_INPUT_TENSORS is not
    "no" (the python backend's default): one in GPU memory copied to the
    host, as numpy (BYTES as objects; BF16, which numpy lacks, a Tensor)."""
    if not isinstance(value, _Tensor) or value.memory_type.name != "GPU":
        return value
    host = value.to_host()
    if host.data_type == DataType.BYTES:
        return host.to_bytes_array()
    if host.data_type == DataType.BF16:
        return host
    return np.from_dlpack(host)


def cpu_only_inputs(config: dict[str, Any]) -> bool:
    """Whether a model's inputs come in host memory: its parameter
    FORCE_CPU_ONLY_INPUT_TENSORS, "yes" unless it says "no"."""
    parameter = config.get("parameters", {}).get("FORCE_CPU_ONLY_INPUT_TENSORS", {})
    value = parameter.get("string_value", "yes") if isinstance(parameter, dict) else "yes"
    return str(value).strip().lower() != "no"


def _check_tensor_name(name: str) -> None:
    if name == "":
        raise TritonModelException("Tensor name cannot be an empty string.")


# InferenceResponse's output_tensors when none are given (None itself is refused).
_NO_OUTPUTS: list[Tensor] = []


def checked_parameters(parameters: Any) -> dict[str, Any]:
    """A request's or response's ``parameters`` as the python backend takes
    them: a dict of str keys and bool, int or str values (its texts, which
    Triton's qa/L0_backend_python/parameters reads); None is none. A JSON
    object in a str, which older python backends took, is read."""
    if parameters is None:
        return {}
    if isinstance(parameters, str):
        parameters = json.loads(parameters or "{}")
    if not isinstance(parameters, dict):
        raise TritonModelException(f"Expect dict, got {type(parameters)}")
    for key, value in parameters.items():
        if not isinstance(key, str):
            raise TritonModelException(
                f"Expect parameters keys to have type str, found type {type(key)}")
        if not isinstance(value, (bool, int, str)):
            raise TritonModelException(
                f"Expect parameters values to have type bool/int/str, found type {type(value)}")
    return parameters


class InferenceResponse:
    """``InferenceResponse(output_tensors, error=None, parameters=None)``."""

    def __init__(self, output_tensors: list[Tensor] = _NO_OUTPUTS,
                 error: Optional[TritonError] = None, parameters: Any = None):
        if not isinstance(output_tensors, (list, tuple)):
            raise TypeError(f"InferenceResponse: output_tensors must be a list of "
                            f"pb_utils.Tensor, not {type(output_tensors).__name__}")
        for tensor in output_tensors:
            if tensor is None:
                raise TritonModelException(
                    "Output tensor for inference response should not be empty.")
            if not isinstance(tensor, Tensor):
                raise TypeError(f"InferenceResponse: output_tensors must be pb_utils.Tensor "
                                f"objects, not {type(tensor).__name__}")
        self._outputs = list(output_tensors)
        self._error = error
        self._parameters = checked_parameters(parameters)

    def output_tensors(self) -> list[Tensor]:
        return self._outputs

    def parameters(self) -> str:
        """The response's parameters as JSON (``"{}"`` when none)."""
        return json.dumps(self._parameters)

    def has_error(self) -> bool:
        return self._error is not None

    def error(self) -> Optional[TritonError]:
        return self._error




def model_response(response: Any) -> Any:
    """A pb_utils.InferenceResponse as the PythonModel response it stands for."""
    from tritonserver._inprocess._response import ModelResponse

    if not isinstance(response, InferenceResponse):
        raise TritonError(f"expected a pb_utils.InferenceResponse, not {type(response).__name__}")
    if response.has_error():
        return ModelResponse(error=response.error())
    outputs = {t.name(): t.data() for t in response.output_tensors()}
    return ModelResponse(outputs, response._parameters)
