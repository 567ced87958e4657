"""Smoke test of an installed tritonserver wheel: cibuildwheel's test command.

Run by the interpreter the wheel was installed into, from a folder without the
sources (cibuildwheel copies this file alone into an empty folder):

1. import the package and its compiled binding; print the versions and where
   they were imported from;
2. when this machine can have a Triton core (x86_64 with glibc 2.35 or newer:
   the core ships only as nvidia-pytriton's manylinux_2_35 x86_64 wheel),
   install one (``python -m tritonserver install-core``), run the README's
   demo and check one inference's result; otherwise say why it is skipped and
   stop there (a manylinux_2_28 build container has glibc 2.28; PyPI has no
   aarch64 core).

Exit status 0 when every step that can run here passed.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from typing import Optional, Tuple

CORE_ARCH = "x86_64"
CORE_GLIBC = (2, 35)


def glibc_version() -> Optional[Tuple[int, int]]:
    """The C library's version when it is glibc, else None (musl, or unknown)."""
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (AttributeError, ValueError, OSError):
        return None
    name, _, version = text.partition(" ")
    if name != "glibc":
        return None
    parts = version.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def why_no_core() -> Optional[str]:
    """Why no Triton core can be installed on this machine; None when one can."""
    machine = platform.machine()
    if machine != CORE_ARCH:
        return f"this machine is {machine}; PyPI's Triton core exists for {CORE_ARCH} only"
    glibc = glibc_version()
    if glibc is None:
        return "this C library is not glibc; the Triton core needs glibc"
    if glibc < CORE_GLIBC:
        return (f"glibc here is {glibc[0]}.{glibc[1]}; the Triton core's wheel is manylinux_2_35 "
                f"(glibc {CORE_GLIBC[0]}.{CORE_GLIBC[1]} or newer)")
    return None


def check_import() -> None:
    import tritonserver
    from tritonserver._c import triton_bindings

    print(f"tritonserver {tritonserver.__version__} imported from "
          f"{os.path.dirname(tritonserver.__file__)}")
    print(f"binding: {triton_bindings.__file__}")
    glibc = glibc_version()
    print(f"python {platform.python_version()} ({sys.executable}), {platform.machine()}, "
          f"glibc {'.'.join(map(str, glibc)) if glibc else 'none'}")


def run(*args: str) -> None:
    command = [sys.executable, "-m", "tritonserver", *args]
    print("$ python " + " ".join(command[1:]), flush=True)
    subprocess.run(command, check=True)


def check_inference() -> None:
    import numpy as np

    import tritonserver

    repo = tritonserver.example_model_repository()
    with tritonserver.Server(model_repository=repo) as server:
        a = np.arange(1, 5, dtype=np.float32)
        b = np.full(4, 10, dtype=np.float32)
        response = next(server.model("add_sub_fp32").infer(inputs={"INPUT0": a, "INPUT1": b}))
        total = np.from_dlpack(response.outputs["OUTPUT0"])
        if not np.array_equal(total, a + b):
            raise SystemExit(f"add_sub_fp32 answered {total}, expected {a + b}")
    print("add_sub_fp32 answered a + b: inference works")


def main() -> int:
    check_import()
    reason = why_no_core()
    if reason is not None:
        print(f"SKIPPED inference: {reason}. Import and version checked only.")
        return 0
    run("install-core")
    run("--version")
    run("demo")
    check_inference()
    return 0


if __name__ == "__main__":
    sys.exit(main())
