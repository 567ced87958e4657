"""Server options: every field of the reference, validated, then applied.

Options is a plain dataclass. ``_apply`` validates a copy (the caller's
object is never mutated) and calls one C setter per field. Validation errors
raise InvalidArgumentError naming the field, before the core is touched; an
error the core itself returns for a value is re-raised (same class) with the
field's name in front.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from functools import partial
from typing import Any, Callable, Iterator, Optional, Union

from tritonserver._enums import InstanceGroupKind, LogFormat, ModelControlMode, RateLimitMode
from tritonserver._errors import InvalidArgumentError, TritonError


@dataclass
class RateLimiterResource:
    """A resource available to the rate limiter on one device (-1: global)."""

    name: str
    count: int
    device: int


@dataclass
class ModelLoadDeviceLimit:
    """Fraction of a device's memory that model loading may use."""

    kind: InstanceGroupKind
    device: int
    fraction: float


@dataclass
class Options:
    """Server options; see the reference for each field.

    Where this package differs from the reference defaults:

    - ``backend_directory`` (default None) names a folder of your own
      backends (``<name>/libtriton_<name>.so``, e.g. built with the SDK:
      docs/backends.md). It is merged with the package's backends and the
      python backend into the folder the core gets; yours win on a name
      clash. None: the package's backends only.
    - ``cache_directory`` (default None) means the caches of the installed
      core (the local response cache ships with it).

    ``backend_configuration``, ``host_policies`` and ``metrics_configuration``
    map a name (backend, policy, metrics group) to its ``{setting: value}``;
    metrics settings that belong to no group go under ``""`` (e.g.
    ``{"": {"summary_latencies": "true"}}``). The core's metrics registry is
    process-wide: give metrics settings to the first server of a process; a
    later server's may not take effect.
    """

    model_repository: Union[str, list[str]] = field(default_factory=list)
    server_id: str = "triton"
    model_control_mode: ModelControlMode = ModelControlMode.NONE
    startup_models: list[str] = field(default_factory=list)
    strict_model_config: bool = True
    rate_limiter_mode: RateLimitMode = RateLimitMode.OFF
    rate_limiter_resources: list[RateLimiterResource] = field(default_factory=list)
    pinned_memory_pool_size: int = 1 << 28
    cuda_memory_pool_sizes: dict[int, int] = field(default_factory=dict)
    cache_config: dict[str, dict[str, Any]] = field(default_factory=dict)
    cache_directory: Optional[str] = None
    min_supported_compute_capability: float = 6.0
    exit_on_error: bool = True
    strict_readiness: bool = True
    exit_timeout: int = 30
    buffer_manager_thread_count: int = 0
    model_load_thread_count: int = 4
    model_load_retry_count: int = 0
    model_namespacing: bool = False
    log_file: Optional[str] = None
    log_info: bool = False
    log_warn: bool = False
    log_error: bool = False
    log_format: LogFormat = LogFormat.DEFAULT
    log_verbose: int = 0
    metrics: bool = True
    gpu_metrics: bool = True
    cpu_metrics: bool = True
    metrics_interval: int = 2000
    backend_directory: Optional[str] = None
    repo_agent_directory: str = "/opt/tritonserver/repoagents"
    model_load_device_limits: list[ModelLoadDeviceLimit] = field(default_factory=list)
    backend_configuration: dict[str, dict[str, str]] = field(default_factory=dict)
    host_policies: dict[str, dict[str, str]] = field(default_factory=dict)
    metrics_configuration: dict[str, dict[str, str]] = field(default_factory=dict)

    def _repositories(self) -> list[str]:
        repos = self.model_repository
        return [repos] if isinstance(repos, str) else list(repos)

    def _validate(self) -> None:
        for f in fields(self):
            _check_field(f.name, getattr(self, f.name))
        if not self._repositories():
            raise InvalidArgumentError("Options.model_repository: at least one path is required")

    def _apply(self, c_options: Any) -> None:
        """Validate, then set every field on a binding ServerOptions. An error
        the core returns for a value names the field it came from."""
        self._validate()
        for name, set_field in self._setters(c_options):
            try:
                set_field()
            except TritonError as e:
                raise type(e)(f"Options.{name}: {e}") from None

    def _setters(self, o: Any) -> Iterator[tuple[str, Callable[[], Any]]]:
        """(field name, call applying it) for every field, in the C API's order."""
        for path in self._repositories():
            yield "model_repository", partial(o.set_model_repository_path, path)
        yield "server_id", partial(o.set_server_id, self.server_id)
        yield "model_control_mode", partial(o.set_model_control_mode,
                                            int(self.model_control_mode))
        for name in self.startup_models:
            yield "startup_models", partial(o.set_startup_model, name)
        yield "strict_model_config", partial(o.set_strict_model_config, self.strict_model_config)
        yield "rate_limiter_mode", partial(o.set_rate_limiter_mode, int(self.rate_limiter_mode))
        for r in self.rate_limiter_resources:
            yield "rate_limiter_resources", partial(o.add_rate_limiter_resource,
                                                    r.name, r.count, r.device)
        yield "pinned_memory_pool_size", partial(o.set_pinned_memory_pool_byte_size,
                                                 self.pinned_memory_pool_size)
        for device, size in self.cuda_memory_pool_sizes.items():
            yield "cuda_memory_pool_sizes", partial(o.set_cuda_memory_pool_byte_size, device, size)
        for cache, config in self.cache_config.items():
            yield "cache_config", partial(o.set_cache_config, cache, json.dumps(config))
        if self.cache_directory is not None:
            yield "cache_directory", partial(o.set_cache_directory, self.cache_directory)
        yield "min_supported_compute_capability", partial(
            o.set_min_supported_compute_capability, float(self.min_supported_compute_capability))
        yield "exit_on_error", partial(o.set_exit_on_error, self.exit_on_error)
        yield "strict_readiness", partial(o.set_strict_readiness, self.strict_readiness)
        yield "exit_timeout", partial(o.set_exit_timeout, self.exit_timeout)
        yield "buffer_manager_thread_count", partial(o.set_buffer_manager_thread_count,
                                                     self.buffer_manager_thread_count)
        yield "model_load_thread_count", partial(o.set_model_load_thread_count,
                                                 self.model_load_thread_count)
        # Always set: left unset, core 2.51 retries a failing load endlessly.
        yield "model_load_retry_count", partial(o.set_model_load_retry_count,
                                                self.model_load_retry_count)
        yield "model_namespacing", partial(o.set_model_namespacing, self.model_namespacing)
        if self.log_file is not None:
            yield "log_file", partial(o.set_log_file, self.log_file)
        yield "log_info", partial(o.set_log_info, self.log_info)
        yield "log_warn", partial(o.set_log_warn, self.log_warn)
        yield "log_error", partial(o.set_log_error, self.log_error)
        yield "log_format", partial(o.set_log_format, int(self.log_format))
        yield "log_verbose", partial(o.set_log_verbose, self.log_verbose)
        yield "metrics", partial(o.set_metrics, self.metrics)
        yield "gpu_metrics", partial(o.set_gpu_metrics, self.gpu_metrics)
        yield "cpu_metrics", partial(o.set_cpu_metrics, self.cpu_metrics)
        yield "metrics_interval", partial(o.set_metrics_interval, self.metrics_interval)
        if self.backend_directory is not None:
            yield "backend_directory", partial(o.set_backend_directory, self.backend_directory)
        yield "repo_agent_directory", partial(o.set_repo_agent_directory,
                                              self.repo_agent_directory)
        for limit in self.model_load_device_limits:
            yield "model_load_device_limits", partial(
                o.set_model_load_device_limit, int(limit.kind), limit.device,
                float(limit.fraction))
        for group, call in (("backend_configuration", o.set_backend_config),
                            ("host_policies", o.set_host_policy),
                            ("metrics_configuration", o.set_metrics_config)):
            for name, settings in getattr(self, group).items():
                for key, value in settings.items():
                    yield group, partial(call, name, key, str(value))


