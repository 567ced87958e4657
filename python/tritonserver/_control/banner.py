"""The core's start-up table names the model control mode the user chose.

With log_info on, ``TRITONSERVER_ServerNew`` prints the server's options as a
table, the mode among them. Under NONE the package runs the core in EXPLICIT
mode (``CoreControl``), so that row would say ``MODE_EXPLICIT`` where the
user (and Triton's executable) says ``MODE_NONE``. While ``ServerNew`` runs,
the process's standard error goes to a temporary file; then what was written
there goes to standard error with that row rewritten. In EXPLICIT mode with
no startup model the core starts no process and no model then, so nothing
else is held back. With ``log_file`` set the core writes its log there, and
the row stays as the core wrote it.

For: core 2.51 (the modes differ only because of ``CoreControl``'s
workarounds for it); not needed once the core gets the user's mode.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from typing import Callable, TypeVar

T = TypeVar("T")

_ROW = re.compile(rb"(\| model_control_mode +\| )MODE_[A-Z]+( *)\|")


def mode_row(text: bytes, mode_name: str) -> bytes:
    """`text` with the table's model_control_mode row saying MODE_<mode_name>,
    the table's width kept where the new name fits."""
    def replace(match: "re.Match[bytes]") -> bytes:
        head: bytes = match.group(1)
        width = len(match.group(0)) - len(head) - 1
        return head + f"MODE_{mode_name}".encode().ljust(width) + b"|"

    return _ROW.sub(replace, text)


def saying_mode(make: Callable[[], T], mode_name: str) -> T:
    """make() (the core's ServerNew), its standard error with the mode row
    saying MODE_<mode_name>."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            return make()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            view = memoryview(mode_row(held.read(), mode_name))
            while view:
                view = view[os.write(2, view):]
