"""One core instance per model on the package's own backends.

Core 2.51 can crash while it tears down a model with two or more instances
on separate backend threads (docs/reliability.md). Models on backends built
with this package's SDK (the package's own, ``inprocess`` and ``onnxruntime``
included, and users' backends built with the SDK) therefore load as one core
instance with the parameter ``tritonserver.workers`` set to the count the
user's ``instance_group`` asks for: the SDK runs that many instances behind
it, each on a worker thread of its own, so as many batches still run at once.

The core reads instance groups before any backend code runs, so the count
can only change in the configuration the core is given: the package loads
such models itself, with the rewritten configuration as the load's config
override. ``Model.config()`` shows the user's count again (``user_view``).

Models left as they are (N core instances): models whose backend is not
built with the SDK (the python backend, third-party backends), sequence
batching models (the core gives each instance its own sequence slots),
several instance groups, groups with a host policy, rate limiter resources,
secondary devices, profiles or passive instances, groups on a GPU, and any
model loaded by the core's own polling (POLL mode).
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from typing import Any, Optional

from tritonserver import _gpu
from tritonserver._control.model_folder import ModelFiles

WORKERS = "tritonserver.workers"
_MARKER = b"tritonserver-backend-sdk:workers-parameter-1"
# Triton's default CPU instance count per backend (SetDefaultInstanceCount).
_DEFAULT_CPU_COUNT = {"onnxruntime": 2, "tensorflow": 2}
_GROUP_KEEPS_N = ("host_policy", "rate_limiter", "secondary_devices", "profile", "passive", "gpus")


def load_parameters(model: ModelFiles, backend_dirs: list[str],
                    autocomplete: bool = False) -> Optional[dict[str, Any]]:
    """The load parameters that give `model` (as its load finds it:
    model_folder) one core instance, or None to load it as asked.
    `backend_dirs`: the folders of backends, the first one with a backend
    wins; `autocomplete`: the server completes config-less models
    (strict_model_config=False)."""
    if os.environ.get("TRITONSERVER_ONE_CORE_INSTANCE", "1") == "0":
        return None  # as configured: for measuring what the workers replace
    config = model.config
    if config is None or (config == {} and not autocomplete):
        return None  # unreadable, or no config.pbtxt: the core says why
    backend = model.backend
    try:
        if not isinstance(backend, str) or not _built_with_sdk(backend_dirs, backend):
            return None
        count = _worker_count(config, backend)
        if count is None or count < 2:
            return None
        rewritten = dict(config)
        rewritten["name"] = model.name
        group = dict(config["instance_group"][0]) if config.get("instance_group") else {}
        group["count"] = 1
        rewritten["instance_group"] = [group]
        rewritten["parameters"] = {**config.get("parameters", {}),
                                   WORKERS: {"string_value": str(count)}}
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, OSError):
        return None  # a malformed configuration: the core refuses it and says why
    parameters = dict(model.parameters)
    parameters["config"] = json.dumps(rewritten)
    return parameters


def user_view(config: dict[str, Any]) -> dict[str, Any]:
    """A configuration as the core reports it, with the user's instance
    count back in place of the one core instance it was loaded as."""
    params = config.get("parameters")
    if not isinstance(params, dict) or WORKERS not in params:
        return config
    try:
        count = int(params[WORKERS]["string_value"])
    except (KeyError, TypeError, ValueError):
        return config
    config = dict(config)
    config["parameters"] = {k: v for k, v in params.items() if k != WORKERS}
    groups = config.get("instance_group")
    if isinstance(groups, list) and len(groups) == 1 and isinstance(groups[0], dict):
        config["instance_group"] = [{**groups[0], "count": count}]
    return config


def _worker_count(config: dict[str, Any], backend: str) -> Optional[int]:
    """The instance count the user asked for, or None when the model keeps
    its core instances (see the module's docstring)."""
    if "sequence_batching" in config:
        return None
    groups = config.get("instance_group") or []
    if len(groups) > 1:
        return None
    group = groups[0] if groups else {}
    if any(group.get(key) for key in _GROUP_KEEPS_N):
        return None
    kind = group.get("kind", "KIND_AUTO")
    if kind not in ("KIND_CPU", "KIND_AUTO") or (kind == "KIND_AUTO" and _gpu.present()):
        return None
    count = int(group.get("count") or 0)
    return count if count > 0 else _DEFAULT_CPU_COUNT.get(backend, 1)


def _built_with_sdk(backend_dirs: list[str], backend: str) -> bool:
    for directory in backend_dirs:
        library = os.path.join(directory, backend, f"libtriton_{backend}.so")
        if os.path.isfile(library):
            stat = os.stat(library)
            return _has_marker(os.path.realpath(library), stat.st_mtime_ns, stat.st_size)
    return False


@lru_cache(maxsize=64)
def _has_marker(path: str, mtime_ns: int, size: int) -> bool:
    try:
        with open(path, "rb") as f:
            return _MARKER in f.read()
    except OSError:
        return False
