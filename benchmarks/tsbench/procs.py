"""Running child processes with a bound, and their environments."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from typing import Optional, Sequence

PR_SET_PDEATHSIG = 1

PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "grpc_proxy",
                   "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "GRPC_PROXY")


class BenchError(RuntimeError):
    """A step of the benchmark failed; the message says which and why."""


def die_with_parent() -> None:
    """preexec_fn: the child gets SIGTERM when the harness dies, even by
    SIGKILL, so no server or worker outlives it."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def with_library_path(env: dict, folder: str) -> dict:
    env = dict(env)
    current = env.get("LD_LIBRARY_PATH")
    env["LD_LIBRARY_PATH"] = folder + (os.pathsep + current if current else "")
    return env


def loopback_only(env: dict) -> dict:
    """No proxy may see traffic meant for 127.0.0.1 (gRPC honours http_proxy)."""
    env = {k: v for k, v in env.items() if k not in PROXY_VARIABLES}
    env["no_proxy"] = env["NO_PROXY"] = "127.0.0.1,localhost"
    return env


def tail(path: str, limit: int = 4000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def run_logged(args: Sequence[str], log_path: str, timeout: float, what: str,
               env: Optional[dict] = None, cwd: Optional[str] = None) -> str:
    """Run to completion (bounded); stderr goes to `log_path`, stdout is returned."""
    with open(log_path, "ab") as log:
        log.write(("$ " + " ".join(args) + "\n").encode())
        log.flush()
        try:
            done = subprocess.run(list(args), stdout=subprocess.PIPE, stderr=log, env=env,
                                  cwd=cwd, timeout=timeout, stdin=subprocess.DEVNULL,
                                  preexec_fn=die_with_parent)
        except subprocess.TimeoutExpired:
            raise BenchError(f"{what}: did not finish within {timeout:.0f} s "
                             f"(log: {log_path})") from None
        except OSError as e:
            raise BenchError(f"{what}: could not run {args[0]}: {e}") from None
    out = done.stdout.decode("utf-8", "replace")
    if done.returncode != 0:
        raise BenchError(f"{what}: exit status {done.returncode} (log: {log_path})\n"
                         f"{tail(log_path)}{out[-2000:]}")
    return out


def note(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
