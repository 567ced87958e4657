"""Exception classes, one per Triton error code.

This is the only place where error codes meet exception classes: the table
at the bottom is handed to the binding, which raises the matching class for
every ``TRITONSERVER_Error`` the core returns. Each class also derives from
the builtin exception a Python programmer would reach for (``KeyError`` for
a missing model, ``ValueError`` for a bad argument...), so ordinary
``except`` clauses keep working.
"""

from __future__ import annotations

from tritonserver._c import triton_bindings as _bindings


class TritonError(Exception):
    """Base class of every error raised by the Triton core or this package."""


class UnknownError(TritonError):
    """The core reported an error of unknown kind."""


class InternalError(TritonError, RuntimeError):
    """An internal error in the core or a backend."""


class NotFoundError(TritonError, LookupError):
    """A model, tensor, repository or other named thing does not exist."""


class InvalidArgumentError(TritonError, ValueError):
    """An argument or a request is malformed."""


class UnavailableError(TritonError, RuntimeError):
    """The server, model or resource is not available (not ready, stopped)."""


class UnsupportedError(TritonError, NotImplementedError):
    """The operation is not supported (by this core, model or device)."""


class AlreadyExistsError(TritonError):
    """The thing being created already exists."""


class CancelledError(TritonError):
    """The request was cancelled."""


# Values of TRITONSERVER_Error_Code (see csrc/bindings/enums.cc).
_CLASS_BY_CODE: dict[int, type[TritonError]] = {
    _bindings.enum_tables()["ErrorCode"][name]: cls
    for name, cls in {
        "UNKNOWN": UnknownError,
        "INTERNAL": InternalError,
        "NOT_FOUND": NotFoundError,
        "INVALID_ARG": InvalidArgumentError,
        "UNAVAILABLE": UnavailableError,
        "UNSUPPORTED": UnsupportedError,
        "ALREADY_EXISTS": AlreadyExistsError,
        "CANCELLED": CancelledError,
    }.items()
}

_bindings.set_error_classes(_CLASS_BY_CODE)


def error_from_code(code: int, message: str) -> TritonError:
    """The exception instance for a core error code."""
    return _CLASS_BY_CODE.get(code, UnknownError)(message)


__all__ = [
    "TritonError",
    "UnknownError",
    "InternalError",
    "NotFoundError",
    "InvalidArgumentError",
    "UnavailableError",
    "UnsupportedError",
    "AlreadyExistsError",
    "CancelledError",
    "error_from_code",
]
