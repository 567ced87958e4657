"""A model as the core finds it for one load: its folders, its configuration
and the backend that runs it.

``Repositories`` are the repositories a server's core searches: those it
started with and those registered since, with their name mappings.
``Repositories.read`` finds a model's folders there as the core's Poll does
and reads its configuration once (the load's ``config`` override, else the
folder's config.pbtxt, or ``configs/<name>.pbtxt`` under a model config
name); ``backend_of`` is the core's choice of backend when the
configuration names none (AutoCompleteBackendFields). ``instances``,
``python_stub`` and ``load_reasons`` read models through this module. For:
core 2.51 (model_repository_manager.cc and model_config_utils.cc read at
r24.10); a core that did what those modules do would need none of it.
"""

from __future__ import annotations

import json
import os
import posixpath
from dataclasses import dataclass
from typing import Any, Iterable, Optional

from tritonserver._control.config_text import ConfigTextError, config_file, parse_model_config
from tritonserver._options import repositories_of

# The core's order: each backend with the platforms that name it, its model
# file, and whether that file must be a folder (True), a file (False) or
# may be either (None).
_BACKENDS = (("tensorflow", ("tensorflow_savedmodel",), "model.savedmodel", True),
             ("tensorflow", ("tensorflow_graphdef",), "model.graphdef", False),
             ("tensorrt", ("tensorrt_plan",), "model.plan", False),
             ("onnxruntime", ("onnxruntime_onnx",), "model.onnx", None),
             ("openvino", (), "model.xml", None),
             ("pytorch", ("pytorch_libtorch",), "model.pt", False),
             ("python", (), "model.py", None))
_FILE_PREFIX = "file:"


@dataclass(frozen=True)
class ModelFiles:
    """Model ``name`` as one load finds it. ``folders``: where the core
    reads it from, in its order (none when the load's ``file:`` parameters
    are its files, ``files``); ``overridden``: the load gives its ``config``;
    ``config``: the configuration the core reads (the override, else the
    first folder's file; {} where there is no file), None when it cannot be
    read, ``problem`` then saying why where that is known; ``config_path``:
    the file it came from; ``backends``: the backend that runs each folder
    (or the load's files), None where none is known."""

    name: str
    parameters: dict[str, Any]
    folders: tuple[str, ...]
    files: bool
    overridden: bool
    config: Optional[dict[str, Any]]
    config_path: Optional[str]
    problem: Optional[str]
    backends: tuple[Optional[str], ...]

    @property
    def backend(self) -> Optional[str]:
        """The backend that runs the first folder (or the load's files)."""
        return self.backends[0] if self.backends else None

    @property
    def ensemble(self) -> bool:
        return bool(self.config and self.config.get("platform") == "ensemble")


class Repositories:
    """The model repositories a server's core searches, and its model
    config name (serve's --model-config-name), if any. Registrations
    replace the collections rather than change them: loads on other threads
    read them."""

    def __init__(self, paths: Iterable[str], config_name: Optional[str] = None) -> None:
        self._paths = list(paths)
        self._config_name = config_name
        # Model name -> (repository, folder), from the name mappings.
        self._mapped: dict[str, tuple[str, str]] = {}

    def register(self, path: str, mapping: Optional[dict[str, str]] = None) -> None:
        """A repository registered since start, with its {folder: model name}."""
        self._paths = self._paths + [path]
        self._mapped = {**self._mapped, **{model: (path, os.path.join(path, folder))
                                           for folder, model in (mapping or {}).items()}}

    def unregister(self, path: str) -> None:
        self._paths = [p for p in self._paths if p != path]
        self._mapped = {m: (r, f) for m, (r, f) in self._mapped.items() if r != path}

    def paths(self) -> list[str]:
        """Every repository, in the order they were given."""
        return list(self._paths)

    def folders(self, name: str) -> list[str]:
        """Model `name`'s folders, in the order the core searches them: the
        folder a name mapping gives the name, alone; else the folder `name`
        of each repository (sorted, as the core keeps them) that no mapping
        gives another name."""
        mapped = self._mapped
        if name in mapped:
            folder = mapped[name][1]
            return [folder] if os.path.isdir(folder) else []
        taken = {folder for _, folder in mapped.values()}
        candidates = (os.path.join(repo, name) for repo in sorted(set(self._paths)))
        return [f for f in candidates if f not in taken and os.path.isdir(f)]

    def read(self, name: str, parameters: Optional[dict[str, Any]] = None) -> ModelFiles:
        """Model `name` as a load with `parameters` finds it."""
        parameters = dict(parameters or {})
        files = any(str(key).startswith(_FILE_PREFIX) for key in parameters)
        folders = () if files else tuple(self.folders(name))
        override = parameters.get("config")
        if override is not None:
            config, problem = _override(override)
            versions = [_files_version(parameters)] if files else \
                [_folder_version(f) for f in folders]
            backends = tuple(None if config is None else backend_of(config, name, v)
                             for v in versions)
            return ModelFiles(name, parameters, folders, files, True, config, None, problem,
                              backends)
        if not folders:  # not found, or files without the config the core requires
            return ModelFiles(name, parameters, folders, files, False, None, None, None, ())
        read = [_read_config(f, self._config_name) for f in folders]
        backends = tuple(None if config is None else backend_of(config, name, _folder_version(f))
                         for f, (config, _, _) in zip(folders, read))
        config, path, problem = read[0]
        return ModelFiles(name, parameters, folders, False, False, config, path, problem, backends)


