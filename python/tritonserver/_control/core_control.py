"""CoreControl: how one Server drives its core through start, loads and stop.

Core 2.51 needs driving around four of its faults, and this class is the
only place that knows it (the modules beside it hold the details):

- It can crash while it tears down a model with two or more instances
  (``instances``): models on the package's SDK backends must load with a
  rewritten configuration, so the package loads them itself. Under NONE and
  EXPLICIT the core therefore runs in EXPLICIT mode with no startup model,
  and ``start`` loads each model after ``ServerNew`` (in parallel, then the
  ensembles), refusing what the core would refuse in NONE mode.
- It says only "failed to poll from model repository" for a model it could
  not read (``load_reasons``): each load's error gets the reason.
- A reload that fails while an older version serves leaves an entry its
  stop waits on until the exit timeout, and it deletes a replaced version on
  a detached thread: ``stop`` unloads every model and waits until none is
  left and no request runs, so the core's own stop has nothing to wait for.
- A stop that gave up leaves a server that cannot be freed (``teardown``).

It also gives the core what Triton added since (``latency_histograms``: the
first-response histogram, and ``model_metrics`` taken out of the
configuration the core is handed).

For: core 2.51 (C API 1.34, nvidia-pytriton 0.5.13 to 0.7.0), the only core
to be had on PyPI; each point was read in its sources at r24.10 and is
unchanged at their main (docs/reliability.md). With a core that fixes
them, ``start`` hands the user's options to ``ServerNew`` as they are and
``load``/``stop`` call the core directly.
"""

from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional

from tritonserver._c import triton_bindings as _bindings
from tritonserver._control import (banner, instances, load_reasons, model_folder, model_names,
                                   python_stub, teardown)
from tritonserver._control.latency_histograms import FirstResponse
from tritonserver._control.model_folder import ModelFiles
from tritonserver._control.startup_models import models_loaded_at_start
from tritonserver._enums import ModelControlMode
from tritonserver._errors import InternalError, TritonError, UnavailableError, UnsupportedError
from tritonserver._options import Options, apply_options, repositories_of

# How long a stop waits after a reload (CoreControl._wait_for_replaced_models).
REPLACED_MODEL_GRACE_S = 1.0

# Each model a start loads, as its load finds it, with its load parameters.
LoadPlan = list[tuple[ModelFiles, Optional[dict[str, Any]]]]

# Model states in the core's index of a model not yet gone.
LIVE_STATES = ("READY", "LOADING", "UNLOADING")


