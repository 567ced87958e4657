"""The trace extension, protocol-free: the global or a model's trace
settings, read and updated. The settings themselves, and the updates read
from either protocol (Triton's texts): tritonserver._trace.
"""

from __future__ import annotations

from typing import Any, Optional

from tritonserver import Server
from tritonserver._server import check_traced_model, tracing_of
from tritonserver._trace import NewSetting
from tritonserver.frontends.dataplane.state import check_running


def check_trace_request(server: Server, model_name: str) -> None:
    """A trace setting request may go on: the server runs and the model
    (when one is named) is known."""
    check_running(server)
    check_traced_model(server, model_name)


def trace_settings(server: Server, model_name: str,
                   update: Optional[NewSetting] = None) -> dict[str, Any]:
    """The settings of ``model_name`` ("" the global ones) after ``update``
    (None: none): ``{setting: value or list of values}``."""
    tracing = tracing_of(server)
    if update is not None:
        tracing.update(model_name, update)
    return tracing.settings(model_name or None)
