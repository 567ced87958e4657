"""tritonserver-fil: Triton's FIL backend (backend "fil": XGBoost, LightGBM,
scikit-learn and Treelite forests) on CPU for tritonserver-embedded, found
through the entry point group ``tritonserver.backends``. docs/fil.md in
tritonserver-embedded's repository says what it serves and how."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["FilBackend"]


def __getattr__(attribute: str) -> Any:
    if attribute == "FilBackend":
        from tritonserver_fil._backend import FilBackend

        return FilBackend
    raise AttributeError(attribute)
