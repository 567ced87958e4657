"""Server: the in-process Triton server."""

from __future__ import annotations

import dataclasses
import gc
import itertools
import json
import os
import threading
import time
from typing import TYPE_CHECKING, Any, Optional, cast

from tritonserver import _runtime
from tritonserver._c import triton_bindings as _bindings
from tritonserver._control.core_control import CoreControl
from tritonserver._enums import MetricFormat, ModelControlMode, ModelIndexFlag
from tritonserver._errors import (InvalidArgumentError, InvalidArgumentTypeError, UnavailableError,
                                  check_text)
from tritonserver._metrics import prometheus_to_json
from tritonserver._model import Model, ModelDictionary
from tritonserver._options import Options, validate_options
from tritonserver._registries import (
    HasRegistries,
    Registries,
    note_started,
    note_stopping,
    readiness_checks,
)

if TYPE_CHECKING:
    from tritonserver._trace import Tracing

_server_ids = itertools.count()


# Whether this thread is running a garbage collection (and the finalizers it calls).
_collection = threading.local()


def _note_collection(phase: str, info: dict[str, Any]) -> None:
    _collection.running = phase == "start"


gc.callbacks.append(_note_collection)


def _stop_dropped(server: "Server") -> None:
    try:
        server.stop()
    except Exception:
        pass


