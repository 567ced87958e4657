"""The name this package is published under, and what else may share its folder.

The import name is ``tritonserver``; the distribution on PyPI is
``tritonserver-embedded``, because PyPI's ``tritonserver`` is NVIDIA's
in-process bindings (made for NVIDIA's container, with no core inside). Both
distributions install the same ``tritonserver/`` folder, so whichever is
installed last overwrites the other's files: ``other_distribution()`` finds
NVIDIA's beside ours so that the import and ``core-info`` can say so.
"""

from __future__ import annotations

from importlib import metadata
from typing import Optional

DISTRIBUTION = "tritonserver-embedded"
NVIDIA_DISTRIBUTION = "tritonserver"
# pyproject's description, which this project also carried when its distribution was named
# ``tritonserver`` (never published under that name, but left in developers' environments):
# a ``tritonserver`` distribution with this summary is ours, not NVIDIA's.
SUMMARY = "The Triton Inference Server embedded in your Python process"


def install_command(extra: Optional[str] = None) -> str:
    """The pip command line that installs this package (with an extra)."""
    return f'pip install "{DISTRIBUTION}[{extra}]"' if extra else f"pip install {DISTRIBUTION}"


def version() -> str:
    """This package's version, or ``0+unknown`` when run from a source tree."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "0+unknown"


def other_distribution() -> Optional[str]:
    """NVIDIA's ``tritonserver`` version when it is installed in this
    environment too (sharing the ``tritonserver/`` folder), else None."""
    try:
        theirs = metadata.distribution(NVIDIA_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None
    if SUMMARY in (theirs.metadata.get_all("Summary") or []):
        return None  # this project installed under its former name: the same files
    return theirs.version


def conflict_message() -> Optional[str]:
    """What to tell the user when NVIDIA's ``tritonserver`` is installed too."""
    theirs = other_distribution()
    if theirs is None:
        return None
    return (f"NVIDIA's 'tritonserver' {theirs} is installed in this environment beside "
            f"'{DISTRIBUTION}' {version()}. Both install the 'tritonserver' import package "
            "into the same folder, so whichever was installed last has overwritten the "
            "other's files and either may fail in strange ways. Keep one: "
            f"pip uninstall -y tritonserver {DISTRIBUTION} && {install_command()}")
