"""Why a model did not load, when the core says only that it failed.

The 2.51 core answers a load whose model it could not read from the
repository (no such folder, a config.pbtxt that does not parse, no
config.pbtxt under strict_model_config, a ``config`` override that is not
JSON...) with "failed to load '<model>', failed to poll from model
repository": the reason goes to its log alone, which is off by default
in-process. The model index then lists the model with no state and no
reason. This module finds the reason from what the core read, so that the
error (in Python and over the network) says it. The core's text stays first,
unchanged: Triton's clients and QA match it.
"""

from __future__ import annotations

import json
import os
from typing import Any, Optional

POLL_FAILURE = "failed to poll from model repository"


def explain(name: str, model_dirs: list[str], repositories: list[str],
            parameters: Optional[dict[str, Any]], strict: bool, namespacing: bool,
            config_name: Optional[str] = None) -> str:
    """Why the core could not read model ``name``: ``model_dirs`` are the
    folders it may be in, ``repositories`` the repositories searched,
    ``parameters`` the load call's, ``strict`` strict_model_config,
    ``config_name`` the server's model config name."""
    parameters = parameters or {}
    override = parameters.get("config")
    if override is not None:
        if not isinstance(override, str):
            return "the 'config' load parameter must be a string holding a JSON object"
        try:
            value = json.loads(override)
        except ValueError as e:
            return f"the 'config' load parameter is not valid JSON ({e})"
        if not isinstance(value, dict):
            return f"the 'config' load parameter must be a JSON object, not {override!r}"
    if any(str(key).startswith("file:") for key in parameters):
        return _see_the_log()
    found = [d for d in model_dirs if os.path.isdir(d)]
    if not found:
        where = ", ".join(repositories) or "none"
        return (f"model not found in any model repository (no folder '{name}' in: {where})")
    if len(found) > 1 and not namespacing:
        return f"not unique across all model repositories (found in {', '.join(found)})"
    if override is not None:
        return _see_the_log()
    from tritonserver._control.config_text import config_file

    config = config_file(found[0], config_name)
    if os.path.isfile(config):
        return _config_problem(config) or _see_the_log()
    if strict:
        return (f"{found[0]} has no config.pbtxt, and strict_model_config=True does not let the "
                "backend complete one from the model file. Write a config.pbtxt, or start the "
                "server with strict_model_config=False (serve: --strict-model-config=false, the "
                "default of serve and of Triton's executable)")
    return (f"{found[0]} has no config.pbtxt and the core could not complete one: is there a "
            "version folder (1/) holding the model file its backend reads (model.onnx, "
            "model.py...)? Writing a config.pbtxt that names the backend says more")


def with_reason(message: str, reason: str) -> str:
    """The core's message with the reason appended (when it lacks one)."""
    return message if reason in message else f"{message}: {reason}"


def failure_lines(failures: dict[str, str]) -> str:
    """Each model that failed and why, one per line (each line starts with
    a newline)."""
    # The core ends a failed load's message with ";" and a newline.
    return "".join(f"\n  '{name}': {why.strip().rstrip(';')}"
                   for name, why in sorted(failures.items()))


def _config_problem(path: str) -> Optional[str]:
    from tritonserver._control.config_text import ConfigTextError, parse_model_config

    try:
        with open(path, encoding="utf-8") as f:
            parse_model_config(f.read())
    except UnicodeDecodeError as e:
        return f"{path} is not UTF-8 text ({e})"
    except OSError as e:
        return f"{path} cannot be read ({e})"
    except ConfigTextError as e:
        return f"{path} does not parse: {e}"
    return None


def _see_the_log() -> str:
    return "the core gave the reason to its log only (log_error=True shows it)"
