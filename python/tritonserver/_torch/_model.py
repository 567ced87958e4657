"""TorchModel: one load of a TorchScript model, as Triton's pytorch backend
runs it: loaded with torch.jit.load onto the CPU, run under inference mode
(INFERENCE_MODE, default true) and no_grad, one module per instance
(libtorch releases the GIL while it runs, so instances overlap). Batches,
sequences and requested outputs are the framework layer's."""

from __future__ import annotations

import logging
import threading
import warnings
from typing import Any, NamedTuple, Optional

import numpy as np

from tritonserver._errors import InternalError, InvalidArgumentError, UnsupportedError
from tritonserver._framework._model import FrameworkModel
from tritonserver._framework._params import (
    bool_parameter,
    int_parameter,
    model_path,
    runtime,
    text_inputs,
)
from tritonserver._framework._plugins import API_VERSION
from tritonserver._inprocess._model import ModelInstance
from tritonserver._torch import _io
from tritonserver._torch._types import BACKEND, config_types

log = logging.getLogger("tritonserver.pytorch")

DEFAULT_FILENAME = "model.pt"
_INTEROP = threading.Lock()  # torch takes the inter-op thread count once per process

# Parameters Triton reads that change nothing on a CPU-only torch; parsed
# (a bad value fails the load, as in Triton) and otherwise left alone.
_CPU_NO_OPS = ("ENABLE_CACHE_CLEANING", "DISABLE_CUDNN", "ENABLE_WEIGHT_SHARING")
# Process-wide JIT switches set before each run when the parameter is given.
_JIT_SWITCHES = (("ENABLE_JIT_PROFILING", "_jit_set_profiling_mode"),
                 ("ENABLE_JIT_EXECUTOR", "_jit_set_profiling_executor"),
                 ("ENABLE_TENSOR_FUSER", "_jit_set_texpr_fuser_enabled"))


class Settings(NamedTuple):
    inference_mode: bool
    optimized: bool
    jit: list[tuple[Any, bool]]  # (torch._C setter, value)


def settings(torch: Any, name: str, parameters: dict[str, str]) -> Settings:
    """The configuration's parameters; the thread counts are applied here
    (process-wide, as at::set_num_threads is in Triton)."""
    for key in _CPU_NO_OPS:
        bool_parameter(parameters, key)
    jit = []
    for key, setter in _JIT_SWITCHES:
        value = bool_parameter(parameters, key)
        if value is not None:
            jit.append((getattr(torch._C, setter), value))
    intra = int_parameter(parameters, "INTRA_OP_THREAD_COUNT")
    if intra > 0:
        torch.set_num_threads(intra)
        log.info("Intra op thread count is set to %d for model '%s' (torch's setting: every "
                 "TorchScript model of this process uses it)", intra, name)
    inter = int_parameter(parameters, "INTER_OP_THREAD_COUNT")
    if inter > 0:
        _set_interop(torch, name, inter)
    return Settings(bool_parameter(parameters, "INFERENCE_MODE") is not False,
                    not bool_parameter(parameters, "DISABLE_OPTIMIZED_EXECUTION"), jit)


def _set_interop(torch: Any, name: str, count: int) -> None:
    with _INTEROP:
        if torch.get_num_interop_threads() == count:
            return
        try:
            torch.set_num_interop_threads(count)
        except RuntimeError as e:
            log.warning("model '%s': INTER_OP_THREAD_COUNT %d not applied, it stays %d: torch "
                        "sets the inter-op thread count once per process, before any parallel "
                        "work (%s)", name, count, torch.get_num_interop_threads(), e)
        else:
            log.info("Inter op thread count is set to %d for model '%s' (torch's setting: "
                     "every TorchScript model of this process uses it)", count, name)


