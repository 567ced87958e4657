"""SageMaker's multi-model endpoints, protocol-free: where a model archive
SageMaker unpacked becomes a repository of the server, and the models
loaded that way.

SageMaker unpacks each model's archive under ``/opt/ml/models/<hash>/model``
and asks for it by a name of its own (the "hash"), sending the model's name
in the X-Amzn-SageMaker-Target-Model header (the hash when it is absent).
As Triton does, a load registers a folder of the archive as a model
repository of the server, mapping the model's folder to the target name,
loads it, and remembers hash -> repository; an unload unloads the model and
its dependents, waits until the core says it is unloaded, and unregisters
the repository. Only models loaded this way are served by hash.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from dataclasses import dataclass
from typing import Optional

from tritonserver import AlreadyExistsError, InvalidArgumentError, Server, TritonError
from tritonserver.frontends.dataplane import repository as _repository

_log = logging.getLogger("tritonserver.frontends.sagemaker")

# Where SageMaker unpacks multi-model archives.
SAGEMAKER_MODELS_ROOT = "/opt/ml/models"
# Folders a url may not name: devices and the kernel's views.
_SYSTEM_FOLDERS = ("/dev/", "/proc/", "/sys/")
# A folder name in a url, as Triton accepts it.
_NAME = r"[0-9A-Za-z._]+"
# How a model's config names the ensemble platform (`platform: "ensemble"`).
_ENSEMBLE = re.compile(r'platform:(\s)*"ensemble"')
# SageMaker gives an unload 360 s; the wait for the core stops before.
UNLOAD_TIMEOUT_S = 350.0
_UNLOAD_POLL_S = 0.5


class SystemFolderError(InvalidArgumentError):
    """A url under /dev, /proc or /sys: refused with an empty 400, as Triton does."""


def target_model(header: Optional[bytes], model_hash: str) -> str:
    """The model's name: the X-Amzn-SageMaker-Target-Model header, else the hash."""
    return header.decode("latin-1") if header is not None else model_hash


def normalized(url: str) -> str:
    """The absolute, lexically normal form of a url (no symbolic link is
    followed, as Triton normalizes it)."""
    return os.path.abspath(os.path.normpath(url)) if url else os.getcwd()


def check_not_system(url: str) -> str:
    """The url's normal form; SystemFolderError for /dev, /proc, /sys and
    what lies under them."""
    path = normalized(url)
    # "//proc" is /proc to the kernel; "/dev" itself is refused with what it holds.
    if ("/" + path.strip("/") + "/").startswith(_SYSTEM_FOLDERS):
        raise SystemFolderError(
            f"Invalid URL: {url}. \"url\" property value cannot start with /dev/, /proc/, "
            "or /sys/.")
    return path


@dataclass(frozen=True)
class Placement:
    """Where a url's model lies: the repository to register, and the
    folder in it that becomes the target model."""

    repository: str
    folder: str


def model_folder(path: str) -> str:
    """The folder holding the model among ``path``'s sub-folders: the
    ensemble's when one's config says ``platform: "ensemble"`` (it loads
    the others as its steps), else the last one in name order (the only one,
    as SageMaker's single-model archives have it). "" when there is none."""
    try:
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except OSError:
        return ""
    folders = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
    ensemble = ""
    for name in folders:
        try:
            with open(os.path.join(path, name, "config.pbtxt"), encoding="utf-8",
                      errors="replace") as f:
                config = f.read()
        except OSError:
            continue  # no readable config: not a candidate for the ensemble
        if _ENSEMBLE.search(config):
            _log.info("SageMaker front-end detected an Ensemble config at path: %s",
                      os.path.join(path, name, "config.pbtxt"))
            ensemble = name
    if len(folders) > 5:
        _log.warning("Several model directories found. If using ensemble, smaller ensembles "
                     "are recommended for better memory management.")
    return ensemble or (folders[-1] if folders else "")


