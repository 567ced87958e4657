"""Exception classes, one per Triton error code.

This is the only place where error codes meet exception classes: the table
at the bottom is handed to the binding, which raises the matching class for
every ``TRITONSERVER_Error`` the core returns. Each class also derives from
the builtin exception a Python programmer would reach for (``KeyError`` for
a missing model, ``ValueError`` for a bad argument...), so ordinary
``except`` clauses keep working.
"""

from __future__ import annotations

import os
import traceback
from typing import Any, Optional

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


class InvalidArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument of the wrong type: an InvalidArgumentError that is also
    the TypeError Python programs catch for it."""


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


_CODE_BY_CLASS = {cls: code for code, cls in _CLASS_BY_CODE.items()}
_INTERNAL = _CODE_BY_CLASS[InternalError]
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
SUMMARY_FRAMES = 3  # how much of a traceback an error message keeps


def error_from_code(code: int, message: str) -> TritonError:
    """The exception instance for a core error code."""
    return _CLASS_BY_CODE.get(code, UnknownError)(message)


def code_of(error: Optional[BaseException]) -> int:
    """The core error code for an exception: a tritonserver error keeps its
    own, an exception with an int ``_triton_code`` (a python-backend
    ``pb_utils.TritonError``) that code, anything else is INTERNAL."""
    if isinstance(error, TritonError):
        for cls in type(error).__mro__:
            if cls in _CODE_BY_CLASS:
                return _CODE_BY_CLASS[cls]
    code = getattr(error, "_triton_code", None)
    return code if isinstance(code, int) else _INTERNAL


def summary(error: BaseException, limit: int = SUMMARY_FRAMES) -> str:
    """``Type: message`` and the last frames of the traceback outside this
    package, one line each. Releases the frames (release_frames)."""
    text = _headline(error) + "".join(f"\n  at {f.filename}:{f.lineno} in {f.name}"
                                      for f in _user_frames(error, limit))
    release_frames(error)
    return text


def python_backend_summary(error: BaseException, limit: int = SUMMARY_FRAMES) -> str:
    """`error` as the python backend's stub words it: ``Type: message``, a
    blank line, ``At:`` and the frames outside this package, the innermost
    first (``  file(line): function``). Releases the frames."""
    frames = _user_frames(error, limit)
    text = _headline(error)
    if frames:
        text += "\n\nAt:\n" + "".join(f"  {f.filename}({f.lineno}): {f.name}\n"
                                     for f in reversed(frames))
    release_frames(error)
    return text


def _headline(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _user_frames(error: BaseException, limit: int) -> list[traceback.FrameSummary]:
    tb = error.__traceback__
    if tb is None:
        return []
    return [f for f in traceback.extract_tb(tb)
            if not os.path.abspath(f.filename).startswith(_PACKAGE_DIR)][-limit:]


def release_frames(error: BaseException) -> None:
    """Clear and drop the frames of `error`'s traceback and of the
    exceptions it was raised from or during. Once its message is taken, an
    error must not keep what those frames referred to (a batch, the input
    arrays that keep a request) alive: an exception raised in an except
    block sits in a reference cycle with its frame, which only the garbage
    collector would break."""
    seen: set[int] = set()
    chained: Optional[BaseException] = error
    while chained is not None and id(chained) not in seen:
        seen.add(id(chained))
        if chained.__traceback__ is not None:
            traceback.clear_frames(chained.__traceback__)
            chained.__traceback__ = None  # a frame keeps its callers' frames too
        chained = chained.__cause__ or chained.__context__


def raise_taken(holder: Any, attribute: str) -> None:
    """Raise the exception in ``holder.<attribute>`` (nothing when it is
    None), set to None first. Raised, an exception's traceback holds the
    frames it passes through, the caller's among them: were the holder or
    the raising frame still to refer to it, that would be a reference cycle
    keeping the caller's objects (an iterator, its request, its responses)
    alive until the cyclic garbage collector runs."""
    error = getattr(holder, attribute)
    if error is None:
        return
    setattr(holder, attribute, None)
    try:
        raise error
    finally:
        error = None
        holder = None  # nor does the error keep the holder (and what it holds)


def describe_exception(error: BaseException) -> tuple[int, str]:
    """(code, message) of an exception raised in Python code that C++ called
    (the binding's callbacks, the inprocess backend): a tritonserver error
    keeps its code and message; anything else is INTERNAL with a summary."""
    if isinstance(error, TritonError):
        return code_of(error), str(error)
    return _INTERNAL, summary(error)


def check_text(what: str, text: Any) -> Any:
    """``text`` when it is not a str or is one UTF-8 can carry; else an
    InvalidArgumentError (a lone surrogate, as from os.fsdecode, has no UTF-8
    form, and the binding takes text as UTF-8)."""
    if isinstance(text, str):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidArgumentError(f"{what} {text!r} is not valid UTF-8") from None
    return text


__all__ = [
    "TritonError",
    "UnknownError",
    "InternalError",
    "NotFoundError",
    "InvalidArgumentError",
    "InvalidArgumentTypeError",
    "UnavailableError",
    "UnsupportedError",
    "AlreadyExistsError",
    "CancelledError",
    "code_of",
    "describe_exception",
    "raise_taken",
    "release_frames",
    "error_from_code",
    "summary",
]

