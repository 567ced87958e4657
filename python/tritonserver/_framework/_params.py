"""What every framework backend reads the same way: its runtime package
(or an error naming the extra that installs it), the model file, and the
configuration's string parameters."""

from __future__ import annotations

import importlib
import os
from typing import Any, Optional

import numpy as np

from tritonserver._distribution import install_command
from tritonserver._errors import InvalidArgumentError, NotFoundError, UnavailableError


def runtime(module: str, backend: str, extra: str, note: str = "") -> Any:
    """The framework's module, or UnavailableError naming the extra."""
    try:
        return importlib.import_module(module)  # untyped: kept Any
    except ImportError as e:
        raise UnavailableError(
            f"the {backend} backend needs the {module} package ({e}); install it with "
            f"{install_command(extra)}{note}") from None


def model_path(name: str, version: int, repository_path: str, config: dict[str, Any],
               default_filename: str, what: str) -> str:
    """<version>/<default_model_filename or default_filename>; a folder of
    that name holds a file named `default_filename` (a model with its
    external weights beside it)."""
    filename = config.get("default_model_filename") or default_filename
    path = os.path.join(repository_path, str(version), filename)
    if os.path.isdir(path):
        path = os.path.join(path, default_filename)
    if not os.path.isfile(path):
        raise NotFoundError(f"model '{name}': unable to find the {what} file '{path}'")
    return path


def int_parameter(parameters: dict[str, str], key: str) -> int:
    """An integer parameter; 0 when absent or empty."""
    text = parameters.get(key, "")
    try:
        return int(text) if text.strip() else 0
    except ValueError:
        raise InvalidArgumentError(f"parameter {key}: failed to convert '{text}' to an integer")\
            from None


def bool_parameter(parameters: dict[str, str], key: str) -> Optional[bool]:
    """A boolean parameter as Triton's backends parse them (true/on/1,
    false/off/0, any case); None when absent."""
    text = parameters.get(key)
    if text is None:
        return None
    value = text.strip().lower()
    if value in ("true", "on", "1"):
        return True
    if value in ("false", "off", "0"):
        return False
    raise InvalidArgumentError(f"parameter {key}: failed to convert '{text}' to a boolean")


def text_inputs(config: dict[str, Any], framework: str) -> Optional[Any]:
    """A `prepare` hook for FrameworkModel turning the TYPE_STRING inputs'
    bytes elements into str (UTF-8), as frameworks' string tensors take
    them; None when the model has no string input."""
    strings = {e["name"] for e in config.get("input", []) if e.get("data_type") == "TYPE_STRING"}
    if not strings:
        return None

    def decode(element: Any) -> str:
        return element.decode("utf-8") if isinstance(element, bytes) else str(element)

    def prepare(name: str, value: Any) -> Any:
        if name not in strings:
            return value
        try:
            return np.vectorize(decode, otypes=[object])(value)
        except UnicodeDecodeError as e:
            raise InvalidArgumentError(
                f"input '{name}': {framework} strings hold UTF-8 text; an element is not "
                f"({e.reason} at byte {e.start})") from None

    return prepare
