"""Building the raw C API driver and the python_floor extension
(benchmarks/native) with CMake."""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig

from . import clientenv
from .procs import BenchError, note, run_logged, with_library_path

NATIVE_SOURCE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                             "native")
CONFIGURE_TIMEOUT_S = 300
BUILD_TIMEOUT_S = 600


def _cached(build: str, key: str) -> str:
    try:
        with open(os.path.join(build, "CMakeCache.txt"), encoding="utf-8") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return ""


def build_driver(core_library: str, build_root: str, venv: str, log_path: str) -> str:
    """Configure (when needed) and build c_api_bench, and python_floor for
    this interpreter when its headers are there; returns the driver's path
    (floor_module_dir finds the extension)."""
    build = os.path.join(os.path.abspath(build_root), "native")
    cmake = clientenv.build_tool("cmake", venv, log_path)
    try:
        ninja = clientenv.build_tool("ninja", venv, log_path)
    except BenchError:
        ninja = None
    generator = "Ninja" if ninja else "Unix Makefiles"
    if not ninja and not shutil.which("make"):
        raise BenchError("building the C API driver needs ninja or make")

    configured = (_cached(build, "TRITON_CORE_LIBRARY") == core_library and
                  _cached(build, "CMAKE_GENERATOR") == generator and
                  _cached(build, "Python3_EXECUTABLE") == sys.executable)
    if not configured:
        if os.path.isdir(build):
            shutil.rmtree(build)
        note(f"configuring the C API driver in {build} ...")
        args = [cmake, "-S", NATIVE_SOURCE, "-B", build, "-G", generator,
                "-DCMAKE_BUILD_TYPE=Release", f"-DTRITON_CORE_LIBRARY={core_library}",
                f"-DPython3_EXECUTABLE={sys.executable}"]
        if ninja:
            args.append(f"-DCMAKE_MAKE_PROGRAM={ninja}")
        run_logged(args, log_path, CONFIGURE_TIMEOUT_S, "configuring benchmarks/native")
    run_logged([cmake, "--build", build], log_path, BUILD_TIMEOUT_S,
               "building benchmarks/native")
    exe = os.path.join(build, "c_api_bench")
    if not os.path.isfile(exe):
        raise BenchError(f"the build made no {exe} (log: {log_path})")
    return exe


def floor_module_dir(driver: str) -> str:
    """The folder of the python_floor extension built beside `driver`."""
    folder = os.path.dirname(driver)
    if not os.path.isfile(os.path.join(folder, "python_floor" +
                                       str(sysconfig.get_config_var("EXT_SUFFIX")))):
        raise BenchError(f"python_floor was not built in {folder}: this interpreter's headers "
                         "(Python.h) were not found (see the configure log)")
    return folder


def driver_command(driver: str, core, repository: str, backend_dir: str, model: str,
                   loop: list) -> tuple:
    """(argv, env) that run the driver on `model` with the loop options `loop`."""
    args = [driver, "--model-repository", repository, "--backend-directory", backend_dir,
            "--model", model]
    if core.cache_dir:
        args += ["--cache-directory", core.cache_dir]
    return args + loop, with_library_path(os.environ, core.libs_dir)
