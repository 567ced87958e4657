"""slotted: a dataclass whose fields live in slots.

The binding makes the InferenceResponse, Tensor and MemoryBuffer of every
response (csrc/bindings/response_objects.cc) and writes their fields
straight into their slots, which costs a fraction of setting attributes one
by one. The classes stay the dataclasses the reference documents, and their
instances keep a ``__dict__`` (attributes that are not fields may still be
set on them, as on any dataclass's) and weak references. Python 3.10's
``dataclass(slots=True)`` does the same but has no ``__dict__`` and is not
in 3.9.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

_T = TypeVar("_T")


def slotted(cls: type[_T]) -> type[_T]:
    """``cls`` (a dataclass) made again with its fields as slots."""
    names = tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]
    metaclass: Any = type(cls)
    namespace: dict[str, Any] = dict(cls.__dict__)
    for name in names:
        # A field's default is a class attribute, which a slot of the same
        # name cannot sit beside; __init__ keeps its own copy of it.
        namespace.pop(name, None)
    namespace.pop("__dict__", None)
    namespace.pop("__weakref__", None)
    namespace["__slots__"] = names + ("__dict__", "__weakref__")
    made: type[_T] = metaclass(cls.__name__, cls.__bases__, namespace)
    made.__qualname__ = cls.__qualname__
    return made
