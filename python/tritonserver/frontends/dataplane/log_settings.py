"""The logging extension, protocol-free: the core's log settings (its
logger is process-wide and has no getter: what was set last), read and
updated with Triton's checks and texts.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Optional

import tritonserver
from tritonserver import InvalidArgumentError, Server, UnsupportedError
from tritonserver._options import apply_log_settings
from tritonserver.frontends.dataplane.state import check_running

_lock = threading.Lock()
_log_settings: Optional["LogSettings"] = None


@dataclass
class LogSettings:
    """The core's logger is process-wide and has no getter: what was set last."""

    log_file: str = ""
    log_info: bool = False
    log_warning: bool = False
    log_error: bool = False
    log_verbose_level: int = 0
    log_format: str = "default"


def log_settings(server: Server) -> LogSettings:
    """The process's log settings, first read from the server's options."""
    global _log_settings
    with _lock:
        if _log_settings is None:
            o = server.options
            _log_settings = LogSettings(
                log_file=o.log_file or "", log_info=bool(o.log_info),
                log_warning=bool(o.log_warn), log_error=bool(o.log_error),
                log_verbose_level=int(o.log_verbose),
                log_format="ISO8601" if int(o.log_format) == int(tritonserver.LogFormat.ISO8601)
                else "default")
        return _log_settings


def update_log_settings(server: Server, changes: dict[str, Any]) -> LogSettings:
    """Apply ``{setting: value}`` to the core's (process-wide) logger.

    The C API has no run-time log setters: like Triton's own frontends this
    calls the TRITONSERVER_ServerOptionsSetLog* functions, which set the
    global logger at once whatever options object they are given.
    """
    settings = log_settings(server)
    checked: list[tuple[str, Any]] = []
    for key, value in changes.items():
        if value is None:
            continue
        if key == "log_file":
            raise UnsupportedError("log file location can not be updated through network protocol")
        if key in ("log_info", "log_warning", "log_error"):
            if not isinstance(value, bool):
                raise InvalidArgumentError(f"log setting '{key}' expects a boolean, got {value!r}")
        elif key == "log_verbose_level":
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**31:
                raise InvalidArgumentError(
                    f"log setting '{key}' expects a non-negative integer, got {value!r}")
        elif key == "log_format":
            if value not in ("default", "ISO8601"):
                raise InvalidArgumentError(
                    f"log setting 'log_format' expects 'default' or 'ISO8601', got {value!r}")
        else:
            raise InvalidArgumentError(f"unknown log setting '{key}'")
        checked.append((key, value))
    if not checked:
        return settings
    names = {"log_info": "log_info", "log_warning": "log_warn", "log_error": "log_error",
             "log_verbose_level": "log_verbose", "log_format": "log_format"}
    with _lock:
        for key, value in checked:
            apply_log_settings(**{names[key]: (
                tritonserver.LogFormat.ISO8601 if value == "ISO8601" else
                tritonserver.LogFormat.DEFAULT) if key == "log_format" else value})
            setattr(settings, key, value)
    return settings


def log_settings_request(server: Server, changes: Optional[dict[str, Any]]) -> dict[str, Any]:
    """What a log settings request answers: ``{setting: value}`` after
    applying ``changes`` (None or empty: none)."""
    check_running(server)
    settings = update_log_settings(server, changes) if changes else log_settings(server)
    return dict(settings.__dict__)
