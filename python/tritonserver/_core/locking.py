"""An exclusive lock on a lock file, shared by the installers of the core
and of the stub environment (two processes never install into one place
at once)."""

from __future__ import annotations

import contextlib
import os
from typing import Iterator


@contextlib.contextmanager
def file_lock(path: str) -> Iterator[None]:
    """Exclusive lock held on ``path`` (a lock file) for the duration."""
    import fcntl

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
