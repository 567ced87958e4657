"""Every name of the reference page exists, with the reference's parameter
names and order, so code written against the page finds what it calls.
(Each name's behaviour is tested elsewhere, against a running server.)"""

from __future__ import annotations

import dataclasses
import inspect

import pytest

import tritonserver

# name -> the parameters (after self) in the reference's order.
CALLABLES = {
    "Server": ["options", "kwargs"],
    "Server.live": [], "Server.ready": [], "Server.metadata": [], "Server.stop": [],
    "Server.poll_model_repository": [],
    "Server.load": ["model_name", "parameters"],
    "Server.metrics": ["metric_format"],
    "Server.model": ["model_name", "model_version"],
    "Server.models": ["exclude_not_ready"],
    "Server.register_model_repository": ["repository_path", "name_mapping"],
    "Server.unregister_model_repository": ["repository_path"],
    "Server.start": ["wait_until_ready", "polling_interval", "timeout"],
    "Server.unload": ["model", "unload_dependents", "wait_until_unloaded", "polling_interval",
                      "timeout"],
    "Model": ["server", "name", "version", "state", "reason"],
    "Model.infer": ["inference_request", "raise_on_error", "kwargs"],
    "Model.async_infer": ["inference_request", "raise_on_error", "kwargs"],
    "Model.create_request": ["kwargs"],
    "Model.config": ["config_version"],
    "Model.metadata": [], "Model.ready": [], "Model.statistics": [],
    "Model.batch_properties": [], "Model.transaction_properties": [],
    "ResponseIterator": ["model", "request", "user_queue", "raise_on_error"],
    "ResponseIterator.cancel": [],
    "AsyncResponseIterator": ["model", "request", "user_queue", "raise_on_error", "loop"],
    "AsyncResponseIterator.cancel": [],
    "Tensor": ["data_type", "shape", "memory_buffer"],
    "Tensor.from_bytes_array": ["bytes_array"],
    "Tensor.from_string_array": ["string_array"],
    "Tensor.from_dlpack": ["obj"],
    "Tensor.to_bytes_array": [], "Tensor.to_string_array": [], "Tensor.to_host": [],
    "Tensor.to_device": ["device"],
    "MemoryBuffer": ["data_ptr", "memory_type", "memory_type_id", "size", "owner"],
    "MemoryBuffer.from_dlpack": ["owner"],
    "MemoryAllocator.allocate": ["size", "memory_type", "memory_type_id"],
}

DATACLASS_FIELDS = {
    "InferenceRequest": ["model", "request_id", "flags", "correlation_id", "priority", "timeout",
                         "inputs", "parameters", "output_memory_type", "output_memory_allocator",
                         "response_queue"],
    "InferenceResponse": ["model", "request_id", "parameters", "outputs", "error",
                          "classification_label", "final"],
    "Options": [
        "model_repository", "server_id", "model_control_mode", "startup_models",
        "strict_model_config", "rate_limiter_mode", "rate_limiter_resources",
        "pinned_memory_pool_size", "cuda_memory_pool_sizes", "cache_config", "cache_directory",
        "min_supported_compute_capability", "exit_on_error", "strict_readiness", "exit_timeout",
        "buffer_manager_thread_count", "model_load_thread_count", "model_load_retry_count",
        "model_namespacing", "log_file", "log_info", "log_warn", "log_error", "log_format",
        "log_verbose", "metrics", "gpu_metrics", "cpu_metrics", "metrics_interval",
        "backend_directory", "repo_agent_directory", "model_load_device_limits",
        "backend_configuration", "host_policies", "metrics_configuration"],
}
# Fields of ours after the reference's, each with a default (a program
# written for NVIDIA's package never names them).
OUR_FIELDS = {"Options": ["python_backend"]}

ATTRIBUTES = [
    "Tensor.data_ptr", "Tensor.data_type", "Tensor.memory_type", "Tensor.memory_type_id",
    "Tensor.shape", "Tensor.size", "Tensor.memory_buffer",
    "MemoryBuffer.data_ptr", "MemoryBuffer.memory_type", "MemoryBuffer.memory_type_id",
    "MemoryBuffer.size", "MemoryBuffer.owner",
    "MemoryType.CPU", "MemoryType.CPU_PINNED", "MemoryType.GPU",
    "ModelControlMode.NONE", "ModelControlMode.POLL", "ModelControlMode.EXPLICIT",
    "DataType",
]


def resolve(name: str):
    obj = tritonserver
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize("name", sorted(CALLABLES))
def test_callable_signature_matches_the_reference(name):
    target = resolve(name)
    if inspect.isclass(target):
        target = target.__init__
    params = [p for p in inspect.signature(target).parameters.values()
              if p.name != "self" and not p.name.startswith("_")]
    expected = CALLABLES[name]
    assert [p.name for p in params[:len(expected)]] == expected
    # Anything of ours beyond the reference's (e.g. unload's wait_for_unloaded,
    # the spelling of the reference's own example) is optional.
    assert all(p.default is not p.empty for p in params[len(expected):])


@pytest.mark.parametrize("name", sorted(DATACLASS_FIELDS))
def test_dataclass_fields_match_the_reference(name):
    cls = resolve(name)
    fields = dataclasses.fields(cls)
    assert [f.name for f in fields] == DATACLASS_FIELDS[name] + OUR_FIELDS.get(name, [])
    ours = fields[len(DATACLASS_FIELDS[name]):]
    # Ours are optional: each has a default, or a factory that makes one.
    assert all(f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
               for f in ours)


@pytest.mark.parametrize("name", ATTRIBUTES)
def test_documented_attribute_exists(name):
    cls_name, _, attr = name.partition(".")
    cls = resolve(cls_name)
    assert not attr or hasattr(cls, attr) or attr in getattr(cls, "__dataclass_fields__", {})


def test_every_documented_class_is_exported():
    documented = {name.split(".")[0] for name in [*CALLABLES, *DATACLASS_FIELDS, *ATTRIBUTES]}
    documented |= {"MemoryAllocator", "ModelControlMode", "MemoryType"}
    assert documented <= set(tritonserver.__all__)
