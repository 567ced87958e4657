"""``python -m tritonserver executable [flags]``: NVIDIA's C++ ``tritonserver``
executable of the installed core, set up to run.

The pip core ships the executable beside ``libtritonserver``, but it does not
run as it lies: it needs the core's library folder on ``LD_LIBRARY_PATH``, a
backend folder holding Triton's python backend (with a stub that finds this
Python and numpy) and this package's C++ SDK backends (identity, add_sub,
repeat, accumulate, sleep), and the stub's Python on ``PATH``.
``ExecutableSetup`` is that setup, in one place: the command uses it, and so do
the test programs that run the executable beside ``serve``
(tests/examples_check, tests/qa_check).

The command replaces this process with the executable (``exec``): signals
reach it directly and its exit status is the command's. ``--backend-directory``
is added unless given; a folder given is the executable's alone.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Mapping, Optional, Sequence


class NoExecutableError(RuntimeError):
    """The installed core has no ``tritonserver`` executable."""


class ExecutableSetup:
    """What running the installed core's executable takes: ``core`` (its
    CoreInstall), ``backend_dir`` (the python backend and the package's
    backends, removed once this process and the executable exec'ed in its
    place are gone) and ``stub`` (the python backend stub's environment)."""

    def __init__(self, core: Any = None) -> None:
        from tritonserver._core import backend_directory, find_core, stub_environment
        from tritonserver._runtime import package_backends_dir

        self.core = core or find_core()
        if not self.core.executable or not os.path.isfile(self.core.executable):
            raise NoExecutableError(
                f"the Triton core at {self.core.root} has no tritonserver executable "
                f"(found: {self.core.source} core); `python -m tritonserver serve` serves "
                "without one")
        self.backend_dir = backend_directory(self.core, package_backends_dir())
        self.stub = stub_environment(self.core)

    def environment(self, base: Optional[Mapping[str, str]] = None) -> dict[str, str]:
        """``base`` (default: this process's) with the core's libraries first on
        LD_LIBRARY_PATH and the stub's PATH and libpython folder."""
        env = dict(os.environ if base is None else base)
        current = env.get("LD_LIBRARY_PATH")
        env["LD_LIBRARY_PATH"] = self.core.libs_dir + (os.pathsep + current if current else "")
        if self.stub.usable:
            env.update(self.stub.changes(env))
        return env

    def command(self, flags: Sequence[str]) -> list[str]:
        """The executable with ``flags``, and this setup's backend folder
        unless the flags name one."""
        given = any(f == "--backend-directory" or f.startswith("--backend-directory=")
                    for f in flags)
        extra = [] if given else [f"--backend-directory={self.backend_dir}"]
        return [str(self.core.executable), *extra, *flags]


def main(flags: Sequence[str]) -> int:
    """Exec the executable with ``flags``; returns only when it cannot start."""
    from tritonserver._core import CoreNotFoundError

    try:
        setup = ExecutableSetup()
    except (NoExecutableError, CoreNotFoundError) as e:
        print(f"tritonserver executable: {e}", file=sys.stderr)
        return 1
    if not setup.stub.usable and "--help" not in flags:
        print(f"tritonserver executable: python backend models will not load: "
              f"{setup.stub.reason}", file=sys.stderr)
    command = setup.command(list(flags))
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(command[0], command, setup.environment())
    except OSError as e:
        print(f"tritonserver executable: cannot run {command[0]}: {e}", file=sys.stderr)
        return 1
    return 1  # not reached: execve returns only by raising
