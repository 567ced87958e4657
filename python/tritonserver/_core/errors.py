"""Errors raised while finding, installing or loading the Triton core.

Kept in one small module so the package can re-parent these classes onto its
own error hierarchy without touching the code that raises them.
"""

from __future__ import annotations

from tritonserver._errors import TritonError, UnavailableError

INSTALL_COMMAND = "python -m tritonserver install-core"


class CoreNotFoundError(UnavailableError):
    """No Triton core library could be found.

    ``looked_in`` lists every place searched, in search order.
    """

    def __init__(self, message: str, looked_in: "list[str] | tuple[str, ...]" = ()):
        super().__init__(message)
        self.looked_in = tuple(looked_in)


class CoreInstallError(TritonError, RuntimeError):
    """Installing the Triton core (download, extraction, stub environment) failed."""


class CoreLoadError(UnavailableError):
    """The Triton core library was found but could not be loaded into this process."""
