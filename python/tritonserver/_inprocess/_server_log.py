"""Lines of the server's log (the core's: its file, format and levels)
written from Python, as Triton's backends write theirs: pb_utils.Logger
and the failures the inprocess backend can give to no request."""

from __future__ import annotations

import sys

# The core's levels (TRITONSERVER_LogLevel), the python backend's Logger's alike.
INFO, WARNING, ERROR, VERBOSE = range(4)
_BACKEND = "tritonserver._inprocess._backend"


def write(level: int, message: str, file: str, line: int) -> bool:
    """One line of the server's log at `level`, naming `file` and `line`;
    False when no server has run a Python model here (no server log yet:
    the inprocess backend, which writes it, is not loaded)."""
    backend = sys.modules.get(_BACKEND)
    if backend is None:
        return False
    backend.log(level, file, line, message)
    return True
