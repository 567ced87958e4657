"""The models a start loads, as the core would choose them."""

from __future__ import annotations

import os
from typing import Any

from tritonserver._enums import ModelControlMode


def models_loaded_at_start(options: Any) -> list[str]:
    """The models the options load at start (EXPLICIT: the startup models; NONE
    and POLL: every folder of the repositories)."""
    if options.model_control_mode == ModelControlMode.EXPLICIT and "*" not in options.startup_models:
        return list(options.startup_models)
    names: list[str] = []
    for repo in options._repositories():
        if os.path.isdir(repo):
            names.extend(n for n in sorted(os.listdir(repo)) if os.path.isdir(os.path.join(repo, n)))
    return names