class TorchModel(FrameworkModel):
    api_version = API_VERSION
    requires = ("torch",)

    @classmethod
    def complete(cls, name: str, version: int, config: dict[str, Any], repository_path: str,
                 settings: dict[str, str]) -> Optional[dict[str, Any]]:
        """Triton's pytorch backend completes nothing: a TorchScript module does
        not say its tensors' types and shapes. The configuration stays as it is."""
        logging.getLogger("tritonserver.pytorch").warning(
            "skipping model configuration auto-complete for '%s': not supported for pytorch "
            "backend", name)
        return None

    def load(self) -> None:
        """Everything that can refuse the model is checked here, once per
        load, before any instance exists."""
        torch = self._torch = runtime("torch", BACKEND, "torch")
        self._path = model_path(self.name, self.version, self.repository_path, self.config,
                                DEFAULT_FILENAME, "TorchScript model")
        self._settings = settings(torch, self.name, self.parameters)
        kinds = {g.get("kind", "KIND_CPU") for g in self.config.get("instance_group", [])}
        if "KIND_GPU" in kinds and not torch.cuda.is_available():
            raise UnsupportedError(
                f"model '{self.name}': a KIND_GPU instance needs torch with CUDA, which the "
                f"installed torch {torch.__version__} does not have (install a CUDA build of "
                "torch, or use KIND_CPU)")
        module = self._load("cpu")
        self._bindings = _io.bind(self.name, self.config, _io.forward_arguments(module))
        self._config_types = config_types(torch)
        self._tensor = torch.Tensor
        self._last_output = max(self._bindings.outputs.values(), default=-1)
        self._types = {e["name"]: e.get("data_type", "TYPE_INVALID")
                       for e in self.config.get("output", [])}
        for state in (self.config.get("sequence_batching") or {}).get("state", []):
            self._types[state["output_name"]] = state.get("data_type", "TYPE_INVALID")
        by_type = {t: d for d, t in self._config_types.items()}
        self._dtypes = {n: by_type[t] for n, t in self._types.items() if t in by_type}
        self.prepare = text_inputs(self.config, "TorchScript")
        self._spare: Optional[Any] = module  # for the first CPU instance

    def _load(self, device: str) -> Any:
        torch = self._torch
        with warnings.catch_warnings(), torch.inference_mode(self._settings.inference_mode):
            warnings.filterwarnings("ignore", category=DeprecationWarning,
                                    message=r".*torch\.jit")
            try:
                return torch.jit.load(self._path, map_location=device)
            except Exception as e:  # torch's own errors
                raise InternalError(f"failed to load model '{self.name}': {e}") from None

    def open_instance(self, instance: ModelInstance) -> Any:
        device = "cpu"
        if instance.kind in ("GPU", "KIND_GPU"):
            device = f"cuda:{instance.device_id}"
        spare, self._spare = self._spare, None
        module = spare if spare is not None and device == "cpu" else self._load(device)
        return module, device

    def finalize(self) -> None:
        self._spare = None  # an instance that was never made leaves its module here

    def run(self, runner: Any, names: list[str], feed: dict[str, Any]) -> list[Any]:
        module, device = runner
        torch, how, bindings = self._torch, self._settings, self._bindings
        # Inference mode implies no gradients; without it, no_grad (as Triton).
        with torch.inference_mode() if how.inference_mode else torch.no_grad():
            # Process-wide switches, set before each run as Triton does (another
            # model may have changed them); only when they differ, which is rare.
            if torch._C._get_graph_executor_optimize() != how.optimized:
                torch._C._set_graph_executor_optimize(how.optimized)
            for setter, value in how.jit:
                setter(value)
            try:
                if bindings.dict_input:
                    result = module({name: _to_torch(torch, value, device)
                                     for name, value in feed.items()})
                else:
                    args: list[Any] = [None] * bindings.arity
                    for name, value in feed.items():
                        args[bindings.inputs[name]] = _to_torch(torch, value, device)
                    result = module(*args)
            except Exception as e:  # the TorchScript interpreter's errors
                raise InternalError(f"PyTorch execute failure: {e}") from None
            results = _results(torch, result)
            if len(results) <= self._last_output:
                for name, index in bindings.outputs.items():
                    if index >= len(results):
                        raise InvalidArgumentError(
                            f"The output {name} in the model configuration refers to an "
                            f"output index which doesn't exist. This model has "
                            f"{len(results)} outputs")
            return [self._to_numpy(name, results[bindings.outputs[name]]) for name in names]

    def _to_numpy(self, name: str, value: Any) -> Any:
        # The common case first: a CPU tensor of the declared type, as it is.
        if (type(value) is self._tensor and value.dtype is self._dtypes.get(name)
                and value.is_cpu and value.ndim and not value.requires_grad
                and value.is_contiguous()):
            return value.numpy()
        expected = self._types.get(name, "TYPE_INVALID")
        if isinstance(value, list):
            provided = "TYPE_STRING"
        else:
            provided = self._config_types.get(value.dtype, "TYPE_INVALID")
        if provided != expected:
            raise InvalidArgumentError(
                f"configuration expects datatype {expected} for output '{name}', model "
                f"provides {provided}")
        if isinstance(value, list):
            array = np.empty(len(value), dtype=object)
            array[:] = [s.encode("utf-8") for s in value]
            return array
        if value.dim() == 0:
            raise InvalidArgumentError(f"output '{name}' is a scalar which is not supported.")
        if value.requires_grad:  # a parameter returned as it is
            value = value.detach()
        if value.device.type != "cpu":
            value = value.cpu()
        return (value if value.is_contiguous() else value.contiguous()).numpy()


_OBJECT = np.dtype(object)


def _to_torch(torch: Any, value: Any, device: str) -> Any:
    """A tensor viewing the array (copied when read-only: a model may write
    its inputs in place), or a list of str for a TYPE_STRING input."""
    if isinstance(value, np.ndarray):
        if value.dtype is _OBJECT:
            return [str(s) for s in value.reshape(-1).tolist()]
        flags = value.flags
        if not (flags.writeable and flags.c_contiguous):
            value = value.copy(order="C")  # the request's buffer stays untouched
        tensor = torch.from_numpy(value)
    else:
        tensor = torch.from_dlpack(value)
    return tensor if device == "cpu" else tensor.to(device)


def _results(torch: Any, result: Any) -> list[Any]:
    """The model's results as Triton's backend takes them: a Tensor, a
    List[str], or a tuple of those."""
    def is_strings(value: Any) -> bool:
        return isinstance(value, list) and all(isinstance(s, str) for s in value)

    def element_type(value: list[Any]) -> str:
        first = next((v for v in value if not isinstance(v, str)), None)
        return "Tensor" if isinstance(first, torch.Tensor) else type(first).__name__

    if isinstance(result, tuple):
        for index, value in enumerate(result):
            if isinstance(value, list) and not is_strings(value):
                raise InternalError(
                    f"PyTorch execute failure: output at index {index} must be of type Tensor "
                    f"or List[str], received List[{element_type(value)}]")
            if not isinstance(value, (list, torch.Tensor)):
                raise InternalError(
                    f"PyTorch execute failure: output at index {index} must be of type Tensor "
                    f"or List[str], received {type(value).__name__}")
        return list(result)
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, list):
        if not is_strings(result):
            raise InternalError(
                "PyTorch execute failure: output must be of type Tensor or List[str], "
                f"received List[{element_type(result)}]")
        return [result]
    raise InternalError(
        "PyTorch execute failure: output must be of type Tensor, List[str] or Tuple containing "
        "one of these two types. It should not be a List / Dictionary of Tensors or a Scalar")

