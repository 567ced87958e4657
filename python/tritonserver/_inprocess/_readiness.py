"""A python-backend model's own readiness check, ``is_ready()`` (Triton
2.67+), for a model run in this process.

Triton asks each instance of a ready model whether it is ready, on every
model readiness request (and on a server readiness request under strict
readiness); the python backend answers from the model's ``is_ready()`` when
it defines one. The 2.51 core asks no backend, so the package asks after it
(tritonserver._registries' readiness checks, read by Model.ready and
Server.ready), with the python backend's rules:

- one check at a time per instance: a caller that comes while one runs
  waits for its answer instead of starting another;
- a caller waits at most TIMEOUT_S; the check goes on (the model's function
  is not interrupted) and the callers that come meanwhile get its answer;
- ``True`` is ready; ``False``, an exception or anything not a bool is not
  ready; a coroutine is awaited on the instance's event loop
  (tritonserver._inprocess._async), where its ``async def execute`` runs.

Why an instance is not ready goes to the server's log at verbose level, in
the words of Triton's core and python backend. The function runs on a
thread of its own, so a slow check holds up neither the frontend's thread
for more than TIMEOUT_S nor the instance's executions.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Callable, Optional

from tritonserver._errors import python_backend_summary
from tritonserver._inprocess import _async, _server_log

# The python backend's kUserModelReadinessTimeoutMs.
TIMEOUT_S = 5.0

class InstanceReadiness:
    """The readiness check of one instance: call it for whether it is ready."""

    def __init__(self, model: str, version: int, instance: str, loop_key: Any,
                 function: Callable[[], Any]):
        self._model, self._version, self._instance = model, version, instance
        self._loop_key = loop_key  # the instance's event loop (tritonserver._inprocess._async)
        self._function = function
        self._lock = threading.Lock()
        # One run of the model's function: its answer, None (ready) or why not.
        self._in_flight: Optional[concurrent.futures.Future[Optional[str]]] = None

    def __call__(self) -> bool:
        reason = self.reason()
        if reason is None:
            return True
        _server_log.write(_server_log.VERBOSE,
                          f"Model '{self._model}' version {self._version} is not ready: {reason}",
                          __file__, 0)
        return False

    def reason(self) -> Optional[str]:
        """None when the instance is ready, else why not."""
        with self._lock:
            future = self._in_flight
            joined = future is not None
            if future is None:
                future = self._in_flight = concurrent.futures.Future()
                threading.Thread(target=self._run, args=(future,), daemon=True,
                                 name="tritonserver-inprocess-is-ready").start()
        try:
            return future.result(TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            if joined:
                return "Timed out waiting for in-flight is_ready() response"
            return "Timed out waiting for user-defined is_ready() response"

    def _run(self, future: concurrent.futures.Future[Optional[str]]) -> None:
        reason: Optional[str] = None
        try:
            result = self._function()
            if asyncio.iscoroutine(result):
                result = self._awaited(result)
            if not isinstance(result, bool):
                reason = "is_ready() must return a boolean value"
            elif not result:
                reason = f"Model '{self._instance}' is not ready (user-defined check failed)."
        except BaseException as e:  # the model's: its text, for the log
            reason = python_backend_summary(e)
            del e
        with self._lock:
            self._in_flight = None  # the next caller starts the next check
        future.set_result(reason)

    def _awaited(self, coroutine: Any) -> Any:
        done: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def finished(result: Any, error: Optional[BaseException]) -> None:
            if error is not None:
                done.set_exception(error)
            else:
                done.set_result(result)

        _async.run(self._loop_key, coroutine, finished)
        return done.result()
