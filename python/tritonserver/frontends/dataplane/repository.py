"""The model repository extension, protocol-free: the index, loading (with
a config override and ``file:`` contents) and unloading, with Triton's
checks and texts. Each load or unload drops the cached model handles.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from tritonserver import InvalidArgumentError, Server, UnsupportedError
from tritonserver.frontends.dataplane.state import state_of


def check_repository(repository: str) -> None:
    """Only the server's own repositories are served: none may be named."""
    if repository:
        raise UnsupportedError("'repository_name' specification is not supported")


def index(server: Server, ready: bool) -> list[dict[str, Any]]:
    """The models (only the ready ones when ``ready``): name, and version,
    state and reason where the core has them."""
    entries = []
    for model in server.models(exclude_not_ready=ready).values():
        entry: dict[str, Any] = {"name": model.name}
        if model.version >= 0:
            entry["version"] = str(model.version)
        if model.state is not None:
            entry["state"] = model.state
        if model.reason:
            entry["reason"] = model.reason
        entries.append(entry)
    return entries


def json_load_parameters(parameters: Any) -> dict[str, Any]:
    """The load parameters of a JSON request: strings, ``config`` as it is
    and each ``file:<path>`` the base64 of the file's bytes."""
    if not isinstance(parameters, dict):
        raise InvalidArgumentError("'parameters' must be a JSON object")
    load: dict[str, Any] = {}
    for key, value in parameters.items():
        if not isinstance(value, str):
            raise InvalidArgumentError(f"load parameter '{key}' must be a string")
        if key == "config":
            load[key] = value
        elif key.startswith("file:"):
            try:
                load[key] = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                raise InvalidArgumentError(f"load parameter '{key}' is not valid base64") from None
        else:
            raise InvalidArgumentError(
                f"unknown load parameter '{key}': expected 'config' or 'file:<path>'")
    return load


def load(server: Server, model_name: str, parameters: dict[str, Any]) -> None:
    """Load (or reload) a model (blocks until done)."""
    state = state_of(server)
    try:
        server.load(model_name, parameters)
    finally:
        state.forget_models()


def unload(server: Server, model_name: str, unload_dependents: bool) -> None:
    state = state_of(server)
    try:
        server.unload(model_name, unload_dependents)
    finally:
        state.forget_models()


def json_unload_dependents(parameters: Any) -> bool:
    """Whether a JSON unload request's parameters ask to unload dependents."""
    if not isinstance(parameters, dict):
        raise InvalidArgumentError("'parameters' must be a JSON object")
    dependents = parameters.get("unload_dependents", False)
    if not isinstance(dependents, bool):
        raise InvalidArgumentError("Unable to parse 'unload_dependents': expected a boolean")
    return dependents
