"""Health, metadata, configuration and statistics, protocol-free: what the
read-only endpoints answer, as plain values (the HTTP frontend writes them
as JSON, the gRPC one as messages).
"""

from __future__ import annotations

from typing import Any

from tritonserver import Model, Server
from tritonserver.frontends.dataplane.state import check_running, parse_version, running


def server_ready(server: Server) -> bool:
    return running(server) and server.ready()


def server_metadata(server: Server) -> dict[str, Any]:
    """The core's metadata: its extensions are all served (CUDA shared memory
    included, as Triton lists it; where no GPU is seen registering a region
    is refused, as by a Triton built without GPUs)."""
    check_running(server)
    return server.metadata()


def model(server: Server, name: str, version: str) -> Model:
    """A model as a request names it (version: "" or digits)."""
    return server.model(name, parse_version(version))


def model_metadata(server: Server, name: str, version: str) -> dict[str, Any]:
    return model(server, name, version).metadata()


def model_config(server: Server, name: str, version: str) -> dict[str, Any]:
    return model(server, name, version).config()


def model_statistics(server: Server, name: str, version: str) -> dict[str, Any]:
    return model(server, name, version).statistics()
