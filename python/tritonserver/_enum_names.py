"""How the package's int enums and flags print: by name, on every Python.

Python 3.11 made ``str()`` and ``format()`` of an int enum its number; users
reading logs expect names (as pybind11 enums and older Pythons print them).
Standalone (no binding), so any interpreter can check the rule.
"""

from __future__ import annotations

from typing import Any, TypeVar


def _text(member: Any) -> str:
    """``Class.NAME`` (flags: ``Class.A|B``, none set: ``Class.0``), the way
    every supported Python printed enums before 3.11 made ``str()`` of an
    int enum its number."""
    cls = type(member)
    if member._name_ is not None and "|" not in member._name_:
        return f"{cls.__name__}.{member._name_}"
    value = int(member)
    names = [m._name_ for m in cls if m._value_ and value & m._value_ == m._value_]
    rest = value & ~sum(m._value_ for m in cls if m._name_ in names)
    parts = names + ([hex(rest)] if rest else [])
    return f"{cls.__name__}.{'|'.join(parts) or '0'}"


E = TypeVar("E", bound=type)


def named(cls: E) -> E:
    """Make an int enum or flag print its name: ``str()`` and an empty
    format spec give ``Class.NAME``; any other spec formats the number."""

    def __format__(self: Any, spec: str) -> str:
        return _text(self) if not spec else format(int(self), spec)

    cls.__str__ = _text  # type: ignore[assignment]
    cls.__format__ = __format__  # type: ignore[assignment]
    return cls