class CoreControl:
    """One started core server: its options as the user gave them
    (``asked``) and as the core got them (``core_options``), the models that
    failed at start and why, the loads under way, and the repositories the
    core searches (model_folder)."""

    def __init__(self, asked: Options, core_options: Options, core: Any):
        self.asked = asked
        self.core_options = core_options
        self._core = core
        self._repositories = model_folder.repositories(core_options)
        self._loads = 0
        self._loads_lock = threading.Lock()
        self._failed_reloads = 0
        self._last_reload = -REPLACED_MODEL_GRACE_S
        self._first_response = FirstResponse(core_options)
        # Models that failed to load at start, with the reason (for
        # start(wait_until_ready=True) and the serve command).
        self.startup_failures: dict[str, str] = {}

    # ---- Start ----------------------------------------------------------------------

    def start(self) -> _bindings.Server:
        """The core server, started, with the startup models loaded (or
        their failures in ``startup_failures``). InternalError when models
        failed and the options say to exit on error."""
        later = self._plan_startup(self.core_options)
        server = self._new_core_server(self.core_options)
        try:
            self._first_response.started(server)
            if ModelControlMode(self.asked.model_control_mode) == ModelControlMode.POLL:
                self._check_polled_models(server)
            else:
                self._load_after_start(server, later)
            if self.startup_failures and self.asked.exit_on_error:
                raise InternalError("failed to load all models:"
                                    + load_reasons.failure_lines(self.startup_failures))
        except BaseException:
            self.stop(server)
            raise
        return server

    def failure_lines(self) -> str:
        return load_reasons.failure_lines(self.startup_failures)

    def _plan_startup(self, options: Options) -> LoadPlan:
        """Sets the core's mode and startup models on `options` (the core's
        copy); returns the models to load once the core runs, in order, with
        their load parameters.

        Under NONE and EXPLICIT the core starts with no model and the
        package loads each one: each load then fails with its own reason,
        where the core's startup loads fail the start with "failed to load
        all models" and nothing else (the reasons go to its log)."""
        mode = ModelControlMode(options.model_control_mode)
        if mode == ModelControlMode.POLL:
            if options.exit_on_error and all(os.path.isdir(r) for r in repositories_of(options)):
                # The package fails the start itself, naming the models
                # (_check_polled_models). Repositories that are not local
                # folders keep the core's check: it says what is wrong.
                options.exit_on_error = False
            return []
        # A name in several repositories is one load (the core then finds
        # them all, or refuses a name that is not unique).
        names = list(dict.fromkeys(models_loaded_at_start(options)))
        options.model_control_mode = ModelControlMode.EXPLICIT
        options.startup_models = []
        models = [self._repositories.read(name) for name in names]
        return [(model, self._one_instance(model)) for model in models]

    def _new_core_server(self, options: Options) -> _bindings.Server:
        c_options = _bindings.ServerOptions()
        apply_options(options, c_options)
        asked = ModelControlMode(self.asked.model_control_mode)
        if asked != ModelControlMode(options.model_control_mode) and options.log_info \
                and not options.log_file:
            # The core's options table names the mode the user chose (banner).
            server = banner.saying_mode(lambda: _bindings.Server(c_options), asked.name)
        else:
            server = _bindings.Server(c_options)
        if options.exit_on_error or not self.asked.exit_on_error or server.is_live():
            return server
        # POLL mode with the core's exit_on_error off (_plan_startup): it
        # failed before any model, and logged why only. Started again with
        # exit_on_error on, it fails the same way and raises the reason.
        server.stop(exit_timeout_s=0)
        c_options.set_exit_on_error(True)
        return _bindings.Server(c_options)

    def _load_after_start(self, server: _bindings.Server, later: LoadPlan) -> None:
        def load(item: tuple[ModelFiles, Optional[dict[str, Any]]]) -> Optional[str]:
            try:
                self._load_explained(server, item[0], item[1])
                return None
            except TritonError as e:
                return str(e)

        # The models in parallel, as the core loads its startup models; then
        # the ensembles, one by one: loaded first, they would load the models
        # they use as the repository has them.
        first = [item for item in later if not item[0].ensemble]
        rest = [item for item in later if item[0].ensemble]
        threads = max(1, min(len(first), self.core_options.model_load_thread_count or 1))
        with ThreadPoolExecutor(threads, thread_name_prefix="tritonserver-load") as pool:
            errors = list(pool.map(load, first)) + [load(item) for item in rest]
        self.startup_failures = {model.name: why for (model, _), why in zip(first + rest, errors)
                                 if why is not None}

    def _check_polled_models(self, server: _bindings.Server) -> None:
        """POLL mode: the models the core failed to load at start, with why."""
        for entry in json.loads(server.model_index(0)):
            name = entry["name"]
            if entry.get("state") == "READY":
                self._first_response.loaded(server, name)
            if entry.get("state") == "READY" or name in self.startup_failures:
                continue
            self.startup_failures[name] = entry.get("reason") or (
                f"failed to load '{name}', {load_reasons.POLL_FAILURE}: "
                + self._explain(self._repositories.read(name)))

    # ---- Loads and repositories -------------------------------------------------------

    def load(self, server: _bindings.Server, name: str,
             parameters: Optional[dict[str, Any]]) -> None:
        """Load (or reload) `name` as Server.load does."""
        self.require_model_control()
        model_names.check_load_name(name)
        model = self._repositories.read(name, parameters)
        python_stub.check_model_loadable(self._core, model, self.core_options.python_backend)
        parameters = self._one_instance(model) or parameters
        serving = _serving(server, name)
        with self._loads_lock:
            self._loads += 1
        try:
            self._load_explained(server, model, parameters)
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

    def unload(self, server: _bindings.Server, name: str, unload_dependents: bool) -> None:
        """Unload `name` as Server.unload does."""
        self.require_model_control()
        server.unload_model(name, unload_dependents)
        self._first_response.unloaded(name)

    def registered(self, path: str, name_mapping: Optional[dict[str, str]]) -> None:
        """A repository registered since start (its models' folders)."""
        self._repositories.register(path, name_mapping)

    def unregistered(self, path: str) -> None:
        self._repositories.unregister(path)

    def require_model_control(self, what: str = "") -> None:
        """What the core refuses in NONE mode (it runs in EXPLICIT mode)."""
        if ModelControlMode(self.asked.model_control_mode) != ModelControlMode.NONE:
            return
        if what:
            raise UnsupportedError(f"{what} is not allowed if model control mode is not EXPLICIT")
        raise UnavailableError("explicit model load / unload is not allowed if polling is enabled")

    def _load_explained(self, server: _bindings.Server, model: ModelFiles,
                        parameters: Optional[dict[str, Any]]) -> None:
        """Load `model` with `parameters` (those asked for, or the ones
        giving it one instance), with the core's error, and the reason where
        it gives none."""
        name = model.name
        try:
            parameters = self._first_response.load_parameters(model, parameters)
            server.load_model(name, parameters)
        except TritonError as e:
            if load_reasons.POLL_FAILURE not in str(e):
                raise
            raise type(e)(load_reasons.with_reason(str(e), self._explain(model))) from None
        except RuntimeError as e:
            # A C++ exception the 2.51 core let out of its C API (a "file:"
            # parameter whose name the file system refuses: "File name too
            # long"); pybind11 makes it a RuntimeError. Triton answers INTERNAL.
            raise InternalError(f"failed to load '{name}': {e}") from None
        self._first_response.loaded(server, name)

    def _explain(self, model: ModelFiles) -> str:
        options = self.core_options
        return load_reasons.explain(
            model, self._repositories.paths(), strict=bool(options.strict_model_config),
            namespacing=bool(options.model_namespacing))

    def _one_instance(self, model: ModelFiles) -> Optional[dict[str, Any]]:
        """Load parameters giving `model` one core instance (or None)."""
        options = self.core_options
        if options.model_control_mode == ModelControlMode.POLL:
            return None
        return instances.load_parameters(model, [str(options.backend_directory)],
                                         autocomplete=not options.strict_model_config)

    # ---- Stop ---------------------------------------------------------------------------

    def stop(self, server: _bindings.Server) -> None:
        """Stop the core server: every model unloaded and no request left
        first where the core runs in EXPLICIT mode. UnavailableError when
        work still ran at the exit timeout (the server is kept, and freed
        at interpreter exit: tritonserver._control.teardown)."""
        gone = self._unload_all(server)
        self._first_response.stopped()
        if gone is False:  # the exit timeout is spent with work still running
            self._give_up(server)
        try:
            if gone is None:  # POLL mode: the core unloads and waits itself
                server.stop()
            else:  # nothing left to wait for, but a failed reload's stale entry
                self._stop_idle(server)
        except UnavailableError:
            teardown.finish_at_exit(self.asked.exit_timeout)  # the work goes on meanwhile
            raise

    def _stop_idle(self, server: _bindings.Server) -> None:
        self._wait_for_replaced_models()
        server.stop(models_gone=True, exit_timeout_s=0 if self._failed_reloads else None)

    def _give_up(self, server: _bindings.Server) -> None:
        """Raises UnavailableError for a stop whose exit timeout expired with
        work running, once every unfinished request has ended for its reader.
        The core is left running that work, not stopped: a stopped 2.51 core
        no longer says when the detached thread that deletes an unloaded
        model is done, and deleting the server before then crashes in that
        thread (seen: ~TritonModel reaching a freed RateLimiter). So the
        server waits in ``teardown`` until the model index shows every model
        gone (``_finish``), at interpreter exit at the latest."""
        timeout = self.asked.exit_timeout
        teardown.finish_at_exit(timeout, lambda deadline: self._finish(server, deadline))
        server.give_up(f"its exit timeout of {timeout} s expired with work still running")

    def _finish(self, server: _bindings.Server, deadline: float) -> bool:
        """For a server ``_give_up`` left running: waits (until `deadline`,
        time.monotonic()) for its models to be gone and frees it; returns
        whether it did. If not, the binding keeps it for good."""
        try:
            if self._wait_until_idle(server, deadline):
                self._stop_idle(server)
                return True
            server.stop(exit_timeout_s=0)
        except TritonError:
            pass  # the binding keeps a server whose stop failed
        return False

    def _wait_for_replaced_models(self) -> None:
        """Core 2.51 deletes a model version that a reload replaced in a
        detached thread of its own, which nothing reports the end of; its own
        stop waits at least a second once any model was live. So a stop soon
        after a reload waits until that second has passed. Any other waits a
        few milliseconds: the thread that deleted an unloaded model still
        updates the core's bookkeeping just after the model shows as gone."""
        time.sleep(max(self._last_reload + REPLACED_MODEL_GRACE_S - time.monotonic(), 0.005))

    def _unload_all(self, server: _bindings.Server) -> Optional[bool]:
        """Unloads every model (EXPLICIT core only) and waits, up to the exit
        timeout, until none is left and no request is in flight; returns
        whether that happened (then the core's stop has nothing to wait
        for), or None when the core must do it (POLL mode, or the index
        cannot be read)."""
        options = self.core_options
        if options.model_control_mode != ModelControlMode.EXPLICIT:
            return None
        deadline = time.monotonic() + options.exit_timeout
        try:
            for entry in json.loads(server.model_index(0)):
                if entry.get("state") in LIVE_STATES:
                    server.unload_model(entry["name"], False)
            return self._wait_until_idle(server, deadline)
        except TritonError:
            return None

    def _wait_until_idle(self, server: _bindings.Server, deadline: float) -> bool:
        """Whether, by `deadline`, no load is under way, no request of the
        binding is in flight and the model index shows no model live."""
        pause = 0.001
        while True:
            with self._loads_lock:
                loading = self._loads
            if not loading and server.in_flight() == 0 and not any(
                    e.get("state") in LIVE_STATES for e in json.loads(server.model_index(0))):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(pause)
            pause = min(pause * 2, 0.05)


def _serving(server: _bindings.Server, name: str) -> bool:
    try:
        return bool(server.model_is_ready(name, -1))
    except TritonError:
        return False
