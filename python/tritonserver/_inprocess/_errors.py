"""Exceptions of a Python model, as the core's error codes and messages."""

from __future__ import annotations

import os
import traceback
from typing import Any, Optional

from tritonserver._errors import _CLASS_BY_CODE, TritonError

_CODE_BY_CLASS = {cls: code for code, cls in _CLASS_BY_CODE.items()}
_INTERNAL = next(code for code, cls in _CLASS_BY_CODE.items() if cls.__name__ == "InternalError")
FRAMES = 3  # how much of a traceback a failed request's message keeps
_OWN = os.path.dirname(os.path.abspath(__file__)) + os.sep  # frames not shown


def code_of(error: Optional[BaseException]) -> int:
    """The core error code for an exception: a tritonserver error keeps its
    own, a pb_utils.TritonError its code, anything else is INTERNAL."""
    if isinstance(error, TritonError):
        for cls in type(error).__mro__:
            if cls in _CODE_BY_CLASS:
                return _CODE_BY_CLASS[cls]
    code = getattr(error, "_triton_code", None)
    return code if isinstance(code, int) else _INTERNAL


def summary(error: BaseException, limit: int = FRAMES) -> str:
    """``Type: message`` and the last frames of the traceback, one line each.
    Drops the frames' locals: a kept traceback must not keep the batch (its
    requests and input arrays) alive."""
    text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    tb = error.__traceback__
    if tb is not None:
        frames = [f for f in traceback.extract_tb(tb)
                  if not os.path.abspath(f.filename).startswith(_OWN)][-limit:]
        text += "".join(f"\n  at {f.filename}:{f.lineno} in {f.name}" for f in frames)
        try:
            traceback.clear_frames(tb)
        except RuntimeError:  # a frame still running
            pass
    return text


def failure(model_name: str, hook: str, error: BaseException) -> tuple[int, str]:
    """(code, message) for an exception a model's hook raised."""
    if isinstance(error, TritonError) and hook != "execute":
        return code_of(error), f"model '{model_name}': {hook}: {error}"
    return code_of(error), f"model '{model_name}': {hook} raised {summary(error)}"


def describe_error(error: Any) -> tuple[int, str]:
    """For the backend: (code, message) of an exception our own code raised."""
    if isinstance(error, TritonError):
        return code_of(error), str(error)
    return _INTERNAL, summary(error)
