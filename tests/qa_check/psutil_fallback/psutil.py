"""A minimal psutil for Triton's QA scripts where the real one is not
installed (run_qa.py puts this folder on their PYTHONPATH only then).

The QA scripts use little of it: ``Process(pid).memory_info().rss`` (the
client's own size in shared_memory_test.py's leak test, the server's in
http_input_size_limit_test.py) and ``NoSuchProcess``. Read from /proc, as
psutil does on Linux.
"""

from __future__ import annotations

import os
from collections import namedtuple
from typing import Optional

__version__ = "0.0-qa_check"

_PAGE = os.sysconf("SC_PAGE_SIZE")

pmem = namedtuple("pmem", ["rss", "vms"])


class Error(Exception):
    pass


class NoSuchProcess(Error):
    def __init__(self, pid: int, msg: str = ""):
        super().__init__(msg or f"process no longer exists (pid={pid})")
        self.pid = pid


class Process:
    """The process ``pid`` (this one by default)."""

    def __init__(self, pid: Optional[int] = None):
        self.pid = os.getpid() if pid is None else int(pid)
        if not os.path.exists(f"/proc/{self.pid}"):
            raise NoSuchProcess(self.pid)

    def memory_info(self) -> pmem:
        try:
            with open(f"/proc/{self.pid}/statm") as f:
                size, resident = (int(v) for v in f.read().split()[:2])
        except FileNotFoundError:
            raise NoSuchProcess(self.pid) from None
        return pmem(rss=resident * _PAGE, vms=size * _PAGE)

    def is_running(self) -> bool:
        return os.path.exists(f"/proc/{self.pid}")
