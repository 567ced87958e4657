"""Server: the in-process Triton server."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import time
from typing import Any, Optional, cast

from tritonserver import _runtime
from tritonserver._c import triton_bindings as _bindings
from tritonserver._enums import MetricFormat, ModelIndexFlag
from tritonserver._errors import InvalidArgumentError, InvalidArgumentTypeError, UnavailableError
from tritonserver._metrics import prometheus_to_json
from tritonserver._model import Model
from tritonserver._options import Options

_server_ids = itertools.count()


class ModelDictionary(dict[tuple[str, int], Model]):
    """What Server.models() returns: models keyed by (name, version). A bare
    name answers too (``models["identity"]``, ``"identity" in models``,
    ``models.get("identity")``): the model at the version the server picks
    (-1). Iteration gives the (name, version) keys, as a dict's does."""

    def __getitem__(self, key: Any) -> Model:
        if isinstance(key, str):
            for (name, _), model in self.items():
                if name == key:
                    return Model(model._server, name)
            raise KeyError(f"unknown model: {key!r}")
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
        c_options = _bindings.ServerOptions()
        options._apply(c_options)
        self._server = _bindings.Server(c_options)
        if wait_until_ready:
            deadline = None if timeout is None else time.monotonic() + timeout
            while not self.ready():
                if deadline is not None and time.monotonic() >= deadline:
                    raise UnavailableError(f"the server was not ready within {timeout} s")
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
                server.stop()
            except UnavailableError:
                _runtime.finish_at_exit(self.options.exit_timeout)  # the work goes on meanwhile
                raise
        return self

    def __enter__(self) -> "Server":
        if self._server is None:
            self.start(wait_until_ready=True)
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
        _runtime.check_model_loadable(self.options, model_name, parameters)
        handle.load_model(model_name, parameters)
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
        self._handle().register_model_repository(os.fspath(repository_path), name_mapping or {})

    def unregister_model_repository(self, repository_path: str) -> None:
        self._handle().unregister_model_repository(os.fspath(repository_path))

    def register_model(self, name: str, model: Any, **settings: Any) -> Model:
        """Serve a tritonserver.PythonModel (class or object) as model `name`,
        run in this process. Settings: inputs, outputs ({name: (dtype, dims)}),
        max_batch_size, dynamic_batching, instance_count, decoupled,
        sequence_batching, parameters, config. Before start() in any model
        control mode, or on a running EXPLICIT-mode server (docs/inprocess.md)."""
        from tritonserver._inprocess._register import register_model

        return register_model(self, name, model, **settings)

    # ---- Internal --------------------------------------------------------------------

    def _ptr(self) -> int:
        """The address of the core's TRITONSERVER_Server (what C++ frontends
        written for NVIDIA's package attach to); valid while started."""
        return self._handle().address()

    def _handle(self) -> _bindings.Server:
        if self._server is None:
            raise InvalidArgumentError("the server is not started")
        return self._server