def placement(url: str, root: str = SAGEMAKER_MODELS_ROOT) -> Placement:
    """Where the model of a load's url lies. The url is
    ``<root>/<hash>/model[/<subdir>]``; when its folder holds a
    config.pbtxt, the folder is the model and ``<root>/<hash>`` its
    repository, else the folder is the repository and model_folder picks
    the model in it. InvalidArgumentError (Triton's text) for another url."""
    path = check_not_system(url)
    form = re.compile("(" + re.escape(root.rstrip("/") or "/") + "/" + _NAME + ")/(model)/?("
                      + _NAME + ")?")
    match = form.fullmatch(path)
    if match is None:
        raise InvalidArgumentError(
            f"Invalid \"url\" '{url}': expected a path of the form "
            f"{root.rstrip('/')}/<hash>/model[/<subdir>]")
    if os.path.exists(os.path.join(path, "config.pbtxt")):
        return Placement(match.group(1), match.group(2))
    return Placement(path, model_folder(path))


class LoadedModels:
    """The models loaded through the multi-model endpoints: hash -> the
    repository registered for it (what GET /models lists as its modelUrl).
    Shared by the frontend's event loops and the threads loads run on."""

    def __init__(self, root: str = SAGEMAKER_MODELS_ROOT,
                 unload_timeout: float = UNLOAD_TIMEOUT_S):
        self.root = root
        self.unload_timeout = unload_timeout
        self._lock = threading.Lock()
        self._repositories: dict[str, str] = {}

    def get(self, model_hash: str) -> Optional[str]:
        with self._lock:
            return self._repositories.get(model_hash)

    def items(self) -> list[tuple[str, str]]:
        with self._lock:
            return list(self._repositories.items())

    def load(self, server: Server, model_hash: str, target: str, url: str) -> None:
        """Register the url's repository mapping its model to ``target``,
        load it and remember it under ``model_hash``; on a failed load the
        repository is unregistered. Raises the registration's error
        (AlreadyExistsError: the repository or the name is taken) wrapped in
        RegistrationError, or the load's (blocking; run it off the event loop)."""
        where = placement(url, self.root)
        try:
            server.register_model_repository(where.repository, {where.folder: target})
        except TritonError as e:
            raise RegistrationError(e) from None
        try:
            _repository.load(server, target, {})
        except BaseException:
            try:
                server.unregister_model_repository(where.repository)
            except TritonError as e:
                _log.error("Unable to unregister model repository for path: %s: %s",
                           where.repository, e)
            raise
        with self._lock:  # a hash loaded meanwhile keeps its repository, as in Triton
            self._repositories.setdefault(model_hash, where.repository)

    def unload(self, server: Server, model_hash: str, target: str) -> bool:
        """Unload ``target`` and its dependents, wait (up to unload_timeout)
        until the core lists it as unloaded, unregister its repository and
        forget the hash. False if the hash is not loaded; raises the
        unload's error (the hash stays) or the unregistration's (it goes)."""
        repository = self.get(model_hash)
        if repository is None:
            return False
        _repository.unload(server, target, True)
        start = time.monotonic()
        while not unloaded(server, target):
            if time.monotonic() - start >= self.unload_timeout:
                _log.error("Error: UNLOAD did not complete within expected %s seconds. This "
                           "may result in SageMaker UNLOAD timeout.", self.unload_timeout)
                break
            time.sleep(_UNLOAD_POLL_S)
        try:
            server.unregister_model_repository(repository)
        finally:
            with self._lock:
                if self._repositories.get(model_hash) == repository:
                    del self._repositories[model_hash]
        return True


class RegistrationError(TritonError):
    """Registering a load's repository failed: ``error`` is the core's."""

    def __init__(self, error: TritonError):
        super().__init__(str(error))
        self.error = error

    @property
    def taken(self) -> bool:
        """The repository, or a model name it maps, is registered already."""
        return isinstance(self.error, AlreadyExistsError)


def unloaded(server: Server, name: str) -> bool:
    """Whether the core's index lists ``name`` as UNAVAILABLE for the
    reason "unloaded" (not merely on its way there)."""
    return any(model.name == name and model.state == "UNAVAILABLE"
               and model.reason == "unloaded" for model in server.models().values())


def ready(server: Server, model_hash: str) -> bool:
    """Whether version 1 of the model named ``model_hash`` is ready (what
    Triton asks before listing a multi-model endpoint's model)."""
    try:
        return bool(server.model(model_hash, 1).ready())
    except TritonError:
        return False
