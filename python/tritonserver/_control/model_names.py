"""Model names a load request may give.

Triton checks the name of a model to load since core 2.60 (core#472): a
name that is empty or only whitespace, ``..``, or one holding ``/`` is
refused with INVALID_ARG before the repository is searched, so that a load
request cannot reach folders outside the model repositories. The 2.51 core
does not check, and polls ``<repository>/..``: this package checks as the
newer cores do, with their texts. For: core 2.51 and others before 2.60.
Startup models are not checked here, as the cores do not check them.
"""

from __future__ import annotations

from tritonserver._errors import InvalidArgumentError

# Python's str.strip() also strips characters boost::trim does not (such as
# the separators \x1c-\x1f); the core trims what isspace() calls space.
_SPACE = " \t\n\v\f\r"


def check_load_name(name: str) -> None:
    """Raise InvalidArgumentError, with the core's text, for a model name a
    load request may not give."""
    trimmed = name.strip(_SPACE)
    if not trimmed:
        raise InvalidArgumentError(
            "Model name cannot be empty. Please enter a valid name to deploy.")
    if trimmed == ".." or "/" in trimmed:
        raise InvalidArgumentError(
            f"invalid model name '{name}', model name must not contain path traversal "
            "characters")
