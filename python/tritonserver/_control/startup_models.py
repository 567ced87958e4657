"""The models a start loads, as the core would choose them."""

from __future__ import annotations

import os
from typing import Any

from tritonserver._enums import ModelControlMode
from tritonserver._errors import InvalidArgumentError
from tritonserver._options import repositories_of


def models_loaded_at_start(options: Any) -> list[str]:
    """The models the options load at start (EXPLICIT: the startup models, all
    of them for "*"; NONE and POLL: every folder of the repositories), with
    the core's refusal of "*" beside other names (the core never sees the
    startup models: tritonserver._control.core_control loads them)."""
    if options.model_control_mode == ModelControlMode.EXPLICIT:
        if "*" in options.startup_models and len(set(options.startup_models)) > 1:
            raise InvalidArgumentError("Wildcard model name '*' must be the ONLY startup model "
                                       "if specified at all.")
        if "*" not in options.startup_models:
            return list(options.startup_models)
    names: list[str] = []
    for repo in repositories_of(options):
        if os.path.isdir(repo):
            names.extend(n for n in sorted(os.listdir(repo)) if os.path.isdir(os.path.join(repo, n)))
    return names
