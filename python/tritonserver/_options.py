"""Server options: every field of the reference, validated, then applied.

Options is a plain dataclass and the one table of the server options: each
field names the binding's ServerOptions setter that applies it (tests check
the binding has exactly these setters). Values are checked against the
fields' annotations before the core is touched (InvalidArgumentError naming
the field); an error the core itself returns for a value is re-raised (same
class) with the field's name in front.
"""

from __future__ import annotations

import enum
import json
import os
import typing
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Callable, Iterable, Literal, Optional, Union, cast

from tritonserver._enums import InstanceGroupKind, LogFormat, ModelControlMode, RateLimitMode
from tritonserver._errors import InvalidArgumentError, InvalidArgumentTypeError, TritonError


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


def _option(default: Any = MISSING, *, setter: Optional[str],
            args: Optional[Callable[[Any], Iterable[tuple[Any, ...]]]] = None,
            factory: Any = MISSING, check: Any = None) -> Any:
    """A field applied by the binding's `setter`, called once per tuple that
    `args(value)` gives (default: once, with the value; not at all for None);
    a field with no setter is the package's own (read where it is used).
    Its value is checked against its annotation, or against `check`."""
    metadata = {"setter": setter, "args": args or _scalar, "check": check}
    if factory is not MISSING:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


PYTHON_BACKEND_ENV = "TRITONSERVER_PYTHON_BACKEND"


def python_backend_default() -> Any:
    """Options.python_backend's default: TRITONSERVER_PYTHON_BACKEND, else
    "stub" (another value fails the option's check at start, naming it)."""
    return os.environ.get(PYTHON_BACKEND_ENV) or "stub"


def _scalar(value: Any) -> Iterable[tuple[Any, ...]]:
    if value is None:
        return ()
    if isinstance(value, enum.Enum):
        return ((int(cast(enum.IntEnum, value)),),)  # the options' enums are int enums
    return ((value,),)


def _each(value: Any) -> Iterable[tuple[Any, ...]]:
    return ((item,) for item in ([value] if isinstance(value, str) else value))


def _settings(value: dict[str, dict[str, Any]]) -> Iterable[tuple[Any, ...]]:
    return ((name, key, str(v)) for name, group in value.items() for key, v in group.items())


# Named settings: their values are given to the core as text (str(value)).
_SETTINGS = dict[str, dict[str, Any]]


