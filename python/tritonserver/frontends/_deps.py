"""The third-party packages of the frontends (the ``serve`` extra), checked
once with an error that says how to install them."""

from __future__ import annotations

import importlib.util

from tritonserver._distribution import install_command

INSTALL_HINT = install_command("serve")

# import name -> distribution name, for the message
REQUIRED = {
    "fastapi": "fastapi",
    "starlette": "starlette",
    "httptools": "httptools",
    "grpc": "grpcio",
    "google.protobuf": "protobuf",
}


def missing() -> list[str]:
    """Distribution names of the required packages that cannot be imported."""
    absent = []
    for module, distribution in REQUIRED.items():
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a parent package is missing
            found = False
        if not found:
            absent.append(distribution)
    return absent


def require() -> None:
    """Raise ModuleNotFoundError (an ImportError) naming the install command if a
    package is missing."""
    absent = missing()
    if absent:
        raise ModuleNotFoundError(
            f"tritonserver.frontends needs {', '.join(absent)}: install the serve extra with "
            f"{INSTALL_HINT}")
