"""The names a 2026 python backend refuses for what it puts on a stub's
command line (a stub's model or instance name, its shared-memory region
name): the 2.51 backend starts each stub through ``bash -c``, so such a
name runs shell commands. The stub's library is guarded by
csrc/backends/stub_guard (the same characters); models run in-process get
the same refusal, so a model loads, or fails, the same way on either."""

from __future__ import annotations

from tritonserver._errors import InvalidArgumentError

# The python backend's INVALID_CHARS.
INVALID_CHARS = ";|&$`<>()[]{}\\\"'*?~#!"

STUB_NAME = "Invalid stub name: contains invalid characters"
SHM_REGION_NAME = "Invalid shared memory region name: contains invalid characters"


def valid(name: str) -> bool:
    return bool(name) and not any(c in INVALID_CHARS for c in name)


def check(name: str, message: str = STUB_NAME, *, prefix: bool = False) -> None:
    """Raise the python backend's InvalidArgumentError for a refused name
    (`prefix`: the start of names, which may be empty)."""
    if not valid(name) and not (prefix and not name):
        raise InvalidArgumentError(message)