_UINT_FIELDS = {
    "pinned_memory_pool_size", "exit_timeout", "buffer_manager_thread_count",
    "model_load_thread_count", "model_load_retry_count", "log_verbose", "metrics_interval",
}
_BOOL_FIELDS = {
    "strict_model_config", "exit_on_error", "strict_readiness", "model_namespacing",
    "log_info", "log_warn", "log_error", "metrics", "gpu_metrics", "cpu_metrics",
}
_STR_FIELDS = {"server_id", "repo_agent_directory"}
_OPTIONAL_STR_FIELDS = {"cache_directory", "log_file", "backend_directory"}
_ENUM_FIELDS = {
    "model_control_mode": ModelControlMode,
    "rate_limiter_mode": RateLimitMode,
    "log_format": LogFormat,
}
_NESTED_STR_DICT_FIELDS = {"backend_configuration", "host_policies", "metrics_configuration"}


def _fail(name: str, expected: str, value: Any) -> None:
    raise InvalidArgumentError(f"Options.{name}: expected {expected}, got {value!r}")


def _check_field(name: str, value: Any) -> None:
    if name in _UINT_FIELDS:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            _fail(name, "a non-negative int", value)
    elif name in _BOOL_FIELDS:
        if not isinstance(value, bool):
            _fail(name, "a bool", value)
    elif name in _STR_FIELDS:
        if not isinstance(value, str):
            _fail(name, "a str", value)
    elif name in _OPTIONAL_STR_FIELDS:
        if value is not None and not isinstance(value, str):
            _fail(name, "a str or None", value)
    elif name in _ENUM_FIELDS:
        try:
            _ENUM_FIELDS[name](value)
        except ValueError:
            _fail(name, f"a {_ENUM_FIELDS[name].__name__}", value)
    elif name in _NESTED_STR_DICT_FIELDS or name == "cache_config":
        if not isinstance(value, dict) or not all(
                isinstance(k, str) and isinstance(v, dict) for k, v in value.items()):
            _fail(name, "a dict of str to dict", value)
    elif name == "model_repository":
        paths = [value] if isinstance(value, str) else value
        if not isinstance(paths, (list, tuple)) or not all(isinstance(p, str) for p in paths):
            _fail(name, "a str or a list of str", value)
    elif name == "startup_models":
        if not isinstance(value, (list, tuple)) or not all(isinstance(p, str) for p in value):
            _fail(name, "a list of str", value)
    elif name == "min_supported_compute_capability":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            _fail(name, "a float", value)
    elif name == "cuda_memory_pool_sizes":
        if not isinstance(value, dict) or not all(
                isinstance(k, int) and isinstance(v, int) and v >= 0 for k, v in value.items()):
            _fail(name, "a dict of device id to byte size", value)
    elif name == "rate_limiter_resources":
        if not all(isinstance(r, RateLimiterResource) for r in value):
            _fail(name, "a list of RateLimiterResource", value)
    elif name == "model_load_device_limits":
        if not all(isinstance(r, ModelLoadDeviceLimit) for r in value):
            _fail(name, "a list of ModelLoadDeviceLimit", value)
        for limit in value:
            if isinstance(limit.fraction, bool) or not isinstance(limit.fraction, (int, float)) \
                    or not 0.0 <= limit.fraction <= 1.0:
                _fail(name, "fractions between 0.0 and 1.0", limit)
