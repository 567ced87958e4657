"""Server: the in-process Triton server."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Optional, cast

from tritonserver import _instances, _load_reasons, _runtime
from tritonserver._c import triton_bindings as _bindings
from tritonserver._enums import MetricFormat, ModelControlMode, ModelIndexFlag
from tritonserver._errors import (InternalError, InvalidArgumentError, InvalidArgumentTypeError,
                                  TritonError, UnavailableError, UnsupportedError)
from tritonserver._metrics import prometheus_to_json
from tritonserver._model import Model
from tritonserver._options import Options

if TYPE_CHECKING:
    from tritonserver._trace import Tracing

_server_ids = itertools.count()
# How long a stop waits after a reload (Server._wait_for_replaced_models).
_REPLACED_MODEL_GRACE_S = 1.0


class ModelDictionary(dict[tuple[str, int], Model]):
    """What Server.models() returns: models keyed by (name, version). A bare
    name answers too (``models["identity"]``, ``"identity" in models``,
    ``models.get("identity")``): the model at the version the server picks
    (-1). Iteration gives the (name, version) keys, as a dict's does."""

    def __getitem__(self, key: Any) -> Model:
        if isinstance(key, str):
            # The version the server picks (-1), with the state and reason of
            # the entry that stands for it: the newest ready version, else
            # the newest one (a model that failed has only failed entries).
            entries = [model for (name, _), model in self.items() if name == key]
            if not entries:
                raise KeyError(f"unknown model: {key!r}")
            ready = [model for model in entries if model.state == "READY"]
            shown = max(ready or entries, key=lambda model: model.version)
            return Model(shown._server, key, -1, shown.state, shown.reason)
        try:
            return super().__getitem__(key)
        except KeyError:
            raise KeyError(f"unknown model: {key!r}") from None

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            return any(name == key for name, _ in self.keys())
        return super().__contains__(key)

    def get(self, key: Any, default: Any = None) -> Any:
        return self[key] if key in self else default