@dataclass
class Options:
    """Server options; see the reference for each field.

    Where this package differs from the reference defaults:

    - ``strict_model_config`` is False, as in NVIDIA's package since r24.05
      and in the executable: a backend may complete a model's configuration
      (or write it whole) when the model has no config.pbtxt.
    - ``backend_directory`` (default None) names a folder of your own
      backends (``<name>/libtriton_<name>.so``, e.g. built with the SDK:
      docs/backends.md). It is merged with the package's backends and the
      python backend into the folder the core gets; yours win on a name
      clash. None: the package's backends only.
    - ``cache_directory`` (default None) means the caches of the installed
      core (the local response cache ships with it).
    - ``python_backend`` (not in the reference; default ``"stub"``, or the
      environment's ``TRITONSERVER_PYTHON_BACKEND``, so that a program
      written for NVIDIA's package runs its Python models in-process
      unchanged): where ``backend: "python"`` models (and python-based
      backends) run: ``"stub"``, Triton's python backend, a stub process
      per instance; ``"inprocess"``, this interpreter (docs/inprocess.md).
      A model's ``runtime: "libtriton_python_inprocess.so"`` or
      ``"libtriton_python_stub.so"`` picks one for that model.

    ``backend_configuration``, ``host_policies`` and ``metrics_configuration``
    map a name (backend, policy, metrics group) to its ``{setting: value}``;
    metrics settings that belong to no group go under ``""`` (e.g.
    ``{"": {"summary_latencies": "true"}}``). The core's metrics registry is
    process-wide: give metrics settings to the first server of a process; a
    later server's may not take effect.
    """

    model_repository: Union[str, list[str]] = _option(
        setter="set_model_repository_path", args=_each, factory=list)
    server_id: str = _option("triton", setter="set_server_id")
    model_control_mode: ModelControlMode = _option(ModelControlMode.NONE,
                                                   setter="set_model_control_mode")
    startup_models: list[str] = _option(setter="set_startup_model", args=_each, factory=list)
    strict_model_config: bool = _option(False, setter="set_strict_model_config")
    rate_limiter_mode: RateLimitMode = _option(RateLimitMode.OFF, setter="set_rate_limiter_mode")
    rate_limiter_resources: list[RateLimiterResource] = _option(
        setter="add_rate_limiter_resource", factory=list,
        args=lambda v: ((r.name, r.count, r.device) for r in v))
    pinned_memory_pool_size: int = _option(1 << 28, setter="set_pinned_memory_pool_byte_size")
    cuda_memory_pool_sizes: dict[int, int] = _option(
        setter="set_cuda_memory_pool_byte_size", factory=dict, args=lambda v: v.items())
    cache_config: dict[str, dict[str, Any]] = _option(
        setter="set_cache_config", factory=dict,
        args=lambda v: ((name, json.dumps(config)) for name, config in v.items()))
    cache_directory: Optional[str] = _option(None, setter="set_cache_directory")
    min_supported_compute_capability: float = _option(
        6.0, setter="set_min_supported_compute_capability", args=lambda v: ((float(v),),))
    exit_on_error: bool = _option(True, setter="set_exit_on_error")
    strict_readiness: bool = _option(True, setter="set_strict_readiness")
    exit_timeout: int = _option(30, setter="set_exit_timeout")
    buffer_manager_thread_count: int = _option(0, setter="set_buffer_manager_thread_count")
    model_load_thread_count: int = _option(4, setter="set_model_load_thread_count")
    # Always set: left unset, core 2.51 retries a failing load endlessly.
    model_load_retry_count: int = _option(0, setter="set_model_load_retry_count")
    model_namespacing: bool = _option(False, setter="set_model_namespacing")
    log_file: Optional[str] = _option(None, setter="set_log_file")
    log_info: bool = _option(False, setter="set_log_info")
    log_warn: bool = _option(False, setter="set_log_warn")
    log_error: bool = _option(False, setter="set_log_error")
    log_format: LogFormat = _option(LogFormat.DEFAULT, setter="set_log_format")
    log_verbose: int = _option(0, setter="set_log_verbose")
    metrics: bool = _option(True, setter="set_metrics")
    gpu_metrics: bool = _option(True, setter="set_gpu_metrics")
    cpu_metrics: bool = _option(True, setter="set_cpu_metrics")
    metrics_interval: int = _option(2000, setter="set_metrics_interval")
    backend_directory: Optional[str] = _option(None, setter="set_backend_directory")
    repo_agent_directory: str = _option("/opt/tritonserver/repoagents",
                                        setter="set_repo_agent_directory")
    model_load_device_limits: list[ModelLoadDeviceLimit] = _option(
        setter="set_model_load_device_limit", factory=list,
        args=lambda v: ((int(x.kind), x.device, float(x.fraction)) for x in v))
    backend_configuration: dict[str, dict[str, str]] = _option(
        setter="set_backend_config", factory=dict, args=_settings, check=_SETTINGS)
    host_policies: dict[str, dict[str, str]] = _option(
        setter="set_host_policy", factory=dict, args=_settings, check=_SETTINGS)
    metrics_configuration: dict[str, dict[str, str]] = _option(
        setter="set_metrics_config", factory=dict, args=_settings, check=_SETTINGS)
    python_backend: Literal["stub", "inprocess"] = _option(setter=None,
                                                           factory=python_backend_default)

    def _repositories(self) -> list[str]:
        repos = self.model_repository
        return [repos] if isinstance(repos, str) else list(repos)

    def _validate(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in fields(self):
            _check(f.name, getattr(self, f.name), f.metadata["check"] or hints[f.name])
        if not self._repositories():
            raise InvalidArgumentError("Options.model_repository: at least one path is required")

    def _apply(self, c_options: Any) -> None:
        """Validate, then apply every field through its setter, in the order
        of the fields. An error the core returns for a value names the field
        it came from."""
        self._validate()
        for f in fields(self):
            if f.metadata["setter"] is None:
                continue  # the package's own setting, not the core's
            setter = getattr(c_options, f.metadata["setter"])
            for args in f.metadata["args"](getattr(self, f.name)):
                try:
                    setter(*args)
                except TritonError as e:
                    raise type(e)(f"Options.{f.name}: {e}") from None


def repositories_of(options: Options) -> list[str]:
    """The model repositories `options` names, as a list."""
    return options._repositories()


def validate_options(options: Options) -> None:
    """Check every field of `options` against its annotation (before the
    core is touched)."""
    options._validate()


def apply_options(options: Options, c_options: Any) -> None:
    """Validate `options`, then set each field on the binding's
    ServerOptions `c_options`; an error the core returns names the field."""
    options._apply(c_options)


def apply_log_settings(**settings: Any) -> None:
    """Set the core's logger now: ``log_info``, ``log_warn``, ``log_error``,
    ``log_verbose`` and ``log_format`` as Options has them. The logger is
    process-wide: a server's options set it at start, and these set it
    again (the frontends' logging extension)."""
    from tritonserver._c import triton_bindings

    c_options = triton_bindings.ServerOptions()
    by_name = {f.name: f for f in fields(Options)}
    for name, value in settings.items():
        if name not in _LOG_FIELDS:
            raise InvalidArgumentError(f"not a log setting: {name!r}")
        getattr(c_options, by_name[name].metadata["setter"])(
            int(value) if name == "log_format" else value)


_LOG_FIELDS = ("log_info", "log_warn", "log_error", "log_verbose", "log_format")


@dataclass
class ServeOptions(Options):
    """What ``serve`` starts its server with: Options, and the settings of
    Triton's executable that NVIDIA's package has no field for. Not part of
    the public API (Options keeps the reference's fields).

    - ``model_config_name``: the executable's ``--model-config-name``; a
      model with ``configs/<name>.pbtxt`` is configured by that file instead
      of its config.pbtxt.
    """

    model_config_name: Optional[str] = _option(None, setter="set_model_config_name")


def setter_names() -> set[str]:
    """The binding setters the fields use (tests/binding compares them with
    the binding's)."""
    return {f.metadata["setter"] for f in fields(ServeOptions) if f.metadata["setter"]}


# How a value meets a field's annotation; a wrong type outranks a wrong value.
_FITS, _OUT_OF_RANGE, _WRONG_TYPE = 0, 1, 2


def _fail(name: str, expected: str, value: Any, how: int) -> None:
    """A wrong type raises an error that is also a TypeError (what programs
    written for NVIDIA's package catch); a wrong value stays a ValueError."""
    cls = InvalidArgumentTypeError if how == _WRONG_TYPE else InvalidArgumentError
    raise cls(f"Options.{name}: expected {expected}, got {value!r}")


def _check(name: str, value: Any, hint: Any) -> None:
    """Check `value` against the field's annotation `hint`. Every int of the
    options is a count, size or time: non-negative."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Union:
        if value is None and type(None) in args:
            return
        kinds = [a for a in args if a is not type(None)]
        how = min(_fit(value, k) for k in kinds)
        if how != _FITS:
            _fail(name, " or ".join([_describe(k) for k in kinds] +
                                    ["None"] * (type(None) in args)), value, how)
        return
    how = _fit(value, hint)
    if how != _FITS:
        _fail(name, _describe(hint), value, how)
    elif hint is ModelLoadDeviceLimit or (origin is list and args[0] is ModelLoadDeviceLimit):
        for limit in value if origin is list else [value]:
            fraction = limit.fraction
            if isinstance(fraction, bool) or not isinstance(fraction, (int, float)):
                _fail(name, "fractions between 0.0 and 1.0", limit, _WRONG_TYPE)
            if not 0.0 <= fraction <= 1.0:
                _fail(name, "fractions between 0.0 and 1.0", limit, _OUT_OF_RANGE)


def _fit(value: Any, hint: Any) -> int:
    """_FITS, _OUT_OF_RANGE (the right type, a wrong value) or _WRONG_TYPE."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return _FITS
    if origin is Literal:
        if not any(isinstance(value, type(a)) for a in args):
            return _WRONG_TYPE
        return _FITS if value in args else _OUT_OF_RANGE
    if hint is bool:
        return _FITS if isinstance(value, bool) else _WRONG_TYPE
    if hint is int:
        if not isinstance(value, int) or isinstance(value, bool):
            return _WRONG_TYPE
        return _FITS if value >= 0 else _OUT_OF_RANGE
    if hint is float:
        return _FITS if isinstance(value, (int, float)) and not isinstance(value, bool) \
            else _WRONG_TYPE
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        if isinstance(value, hint):
            return _FITS
        if not isinstance(value, int) or isinstance(value, bool):
            return _WRONG_TYPE
        try:
            hint(value)
        except ValueError:
            return _OUT_OF_RANGE
        return _FITS
    if origin is list:
        if not isinstance(value, (list, tuple)):
            return _WRONG_TYPE
        return max((_fit(v, args[0]) for v in value), default=_FITS)
    if origin is dict:
        if not isinstance(value, dict):
            return _WRONG_TYPE
        return max((max(_fit(k, args[0]), _fit(v, args[1])) for k, v in value.items()),
                   default=_FITS)
    return _FITS if isinstance(value, hint) else _WRONG_TYPE


def _describe(hint: Any) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is int:
        return "a non-negative int"
    if origin is Literal:
        return " or ".join(repr(a) for a in args)
    if origin is list:
        return f"a list of {_describe(args[0]).split(' ', 1)[-1]}"
    if origin is dict:
        return f"a dict of {_describe(args[0]).split(' ', 1)[-1]} to " \
               f"{_describe(args[1]).split(' ', 1)[-1]}"
    name = getattr(hint, "__name__", str(hint))
    return f"an {name}" if name[0] in "AEIOU" else f"a {name}"
