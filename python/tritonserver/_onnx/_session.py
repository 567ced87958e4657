"""ONNX Runtime sessions as Triton's ONNX Runtime backend makes them: the
model file, the session options from the configuration's parameters, and
the execution providers its execution accelerators ask for."""

from __future__ import annotations

import logging
from typing import Any

from tritonserver._errors import InvalidArgumentError, UnsupportedError
from tritonserver._framework import _params
from tritonserver._framework._params import bool_parameter, int_parameter, runtime

log = logging.getLogger("tritonserver.onnxruntime")

DEFAULT_FILENAME = "model.onnx"

# Triton's accelerator names -> ONNX Runtime's execution providers.
_PROVIDERS = {"tensorrt": "TensorrtExecutionProvider", "cuda": "CUDAExecutionProvider",
              "openvino": "OpenVINOExecutionProvider"}


def onnxruntime() -> Any:
    """The onnxruntime module, or UnavailableError naming the extra."""
    return runtime("onnxruntime", "onnxruntime", "onnx")


def model_path(name: str, version: int, repository_path: str, config: dict[str, Any]) -> str:
    """The model file: <version>/<default_model_filename>, or model.onnx in
    it when that is a folder (a model with its external-data weights)."""
    return _params.model_path(name, version, repository_path, config, DEFAULT_FILENAME,
                              "ONNX model")


def session_options(ort: Any, config: dict[str, Any], parameters: dict[str, str]) -> Any:
    """SessionOptions from the parameters Triton's backend reads on CPU and
    from optimization { graph { level } }."""
    options = ort.SessionOptions()
    for key, attribute in (("intra_op_thread_count", "intra_op_num_threads"),
                           ("inter_op_thread_count", "inter_op_num_threads")):
        count = int_parameter(parameters, key)
        if count > 0:
            setattr(options, attribute, count)
    mode = int_parameter(parameters, "execution_mode")
    if mode not in (0, 1):
        raise InvalidArgumentError(
            f"parameter execution_mode: expected 0 (sequential) or 1 (parallel), got {mode}")
    options.execution_mode = (ort.ExecutionMode.ORT_SEQUENTIAL if mode == 0
                              else ort.ExecutionMode.ORT_PARALLEL)
    for key, attribute in (("enable_mem_arena", "enable_cpu_mem_arena"),
                           ("enable_mem_pattern", "enable_mem_pattern")):
        flag = bool_parameter(parameters, key)
        if flag is not None:
            setattr(options, attribute, flag)
    level = config.get("optimization", {}).get("graph", {}).get("level", 0)
    levels = ort.GraphOptimizationLevel
    options.graph_optimization_level = {-1: levels.ORT_ENABLE_BASIC,
                                        1: levels.ORT_ENABLE_EXTENDED,
                                        2: levels.ORT_DISABLE_ALL}.get(int(level),
                                                                      levels.ORT_ENABLE_ALL)
    return options


def run_options(ort: Any, parameters: dict[str, str]) -> Any:
    options = ort.RunOptions()
    options.only_execute_path_to_fetches = True  # what the requests asked for, no more
    shrinkage = parameters.get("memory.enable_memory_arena_shrinkage")
    if shrinkage:
        options.add_run_config_entry("memory.enable_memory_arena_shrinkage", shrinkage)
    return options


def providers(ort: Any, name: str, config: dict[str, Any], kind: str) -> list[Any]:
    """The execution providers, CPU last. An accelerator this onnxruntime
    cannot run fails the load: a model never runs elsewhere than asked."""
    available = set(ort.get_available_providers())
    accelerators = config.get("optimization", {}).get("execution_accelerators", {})
    chosen: list[Any] = []
    for group in ("gpu_execution_accelerator", "cpu_execution_accelerator"):
        for accelerator in accelerators.get(group, []):
            accel = accelerator.get("name", "")
            provider = _PROVIDERS.get(accel)
            if provider is None or (group == "cpu_execution_accelerator") != (accel == "openvino"):
                raise InvalidArgumentError(
                    f"model '{name}': unknown Execution Accelerator '{accel}' is requested in "
                    f"{group} (known: tensorrt and cuda for GPUs, openvino for CPUs)")
            if provider not in available:
                raise UnsupportedError(
                    f"model '{name}': execution accelerator '{accel}' needs ONNX Runtime's "
                    f"{provider}, which the installed onnxruntime does not have (it has "
                    f"{', '.join(sorted(available))}); install an onnxruntime build with it, "
                    "or remove the accelerator from the model configuration")
            chosen.append((provider, dict(accelerator.get("parameters", {}))))
    if kind == "KIND_GPU" and not any(p[0] == "CUDAExecutionProvider" for p in chosen):
        if "CUDAExecutionProvider" not in available:
            raise UnsupportedError(
                f"model '{name}': a KIND_GPU instance needs ONNX Runtime's "
                "CUDAExecutionProvider, which the installed onnxruntime does not have "
                "(install onnxruntime-gpu, or use KIND_CPU)")
        chosen.append(("CUDAExecutionProvider", {}))
    chosen.append("CPUExecutionProvider")
    return chosen


def open_session(ort: Any, name: str, path: str, options: Any, chosen: list[Any],
                 device_id: int = 0) -> Any:
    """An InferenceSession on the model file (a path, so that external data
    beside it is found); ONNX Runtime's own message if it cannot load it."""
    with_device = [(p[0], {**p[1], "device_id": str(device_id)})
                   if isinstance(p, tuple) and p[0] == "CUDAExecutionProvider" else p
                   for p in chosen]
    try:
        session = ort.InferenceSession(path, sess_options=options, providers=with_device)
    except Exception as e:  # onnxruntime's own exception types
        raise InvalidArgumentError(
            f"model '{name}': ONNX Runtime could not load '{path}': {e}") from None
    read = session.get_session_options()
    log.info("model '%s': ONNX Runtime session on %s; intra_op_num_threads=%d "
             "inter_op_num_threads=%d execution_mode=%s enable_cpu_mem_arena=%s "
             "enable_mem_pattern=%s graph_optimization_level=%s", name,
             ", ".join(session.get_providers()), read.intra_op_num_threads,
             read.inter_op_num_threads, read.execution_mode.name, read.enable_cpu_mem_arena,
             read.enable_mem_pattern, read.graph_optimization_level.name)
    return session