class Server:
    """An in-process Triton Inference Server.

    ``Server(options)`` or ``Server(model_repository=..., ...)`` with the
    fields of Options as keywords. Nothing happens until start(). Used as a
    context manager, it starts on entry (if not started) and stops on exit.
    """

    def __init__(self, options: Optional[Options] = None, **kwargs: Any):
        if options is not None and kwargs:
            raise InvalidArgumentError("pass either an Options object or keyword arguments, not both")
        if options is None:
            try:
                options = Options(**kwargs)
            except TypeError as e:  # an unknown keyword
                raise InvalidArgumentTypeError(str(e)) from None
        elif not isinstance(options, Options):
            raise InvalidArgumentTypeError(
                f"options must be Options, not {type(options).__name__}")
        self.options = options
        self._server: Optional[_bindings.Server] = None
        # Set by start(): the options the core got (see _plan_startup), the
        # repositories registered since, and the loads under way.
        self._core_options: Optional[Options] = None
        self._registered: list[tuple[str, dict[str, str]]] = []
        self._loads = 0
        self._loads_lock = threading.Lock()
        self._failed_reloads = 0
        self._last_reload = -_REPLACED_MODEL_GRACE_S
        # Models that failed to load at start, with the reason (for
        # start(wait_until_ready=True) and the serve command).
        self._startup_failures: dict[str, str] = {}

    # ---- Lifecycle ---------------------------------------------------------------

    def start(self, wait_until_ready: bool = False, polling_interval: float = 0.1,
              timeout: Optional[float] = None) -> "Server":
        """Start the server (loading models per the control mode)."""
        if self._server is not None:
            raise InvalidArgumentError("the server is already started")
        options = dataclasses.replace(self.options)  # never mutate the caller's
        options._validate()
        core = _runtime.ensure_core_loaded()
        _runtime.prepare_options(options, core, next(_server_ids))
        later = self._plan_startup(options)
        self._registered = []
        self._failed_reloads = 0
        self._last_reload = -_REPLACED_MODEL_GRACE_S
        self._startup_failures = {}
        self._server = self._new_core_server(options)
        self._core_options = options
        if ModelControlMode(options.model_control_mode) == ModelControlMode.POLL:
            self._check_polled_models()
        else:
            self._load_after_start(later)
        if wait_until_ready:
            deadline = None if timeout is None else time.monotonic() + timeout
            while not self.ready():
                if self._startup_failures and self.options.model_control_mode != \
                        ModelControlMode.POLL:
                    # Nothing loads later in NONE and EXPLICIT mode by itself:
                    # strict readiness can no longer come.
                    raise UnavailableError(
                        "the server will not become ready (strict_readiness), models "
                        "failed to load:" + _load_reasons.failure_lines(self._startup_failures))
                if deadline is not None and time.monotonic() >= deadline:
                    raise UnavailableError(f"the server was not ready within {timeout} s"
                                           + (": " + _load_reasons.failure_lines(self._startup_failures)
                                              if self._startup_failures else ""))
                time.sleep(polling_interval)
        return self

    def stop(self) -> "Server":
        """Stop the server and unload its models.

        Requests in flight finish first, waiting up to Options.exit_timeout
        seconds. If work is still running then, this raises UnavailableError;
        the core finishes that work in the background (the 2.51 core cannot
        safely free a server in that state: it is freed at interpreter exit,
        after waiting up to exit_timeout again for that work). Either way the
        server is stopped afterwards.
        """
        server, self._server = self._server, None
        if server is not None:
            try:
                self._stop_core(server)
            finally:
                # Every trace is finished once the core stopped: the files
                # get what is left (the settings end with the server).
                tracing = self.__dict__.pop("_trace", None)
                if tracing is not None:
                    tracing.close()
        return self

    def _stop_core(self, server: _bindings.Server) -> None:
        try:
            gone = self._unload_all(server)
            if gone is None:  # POLL mode: the core unloads and waits itself
                server.stop()
            elif gone:  # nothing left to wait for, but a failed reload's stale entry
                self._wait_for_replaced_models()
                server.stop(models_gone=True,
                            exit_timeout_s=0 if self._failed_reloads else None)
            else:  # the exit timeout is spent already: the core gives up at once
                server.stop(exit_timeout_s=0)
        except UnavailableError:
            _runtime.finish_at_exit(self.options.exit_timeout)  # the work goes on meanwhile
            raise

    def __enter__(self) -> "Server":
        if self._server is None:
            try:
                self.start(wait_until_ready=True)
            except BaseException:
                self.stop()  # the with block never runs, so its exit would not stop it
                raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __del__(self) -> None:
        try:
            self.stop()
        except Exception:
            pass

    # ---- Health and metadata -----------------------------------------------------------

    def live(self) -> bool:
        """Whether the server is live; InvalidArgumentError if it is not started."""
        return self._handle().is_live()

    def ready(self) -> bool:
        """Whether the server is ready; InvalidArgumentError if it is not started."""
        return self._handle().is_ready()

    def metadata(self) -> dict[str, Any]:
        return cast("dict[str, Any]", json.loads(self._handle().metadata()))

    def metrics(self, metric_format: MetricFormat = MetricFormat.PROMETHEUS) -> str:
        """Server and model metrics as a str: Prometheus text, or with
        MetricFormat.JSON one JSON object keyed by metric family (converted
        by this package from the core's text; see tritonserver._metrics)."""
        if metric_format == MetricFormat.JSON:
            return prometheus_to_json(self._handle().metrics(int(MetricFormat.PROMETHEUS)))
        try:
            metric_format = MetricFormat(metric_format)
        except ValueError:
            raise InvalidArgumentError(
                f"metric_format: expected a MetricFormat, got {metric_format!r}") from None
        return self._handle().metrics(int(metric_format))

    # ---- Models ---------------------------------------------------------------------

    def model(self, model_name: str, model_version: int = -1) -> Model:
        """A Model handle (not validated until used)."""
        self._handle()
        return Model(self, model_name, model_version)

    def models(self, exclude_not_ready: bool = False) -> ModelDictionary:
        """Known models, keyed by (name, version); a bare name answers too."""
        flags = int(ModelIndexFlag.READY) if exclude_not_ready else 0
        index = json.loads(self._handle().model_index(flags))
        models = ModelDictionary()
        for entry in index:
            version = int(entry["version"]) if entry.get("version") else -1
            model = Model(self, entry["name"], version, entry.get("state"), entry.get("reason"))
            models[(model.name, model.version)] = model
        return models

    def load(self, model_name: str, parameters: Optional[dict[str, Any]] = None) -> Model:
        """Load (or reload) a model; returns its handle."""
        handle = self._handle()
        self._require_model_control()
        _runtime.check_model_loadable(self.options, model_name, parameters)
        asked = parameters
        parameters = self._one_instance(model_name, parameters) or parameters
        serving = self._serving(model_name)
        with self._loads_lock:
            self._loads += 1
        try:
            self._load_explained(handle, model_name, parameters, asked)
        except TritonError:
            # A reload that fails while a version serves leaves the core an
            # entry that its stop waits on (docs/reliability.md).
            self._failed_reloads += serving
            raise
        finally:
            with self._loads_lock:
                self._loads -= 1
        if serving:  # the version it replaced is deleted on a core thread
            self._last_reload = time.monotonic()
        return Model(self, model_name)

    def unload(self, model: Any, unload_dependents: bool = False,
               wait_until_unloaded: bool = False, polling_interval: float = 0.1,
               timeout: Optional[float] = None, *, wait_for_unloaded: bool = False) -> None:
        """Unload a model (by name or Model).

        ``wait_for_unloaded`` is accepted as another name of
        ``wait_until_unloaded``: the reference's own example uses it.
        """
        wait_until_unloaded = wait_until_unloaded or wait_for_unloaded
        name = model.name if isinstance(model, Model) else model
        handle = self._handle()
        self._require_model_control()
        handle.unload_model(name, unload_dependents)
        if wait_until_unloaded:
            deadline = None if timeout is None else time.monotonic() + timeout
            while any(n == name and m.state not in ("UNAVAILABLE", None)
                      for (n, _), m in self.models().items()):
                if deadline is not None and time.monotonic() >= deadline:
                    raise UnavailableError(f"model '{name}' was not unloaded within {timeout} s")
                time.sleep(polling_interval)

    def poll_model_repository(self) -> None:
        self._handle().poll_model_repository()

    def register_model_repository(self, repository_path: str,
                                  name_mapping: Optional[dict[str, str]] = None) -> None:
        handle = self._handle()
        self._require_model_control("repository registration")
        path = os.fspath(repository_path)
        handle.register_model_repository(path, name_mapping or {})
        self._registered.append((path, dict(name_mapping or {})))

    def unregister_model_repository(self, repository_path: str) -> None:
        handle = self._handle()
        self._require_model_control("repository unregistration")
        path = os.fspath(repository_path)
        handle.unregister_model_repository(path)
        self._registered = [(p, m) for p, m in self._registered if p != path]

    def register_model(self, name: str, model: Any, **settings: Any) -> Model:
        """Serve a tritonserver.PythonModel (class or object) as model `name`,
        run in this process. Settings: inputs, outputs ({name: (dtype, dims)}),
        max_batch_size, dynamic_batching, instance_count, decoupled,
        sequence_batching, parameters, config. Before start() in any model
        control mode, or on a running EXPLICIT-mode server (docs/inprocess.md)."""
        from tritonserver._inprocess._register import register_model

        return register_model(self, name, model, **settings)

    # ---- System shared memory (tritonserver._shared_memory) ------------------------------

    def register_system_shared_memory(self, name: str, key: str, byte_size: int,
                                      offset: int = 0) -> None:
        """Map ``byte_size`` bytes at ``offset`` of POSIX shared memory object
        ``key`` (as shm_open names it) as region ``name``: for this process's
        requests and every network frontend of this server (Triton's
        system shared memory extension). AlreadyExistsError if ``name`` is taken."""
        self._shared_memory().register(name, key, byte_size, offset)

    def unregister_system_shared_memory(self, name: Optional[str] = None) -> None:
        """Unregister region ``name`` (every region when None; an unknown name
        is no error). Requests in flight keep using the region's mapping."""
        self._shared_memory().unregister(name)

    def system_shared_memory_status(self, name: Optional[str] = None) -> list[dict[str, Any]]:
        """``[{"name", "key", "offset", "byte_size"}]`` for region ``name``
        (NotFoundError if unknown), or for every region."""
        return cast("list[dict[str, Any]]", self._shared_memory().status(name))

    def system_shared_memory_tensor(self, name: str, data_type: Any, shape: Any,
                                    offset: int = 0, byte_size: Optional[int] = None) -> Any:
        """A Tensor over region ``name``'s bytes at ``offset``, in place: an
        input for Model.infer that the core reads from the region."""
        from tritonserver._shared_memory import region_tensor

        return region_tensor(self._shared_memory(), name, data_type, tuple(shape), offset,
                             byte_size)

    def system_shared_memory_outputs(self, placements: dict[str, Any]) -> Any:
        """A MemoryAllocator (an InferenceRequest's output_memory_allocator)
        that writes the named outputs into regions: ``{output: region name, or
        (region, offset, byte_size)}``; other outputs go to host memory."""
        from tritonserver._shared_memory import SystemSharedMemoryOutputs

        return SystemSharedMemoryOutputs(self._shared_memory(), placements)

    # ---- Trace settings (tritonserver._trace) ---------------------------------------------

    def configure_tracing(self, trace_file: str = "", trace_level: Any = ("OFF",),
                          trace_rate: int = 1000, trace_count: int = -1,
                          log_frequency: int = 0) -> dict[str, Any]:
        """Set the startup trace settings, as the executable's ``--trace-config``
        flags do: the global setting, and what a cleared (None) global field
        returns to; drops every model's setting. ``trace_level``: "OFF",
        "TIMESTAMPS", "TENSORS" or a list of them. Returns the global setting
        (as trace_settings()). Traces are written as Triton writes them
        (docs/serving.md, "Tracing")."""
        from tritonserver._trace import TENSORS, TIMESTAMPS

        names = [trace_level] if isinstance(trace_level, str) else list(trace_level)
        level = 0
        for name in names:
            if name not in ("OFF", "TIMESTAMPS", "TENSORS"):
                raise InvalidArgumentError(
                    f"trace_level must be OFF, TIMESTAMPS or TENSORS, got {name!r}")
            level |= {"OFF": 0, "TIMESTAMPS": TIMESTAMPS, "TENSORS": TENSORS}[name]
        if "OFF" in names:
            level = 0
        for key, value in (("trace_rate", trace_rate), ("trace_count", trace_count),
                           ("log_frequency", log_frequency)):
            if isinstance(value, bool) or not isinstance(value, int) or \
                    not -1 <= value < (1 << 32) or (value < 0 and key != "trace_count"):
                raise InvalidArgumentError(f"{key} must be an int in range, got {value!r}")
        if not isinstance(trace_file, str):
            raise InvalidArgumentTypeError("trace_file must be a str")
        self._tracing().configure(trace_file, level, trace_rate, trace_count, log_frequency)
        return self.trace_settings()

    def trace_settings(self, model_name: Optional[str] = None) -> dict[str, Any]:
        """The trace setting in force for ``model_name`` (the global one when
        None), as Triton's /v2/trace/setting answers: values are strings,
        trace_level a list of them."""
        self._check_traced_model(model_name)
        return self._tracing().settings(model_name)

    def update_trace_settings(self, settings: dict[str, Any],
                              model_name: Optional[str] = None) -> dict[str, Any]:
        """Change the global trace setting, or ``model_name``'s, as a POST to
        /v2/trace/setting does (same keys and values; None clears a field);
        returns the setting now in force. Numbers may be given as ints and
        trace_level as one str here. The trace file is set by configure_tracing."""
        from tritonserver._trace import parse_http

        if not isinstance(settings, dict):
            raise InvalidArgumentTypeError("settings must be a dict")
        self._check_traced_model(model_name)
        body = {key: (str(value) if isinstance(value, int) and not isinstance(value, bool)
                      else [value] if key == "trace_level" and isinstance(value, str)
                      else value)
                for key, value in settings.items()}
        self._tracing().update(model_name, parse_http(body))
        return self._tracing().settings(model_name)

    def _check_traced_model(self, model_name: Optional[str]) -> None:
        if model_name and not self._handle().model_is_ready(model_name, -1):
            raise InvalidArgumentError(f"Request for unknown model : {model_name}")

    def _tracing(self) -> "Tracing":
        """This server's trace settings, made on first use (tritonserver._trace)."""
        tracing = self.__dict__.get("_trace")
        if tracing is None:
            from tritonserver._trace import Tracing

            tracing = self.__dict__.setdefault("_trace", Tracing())
        return cast("Tracing", tracing)

    def _shared_memory(self) -> Any:
        """This server's SharedMemoryRegistry, made at first use."""
        registry = self.__dict__.get("_shm_registry")
        if registry is None:
            from tritonserver._shared_memory import SharedMemoryRegistry

            registry = self.__dict__.setdefault("_shm_registry", SharedMemoryRegistry())
        return registry

    # ---- Internal --------------------------------------------------------------------

    # The core runs in EXPLICIT mode whenever the user asks for NONE or
    # EXPLICIT: the package then loads itself the models that must get one
    # core instance (tritonserver._instances), and stop() can unload every
    # model before it stops the core, which then has nothing to wait for.
    # In NONE mode the package refuses what the core would refuse.

    def _plan_startup(self, options: Options) -> list[tuple[str, Optional[dict[str, Any]]]]:
        """Sets the core's mode and startup models on `options` (the core's
        copy); returns the models to load once the core runs, in order, with
        their load parameters.

        Under NONE and EXPLICIT the core starts with no model and the
        package loads each one: each load then fails with its own reason,
        where the core's startup loads fail the start with "failed to load
        all models" and nothing else (the reasons go to its log)."""
        mode = ModelControlMode(options.model_control_mode)
        if mode == ModelControlMode.POLL:
            if options.exit_on_error and all(os.path.isdir(r) for r in options._repositories()):
                # The package fails the start itself, naming the models
                # (_check_polled_models). Repositories that are not local
                # folders keep the core's check: it says what is wrong.
                options.exit_on_error = False
            return []
        # A name in several repositories is one load (the core then finds
        # them all, or refuses a name that is not unique).
        names = list(dict.fromkeys(_runtime.models_loaded_at_start(options)))
        options.model_control_mode = ModelControlMode.EXPLICIT
        options.startup_models = []
        return [(name, self._one_instance(name, None, options)) for name in names]

    def _new_core_server(self, options: Options) -> _bindings.Server:
        c_options = _bindings.ServerOptions()
        options._apply(c_options)
        server = _bindings.Server(c_options)
        if options.exit_on_error or not self.options.exit_on_error or server.is_live():
            return server
        # POLL mode with the core's exit_on_error off (_plan_startup): it
        # failed before any model, and logged why only. Started again with
        # exit_on_error on, it fails the same way and raises the reason.
        server.stop(exit_timeout_s=0)
        c_options.set_exit_on_error(True)
        return _bindings.Server(c_options)

    def _load_after_start(self, later: list[tuple[str, Optional[dict[str, Any]]]]) -> None:
        handle = self._handle()
        options = cast(Options, self._core_options)

        def load(item: tuple[str, Optional[dict[str, Any]]]) -> Optional[str]:
            try:
                self._load_explained(handle, item[0], item[1], None)
                return None
            except TritonError as e:
                return str(e)

        # The models in parallel, as the core loads its startup models; then
        # the ensembles, one by one: loaded first, they would load the models
        # they use as the repository has them.
        ensembles = {name for name, _ in later
                     if _instances.is_ensemble(self._model_dirs(name, options), name)}
        first = [item for item in later if item[0] not in ensembles]
        rest = [item for item in later if item[0] in ensembles]
        threads = max(1, min(len(first), options.model_load_thread_count or 1))
        with ThreadPoolExecutor(threads, thread_name_prefix="tritonserver-load") as pool:
            errors = list(pool.map(load, first)) + [load(item) for item in rest]
        self._startup_failures = {name: why for (name, _), why in zip(first + rest, errors)
                                  if why is not None}
        self._fail_start_if_asked()

    def _check_polled_models(self) -> None:
        """POLL mode: the models the core failed to load at start, with why."""
        for entry in json.loads(self._handle().model_index(0)):
            name = entry["name"]
            if entry.get("state") == "READY" or name in self._startup_failures:
                continue
            self._startup_failures[name] = entry.get("reason") or (
                f"failed to load '{name}', {_load_reasons.POLL_FAILURE}: "
                + self._explain(name, None))
        self._fail_start_if_asked()

    def _fail_start_if_asked(self) -> None:
        if self._startup_failures and self.options.exit_on_error:
            try:
                self.stop()
            finally:
                raise InternalError("failed to load all models:"
                                    + _load_reasons.failure_lines(self._startup_failures))

    def _load_explained(self, handle: _bindings.Server, name: str,
                        parameters: Optional[dict[str, Any]],
                        asked: Optional[dict[str, Any]]) -> None:
        """Load with the core's error, and the reason where it gives none."""
        try:
            handle.load_model(name, parameters)
        except TritonError as e:
            if _load_reasons.POLL_FAILURE not in str(e):
                raise
            raise type(e)(_load_reasons.with_reason(str(e), self._explain(name, asked))) \
                from None
        except RuntimeError as e:
            # A C++ exception the 2.51 core let out of its C API (a "file:"
            # parameter whose name the file system refuses: "File name too
            # long"); pybind11 makes it a RuntimeError. Triton answers INTERNAL.
            raise InternalError(f"failed to load '{name}': {e}") from None

    def _explain(self, name: str, parameters: Optional[dict[str, Any]]) -> str:
        options = cast(Options, self._core_options)
        return _load_reasons.explain(
            name, self._model_dirs(name, options), options._repositories()
            + [path for path, _ in self._registered], parameters,
            strict=bool(options.strict_model_config), namespacing=bool(options.model_namespacing))

    def _one_instance(self, name: str, parameters: Optional[dict[str, Any]],
                      options: Optional[Options] = None) -> Optional[dict[str, Any]]:
        """Load parameters giving `name` one core instance (or None)."""
        options = options or self._core_options
        if options is None or options.model_control_mode == ModelControlMode.POLL:
            return None
        return _instances.load_parameters(
            self._model_dirs(name, options), [cast(str, options.backend_directory)], name,
            parameters, autocomplete=not options.strict_model_config)

    def _model_dirs(self, name: str, options: Options) -> list[str]:
        dirs = [os.path.join(repo, name) for repo in options._repositories()]
        for path, mapping in self._registered:
            dirs += [os.path.join(path, sub) for sub, model in mapping.items() if model == name]
            if name not in mapping.values():
                dirs.append(os.path.join(path, name))
        return dirs

    def _wait_for_replaced_models(self) -> None:
        """Core 2.51 deletes a model version that a reload replaced in a
        detached thread of its own, which nothing reports the end of; its own
        stop waits at least a second once any model was live. So a stop soon
        after a reload waits until that second has passed. Any other waits a
        few milliseconds: the thread that deleted an unloaded model still
        updates the core's bookkeeping just after the model shows as gone."""
        time.sleep(max(self._last_reload + _REPLACED_MODEL_GRACE_S - time.monotonic(), 0.005))

    def _serving(self, name: str) -> bool:
        try:
            return self.model(name).ready()
        except TritonError:
            return False

    def _require_model_control(self, what: str = "") -> None:
        """What the core refuses in NONE mode (it runs in EXPLICIT mode)."""
        if ModelControlMode(self.options.model_control_mode) != ModelControlMode.NONE:
            return
        if what:
            raise UnsupportedError(f"{what} is not allowed if model control mode is not EXPLICIT")
        raise UnavailableError("explicit model load / unload is not allowed if polling is enabled")

    def _unload_all(self, server: _bindings.Server) -> Optional[bool]:
        """Unloads every model (EXPLICIT core only) and waits, up to the exit
        timeout, until none is left and no request is in flight; returns
        whether that happened (then the core's stop has nothing to wait
        for), or None when the core must do it (POLL mode, or the index
        cannot be read)."""
        options = self._core_options
        if options is None or options.model_control_mode != ModelControlMode.EXPLICIT:
            return None
        deadline = time.monotonic() + options.exit_timeout
        live = ("READY", "LOADING", "UNLOADING")
        try:
            for entry in json.loads(server.model_index(0)):
                if entry.get("state") in live:
                    server.unload_model(entry["name"], False)
            pause = 0.001
            while True:
                with self._loads_lock:
                    loading = self._loads
                if not loading and server.in_flight() == 0 and not any(
                        e.get("state") in live for e in json.loads(server.model_index(0))):
                    return True
                if time.monotonic() >= deadline:
                    return False
                time.sleep(pause)
                pause = min(pause * 2, 0.05)
        except TritonError:
            return None

    def _ptr(self) -> int:
        """The address of the core's TRITONSERVER_Server (what C++ frontends
        written for NVIDIA's package attach to); valid while started."""
        return self._handle().address()

    def _handle(self) -> _bindings.Server:
        if self._server is None:
            raise InvalidArgumentError("the server is not started")
        return self._server
