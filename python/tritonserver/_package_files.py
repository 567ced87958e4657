"""Files shipped inside the package, wherever the install put them.

A wheel install has one package folder. An editable install has two: the
sources (python/tritonserver) and the built files (the binding, the
backends, the installed headers) in site-packages; ``tritonserver.__path__``
lists both.
"""

from __future__ import annotations

import os
import sys


def package_dirs() -> list[str]:
    """Every folder of the package, the built files' first."""
    # The package is imported by the time any of its modules runs.
    return [os.path.abspath(p) for p in sys.modules["tritonserver"].__path__]


def package_file(*parts: str) -> str:
    """The first of the package's folders that holds ``parts``; the path in
    the first folder when none does (for the caller's error message)."""
    dirs = package_dirs()
    for base in dirs:
        path = os.path.join(base, *parts)
        if os.path.exists(path):
            return path
    return os.path.join(dirs[0], *parts)
