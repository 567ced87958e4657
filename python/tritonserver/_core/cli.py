"""Command line: ``python -m tritonserver {install-core, core-info, --version, --cmakedir,
--includes}``; ``serve`` and ``demo`` are run by ``tritonserver.__main__``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Optional, Sequence

from tritonserver._distribution import DISTRIBUTION, conflict_message, other_distribution

from . import locate
from .errors import CoreInstallError, CoreNotFoundError


def package_version() -> str:
    from tritonserver._distribution import version

    return version()


def cmake_dir() -> str:
    """The folder of the CMake package (tritonserverConfig.cmake) for building
    backends: ``find_package(tritonserver)`` with ``tritonserver_DIR`` set to it."""
    from tritonserver._package_files import package_file

    config = package_file("share", "cmake", "tritonserver", "tritonserverConfig.cmake")
    return os.path.dirname(config)


def include_dirs() -> list[str]:
    """The include folders of the backend SDK and of the Triton C API headers.

    An installed package has both under ``tritonserver/include``; a source
    checkout takes the C API headers from ``third_party/``.
    """
    from tritonserver._package_files import package_dirs

    dirs = [os.path.join(d, "include") for d in package_dirs()]
    found = [d for d in dirs if os.path.isdir(d)]
    if any(os.path.isfile(os.path.join(d, "triton", "tritonbackend.h")) for d in found):
        return found
    source = os.path.join(package_dirs()[-1], os.pardir, os.pardir, "third_party")
    if os.path.isfile(os.path.join(source, "triton", "tritonbackend.h")):
        return found + [os.path.abspath(source)]
    return found or dirs[:1]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tritonserver",
        description="The Triton Inference Server in your Python process: serve a model "
                    "repository, run the demo, manage the Triton core library, build backends.",
    )
    p.add_argument("--version", action="store_true",
                   help="print this package's version and the Triton core in use")
    p.add_argument("--cmakedir", action="store_true",
                   help="print the CMake package folder for building backends "
                        "(cmake -Dtritonserver_DIR=...)")
    p.add_argument("--includes", action="store_true",
                   help="print the -I flags of the backend SDK and Triton C API headers")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    ic = sub.add_parser("install-core", help="download and install the Triton core for this environment")
    ic.add_argument("--dest", metavar="DIR", default=None,
                    help=f"install here instead of {locate.default_install_dir()}")
    ic.add_argument("--force", action="store_true", help="reinstall even when already installed")
    ic.add_argument("--quiet", "-q", action="store_true", help="print only errors")

    sub.add_parser("core-info", help="print where the Triton core in use lives, as JSON")
    # Parsed by their own modules (python -m tritonserver serve --help):
    # listed here so that this help names every command.
    sub.add_parser("serve", add_help=False,
                   help="serve a model repository over HTTP, gRPC and metrics, like the "
                        "tritonserver executable (the serve extra; --ray: on Ray Serve)")
    sub.add_parser("executable", add_help=False,
                   help="run NVIDIA's tritonserver executable of the installed core with its "
                        "flags, set up: libraries, the python backend and this package's "
                        "backends, the stub's Python")
    sub.add_parser("backends", add_help=False,
                   help="list the backends installed as entry points (tritonserver.backends): "
                        "distribution, API version, whether their dependencies import")
    sub.add_parser("demo", add_help=False,
                   help="start a server on the example models and run one inference")
    return p


def _print_version() -> int:
    print(f"{DISTRIBUTION} {package_version()} (import name tritonserver)")
    _warn_conflict()
    try:
        core = locate.find_core()
    except CoreNotFoundError as e:
        print(f"Triton core: not found\n{e}")
        return 0
    version = locate.core_version(core) or "unknown version"
    print(f"Triton core {version} ({core.source}): {core.library}")
    return 0


def _install(args: argparse.Namespace) -> int:
    from .install import install_core
    from .stub_env import stub_environment

    try:
        core = install_core(args.dest, quiet=args.quiet, force=args.force)
    except CoreInstallError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    stub = stub_environment(core)
    if not args.quiet:
        print(f"Triton core {locate.core_version(core) or ''} installed: {core.library}")
        if stub.usable:
            print(f"python backend models: enabled ({stub.kind}, numpy {stub.numpy_version})")
        else:
            print(f"python backend models: {stub.reason}")
        if args.dest is not None:
            default = locate.default_install_dir()
            if os.path.abspath(args.dest) != os.path.abspath(default):
                print(f"Not the default location: set {locate.ENV_CORE}={os.path.abspath(args.dest)} to use it.")
    return 0


def _core_info() -> int:
    try:
        core = locate.find_core()
    except CoreNotFoundError as e:
        print(str(e), file=sys.stderr)
        _warn_conflict()
        return 1
    info = core.to_dict()
    info["version"] = locate.core_version(core)
    info["package"] = {"distribution": DISTRIBUTION, "version": package_version(),
                       "nvidia_tritonserver": other_distribution()}
    print(json.dumps(info, indent=2))
    _warn_conflict()
    return 0


def _warn_conflict() -> None:
    message = conflict_message()
    if message is not None:
        print(f"warning: {message}", file=sys.stderr)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.version:
        return _print_version()
    if args.cmakedir:
        print(cmake_dir())
        return 0
    if args.includes:
        print(" ".join(f"-I{d}" for d in include_dirs()))
        return 0
    if args.command == "install-core":
        return _install(args)
    if args.command == "core-info":
        return _core_info()
    _parser().print_help()
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