class Server(HasRegistries):
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
        # Set by start(): what drives the core around its faults (tritonserver._control).
        self._control: Optional[CoreControl] = None
        self._registries = Registries()

    # ---- Lifecycle ---------------------------------------------------------------

    def start(self, wait_until_ready: bool = False, polling_interval: float = 0.1,
              timeout: Optional[float] = None) -> "Server":
        """Start the server (loading models per the control mode)."""
        if self._registries.handle is not None:
            raise InvalidArgumentError("the server is already started")
        options = dataclasses.replace(self.options)  # never mutate the caller's
        validate_options(options)
        core = _runtime.ensure_core_loaded()
        _runtime.prepare_options(options, core, next(_server_ids))
        control = CoreControl(self.options, options, core)
        try:
            self._registries.handle = control.start()
        except BaseException:
            self._registries.close_tracing()
            raise
        self._control = control
        note_started(self)
        if wait_until_ready:
            deadline = None if timeout is None else time.monotonic() + timeout
            while not self._handle().is_ready():  # loaded: not the models' own checks
                failed = control.startup_failures
                if failed and self.options.model_control_mode != ModelControlMode.POLL:
                    # Nothing loads later in NONE and EXPLICIT mode by itself:
                    # strict readiness can no longer come.
                    raise UnavailableError(
                        "the server will not become ready (strict_readiness), models "
                        "failed to load:" + control.failure_lines())
                if deadline is not None and time.monotonic() >= deadline:
                    raise UnavailableError(f"the server was not ready within {timeout} s"
                                           + (": " + control.failure_lines() if failed else ""))
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
        note_stopping(self)
        server, self._registries.handle = self._registries.handle, None
        if server is not None:
            try:
                cast(CoreControl, self._control).stop(server)
            finally:
                # Every trace is finished once the core stopped: the files
                # get what is left (the settings end with the server).
                self._registries.close_tracing()
        return self

    def __enter__(self) -> "Server":
        if self._registries.handle is None:
            try:
                self.start(wait_until_ready=True)
            except BaseException:
                self.stop()  # the with block never runs, so its exit would not stop it
                raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __del__(self) -> None:
        # A server dropped without stop() stops here. When a garbage collection
        # runs this, it runs on whatever thread allocated at the time, holding
        # whatever locks that thread held, and a stop waits for the core's
        # threads (models unloading), which may need one of them: then it
        # stops on a thread of its own (not a daemon: the interpreter's exit
        # waits for it).
        registries = getattr(self, "_registries", None)  # None: __init__ raised
        if registries is None or registries.handle is None or not getattr(
                _collection, "running", False):
            _stop_dropped(self)
            return
        try:
            threading.Thread(target=_stop_dropped, args=(self,),
                             name="tritonserver-dropped-server-stop").start()
        except RuntimeError:  # no new thread at the interpreter's exit
            _stop_dropped(self)

    # ---- Health and metadata -----------------------------------------------------------

    def live(self) -> bool:
        """Whether the server is live; InvalidArgumentError if it is not started."""
        return self._handle().is_live()

    def ready(self) -> bool:
        """Whether the server is ready; InvalidArgumentError if it is not started.
        With strict readiness, every model's own readiness checks count too
        (a python model's ``is_ready()``), as Triton's core asks each instance."""
        handle = self._handle()
        if not handle.is_ready():
            return False
        if not self.options.strict_readiness:
            return True
        return all(check() for check in readiness_checks(handle.address()))

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
        return Model(self, check_text("model name", model_name), model_version)

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
        check_text("model name", model_name)
        self._controlled().load(self._handle(), model_name, parameters)
        return Model(self, model_name)

    def unload(self, model: Any, unload_dependents: bool = False,
               wait_until_unloaded: bool = False, polling_interval: float = 0.1,
               timeout: Optional[float] = None, *, wait_for_unloaded: bool = False) -> None:
        """Unload a model (by name or Model).

        ``wait_for_unloaded`` is accepted as another name of
        ``wait_until_unloaded``: the reference's own example uses it.
        """
        wait_until_unloaded = wait_until_unloaded or wait_for_unloaded
        name = check_text("model name", model.name if isinstance(model, Model) else model)
        self._controlled().unload(self._handle(), name, unload_dependents)
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
        control = self._controlled()
        control.require_model_control("repository registration")
        path = os.fspath(repository_path)
        handle.register_model_repository(path, name_mapping or {})
        control.registered(path, name_mapping)

    def unregister_model_repository(self, repository_path: str) -> None:
        handle = self._handle()
        control = self._controlled()
        control.require_model_control("repository unregistration")
        path = os.fspath(repository_path)
        handle.unregister_model_repository(path)
        control.unregistered(path)

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
        from tritonserver._shared_memory import SYSTEM, SharedMemoryOutputs

        return SharedMemoryOutputs(self._shared_memory(), placements, kind=SYSTEM)

    # ---- CUDA shared memory (tritonserver._shared_memory) --------------------------------

    def register_cuda_shared_memory(self, name: str, raw_handle: bytes, device_id: int,
                                    byte_size: int) -> None:
        """Open another process's device memory from its CUDA IPC handle
        (``raw_handle``: the 64 bytes of a cudaIpcMemHandle_t, as
        cudaIpcGetMemHandle gives them) on GPU ``device_id`` as region ``name``
        of ``byte_size`` bytes: for this process's requests and every network
        frontend of this server (Triton's CUDA shared memory extension). A
        handle cannot be opened in the process that made it. AlreadyExistsError
        if ``name`` is taken by a region of either kind; InvalidArgumentError
        where no GPU is seen, or when the handle does not open."""
        self._shared_memory().register_cuda(name, raw_handle, device_id, byte_size)

    def unregister_cuda_shared_memory(self, name: Optional[str] = None) -> None:
        """Unregister CUDA region ``name`` (every CUDA region when None; an
        unknown name, or a system region's, is no error) and close its handle.
        Requests in flight keep using the region's mapping."""
        from tritonserver._shared_memory import CUDA

        self._shared_memory().unregister(name, CUDA)

    def cuda_shared_memory_status(self, name: Optional[str] = None) -> list[dict[str, Any]]:
        """``[{"name", "device_id", "byte_size"}]`` for CUDA region ``name``
        (NotFoundError if unknown or a system region), or for every CUDA region."""
        from tritonserver._shared_memory import CUDA

        return cast("list[dict[str, Any]]", self._shared_memory().status(name, CUDA))

    def cuda_shared_memory_tensor(self, name: str, data_type: Any, shape: Any,
                                  offset: int = 0, byte_size: Optional[int] = None) -> Any:
        """A Tensor over CUDA region ``name``'s bytes at ``offset``, in place:
        GPU memory of the region's device, an input for Model.infer that the
        core reads from the region (no copy through the host). BYTES tensors
        need ``byte_size``."""
        from tritonserver._shared_memory import CUDA, region_tensor

        return region_tensor(self._shared_memory(), name, data_type, tuple(shape), offset,
                             byte_size, CUDA)

    def cuda_shared_memory_outputs(self, placements: dict[str, Any]) -> Any:
        """A MemoryAllocator (an InferenceRequest's output_memory_allocator)
        that writes the named outputs into CUDA regions, as GPU memory of each
        region's device: ``{output: region name, or (region, offset,
        byte_size)}``; other outputs go to host memory."""
        from tritonserver._shared_memory import CUDA, SharedMemoryOutputs

        return SharedMemoryOutputs(self._shared_memory(), placements, kind=CUDA)

    # ---- Trace settings (tritonserver._trace) ---------------------------------------------

    def configure_tracing(self, trace_file: str = "", trace_level: Any = ("OFF",),
                          trace_rate: int = 1000, trace_count: int = -1,
                          log_frequency: int = 0, trace_mode: str = "triton",
                          opentelemetry: Optional[dict[str, Any]] = None) -> dict[str, Any]:
        """Set the startup trace settings, as the executable's ``--trace-config``
        flags do: the global setting, and what a cleared (None) global field
        returns to; drops every model's setting. ``trace_level``: "OFF",
        "TIMESTAMPS", "TENSORS" or a list of them. Returns the global setting
        (as trace_settings()). Traces are written as Triton writes them
        (docs/serving.md, "Tracing"). ``trace_mode="opentelemetry"`` exports
        spans instead (the otel extra), with ``opentelemetry``'s settings:
        ``url``, ``resource`` (a dict), ``bsp_max_queue_size``,
        ``bsp_schedule_delay``, ``bsp_max_export_batch_size``, as
        ``--trace-config opentelemetry,...`` takes them, or ``exporter``, a
        SpanExporter of the application's (docs/observability.md)."""
        otel = None
        if trace_mode == "opentelemetry":
            from tritonserver._otel import OtelConfig

            otel = OtelConfig.from_mapping(opentelemetry)
        elif opentelemetry is not None:
            raise InvalidArgumentError("opentelemetry settings are for trace_mode "
                                       "'opentelemetry'")
        self._tracing().configure_checked(trace_file, trace_level, trace_rate, trace_count,
                                          log_frequency, trace_mode, otel)
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
        from tritonserver._trace import parse_update

        if not isinstance(settings, dict):
            raise InvalidArgumentTypeError("settings must be a dict")
        self._check_traced_model(model_name)
        body = {key: (str(value) if isinstance(value, int) and not isinstance(value, bool)
                      else [value] if key == "trace_level" and isinstance(value, str)
                      else value)
                for key, value in settings.items()}
        self._tracing().update(model_name, parse_update(body))
        return self._tracing().settings(model_name)

    def _check_traced_model(self, model_name: Optional[str]) -> None:
        if model_name and not self._handle().model_is_ready(model_name, -1):
            raise InvalidArgumentError(f"Request for unknown model : {model_name}")

    def _tracing(self) -> "Tracing":
        return self._registries.tracing()

    def _shared_memory(self) -> Any:
        return self._registries.shared_memory()

    # ---- Internal --------------------------------------------------------------------

    def _ptr(self) -> int:
        """The address of the core's TRITONSERVER_Server (what C++ frontends
        written for NVIDIA's package attach to); valid while started."""
        return self._handle().address()

    def _handle(self) -> _bindings.Server:
        return self._registries.started()

    def _controlled(self) -> CoreControl:
        self._handle()
        return cast(CoreControl, self._control)


# ---- What the code serving a Server is handed ------------------------------------------
# The frontends, the serve command and the request path get a server's
# registries through these, never through its attributes.


def tracing_of(server: Server) -> "Tracing":
    """The server's trace settings (shared by the in-process API and every
    frontend), made at first use."""
    return server._tracing()


def active_tracing(server: Server) -> Optional["Tracing"]:
    """The server's trace settings when they may sample a request, else None."""
    return server._registries.active_tracing()


def shared_memory_of(server: Server) -> Any:
    """The server's shared memory regions (tritonserver._shared_memory)."""
    return server._shared_memory()


def check_traced_model(server: Server, model_name: Optional[str]) -> None:
    """A trace setting may name ``model_name`` ("" or None: the global ones):
    the model is known, else Triton's InvalidArgumentError."""
    server._check_traced_model(model_name)


def startup_failures(server: Server) -> dict[str, str]:
    """The models that failed to load when the server started, with why."""
    control = server._control
    return dict(control.startup_failures) if control is not None else {}
