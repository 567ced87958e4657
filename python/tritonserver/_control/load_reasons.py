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

from tritonserver._control.model_folder import ModelFiles

POLL_FAILURE = "failed to poll from model repository"


def explain(model: ModelFiles, repositories: list[str], strict: bool, namespacing: bool) -> str:
    """Why the core could not read `model` (as the load found it:
    model_folder): ``repositories`` are the repositories searched,
    ``strict`` strict_model_config."""
    if model.overridden and model.problem:
        return model.problem
    if model.files:
        return _see_the_log()
    found = model.folders
    if not found:
        where = ", ".join(repositories) or "none"
        return (f"model not found in any model repository (no folder '{model.name}' in: {where})")
    if len(found) > 1 and not namespacing:
        return f"not unique across all model repositories (found in {', '.join(found)})"
    if model.overridden:
        return _see_the_log()
    if model.config_path is not None:
        return model.problem or _see_the_log()
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


def _see_the_log() -> str:
    return "the core gave the reason to its log only (log_error=True shows it)"
