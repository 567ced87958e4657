"""Finding, installing and loading the Triton Inference Server core (libtritonserver).

Importing this package is cheap: it never loads the core by itself.
"""

from .errors import INSTALL_COMMAND, CoreInstallError, CoreLoadError, CoreNotFoundError
from .install import install_core
from .locate import (
    CoreInstall,
    clear_core_cache,
    core_version,
    default_install_dir,
    find_core,
    inspect_path,
    search_core,
)
from .preload import core_api_version, core_handle, load_core
from .runtime_dirs import backend_directory
from .stub_env import StubEnv, ensure_stub_env, stub_environment

__all__ = [
    "INSTALL_COMMAND",
    "CoreInstall",
    "CoreInstallError",
    "CoreLoadError",
    "CoreNotFoundError",
    "StubEnv",
    "backend_directory",
    "clear_core_cache",
    "core_api_version",
    "core_handle",
    "core_version",
    "default_install_dir",
    "ensure_stub_env",
    "find_core",
    "inspect_path",
    "install_core",
    "load_core",
    "search_core",
    "stub_environment",
]