def repositories(options: Any) -> Repositories:
    """The repositories a server with `options` starts with, and its model
    config name (a ServeOptions field), if any."""
    return Repositories(repositories_of(options),
                        getattr(options, "model_config_name", None) or None)


def backend_of(config: dict[str, Any], name: str,
               version: Optional[dict[str, bool]]) -> Optional[str]:
    """The backend the core runs model `name` of configuration `config` on:
    the one it names; else the one its platform or its default_model_filename
    is for; with neither, the one a file of its first version folder is for
    (`version`: that folder's entries, True for a folder; None without one);
    else the one its name ends with (``<name>.<backend>``). None where the
    core finds none."""
    backend, platform, wanted = (config.get(key) or "" for key in
                                 ("backend", "platform", "default_model_filename"))
    if not all(isinstance(value, str) for value in (backend, platform, wanted)):
        return None  # not a configuration the core reads
    if backend:
        return backend
    for found, platforms, file_name, folder in _BACKENDS:
        # TensorFlow's file names count only where no platform is named.
        if platform in platforms or (wanted == file_name
                                     and not (platform and found == "tensorflow")):
            return found
        if not (platform or wanted) and version and file_name in version \
                and folder in (None, version[file_name]):
            return found
    if platform or wanted:
        return None
    return name.partition(".")[2] or None


def _override(value: Any) -> tuple[Optional[dict[str, Any]], Optional[str]]:
    """A load's ``config`` parameter as a configuration, or why it is none."""
    if not isinstance(value, str):
        return None, "the 'config' load parameter must be a string holding a JSON object"
    try:
        config = json.loads(value)
    except ValueError as e:
        return None, f"the 'config' load parameter is not valid JSON ({e})"
    if not isinstance(config, dict):
        return None, f"the 'config' load parameter must be a JSON object, not {value!r}"
    return config, None


def _read_config(folder: str, config_name: Optional[str]
                 ) -> tuple[Optional[dict[str, Any]], Optional[str], Optional[str]]:
    """The configuration of the model in `folder`, the file it came from and
    why it cannot be read: ({}, None, None) without a file."""
    path = config_file(folder, config_name)
    if not os.path.isfile(path):
        return {}, None, None
    try:
        with open(path, encoding="utf-8") as f:
            return parse_model_config(f.read()), path, None
    except UnicodeDecodeError as e:
        return None, path, f"{path} is not UTF-8 text ({e})"
    except OSError as e:
        return None, path, f"{path} cannot be read ({e})"
    except ConfigTextError as e:
        return None, path, f"{path} does not parse: {e}"


def _folder_version(folder: str) -> Optional[dict[str, bool]]:
    """The entries of the first version folder of the model in `folder`, as
    the core picks it: its first subfolder by name, whatever the name."""
    try:
        subfolders = sorted(e for e in os.listdir(folder) if os.path.isdir(os.path.join(folder, e)))
        if not subfolders:
            return None
        version = os.path.join(folder, subfolders[0])
        return {e: os.path.isdir(os.path.join(version, e)) for e in os.listdir(version)}
    except OSError:
        return None


def _files_version(parameters: dict[str, Any]) -> Optional[dict[str, bool]]:
    """The same for a load's files (``file:<version>/<path>`` parameters)."""
    versions: dict[str, dict[str, bool]] = {}
    for key in parameters:
        if not (isinstance(key, str) and key.startswith(_FILE_PREFIX)):
            continue
        parts = posixpath.normpath(key[len(_FILE_PREFIX):]).split("/")
        if len(parts) < 2 or parts[0] in (".", ".."):
            continue
        entries = versions.setdefault(parts[0], {})
        entries[parts[1]] = entries.get(parts[1], False) or len(parts) > 2
    return versions[min(versions)] if versions else None
