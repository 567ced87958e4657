"""Backends found by entry point: the `tritonserver.backends` group.

A distribution serves a backend by declaring, in its pyproject.toml,

    [project.entry-points."tritonserver.backends"]
    fil = "tritonserver_fil:FilModel"

one entry per backend name, pointing to a class built on
``tritonserver.backend_api.Backend``. The package's own framework backends
(onnxruntime, pytorch, openvino) are declared the same way by
tritonserver-embedded itself: the entry point is the only way a backend name
reaches a Python class.

- Entries are read (metadata only, nothing imported) when a server starts,
  so the core can find a backend library for every name; a backend's code is
  imported only when a model's configuration names it.
- Two distributions declaring one name: loading a model on it fails, the
  error naming both.
- The class declares ``api_version = "MAJOR.MINOR"``: it loads when MAJOR is
  ours and MINOR at most ours; otherwise the load fails saying both.
- ``TRITONSERVER_BACKEND_DISCOVERY=0`` reads only tritonserver-embedded's
  own entries (no other distribution's code or metadata is used).

``python -m tritonserver backends`` lists what is installed (``main``).
"""

from __future__ import annotations

import argparse
import atexit
import hashlib
import importlib
import json
import logging
import os
import re
import shutil
import stat
import sys
import tempfile
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Optional, Sequence

from tritonserver._errors import InvalidArgumentError, NotFoundError, UnavailableError

if TYPE_CHECKING:
    from tritonserver._framework._model import FrameworkModel

GROUP = "tritonserver.backends"
# The plugin API this package provides (tritonserver.backend_api): a plugin
# written for MAJOR.m loads when MAJOR matches and m <= MINOR.
API_VERSION = "1.0"
DISCOVERY_ENV = "TRITONSERVER_BACKEND_DISCOVERY"
OWN_DISTRIBUTION = "tritonserver-embedded"
# The library a plugin backend's folder links to: any framework forwarder
# (csrc/backends/framework/forward.cc) hands every call to the inprocess backend.
FORWARDER = "onnxruntime"
# The backend of Python models, which the dispatch serves itself.
INPROCESS = "inprocess"


@dataclass(frozen=True)
class Entry:
    """One backend name declared by one distribution."""

    name: str
    value: str  # "module:Class"
    distribution: str
    version: str

    def load(self) -> Any:
        module_name, _, attribute = self.value.partition(":")
        obj: Any = importlib.import_module(module_name.strip())
        for part in filter(None, attribute.strip().split(".")):
            obj = getattr(obj, part)
        return obj


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def discovery_enabled() -> bool:
    return os.environ.get(DISCOVERY_ENV, "1").strip().lower() not in ("0", "false", "off", "no")


def scan(path: Optional[Sequence[str]] = None,
         discovery: Optional[bool] = None) -> dict[str, list[Entry]]:
    """backend name -> the entries declaring it (one per distribution), from
    the distributions on `path` (default sys.path); only this package's own
    when discovery is off."""
    from importlib import metadata

    if discovery is None:
        discovery = discovery_enabled()
    found: dict[str, list[Entry]] = {}
    seen: set[tuple[str, str]] = set()
    kwargs: dict[str, Any] = {} if path is None else {"path": list(path)}
    for dist in metadata.distributions(**kwargs):
        try:
            dist_name = dist.metadata["Name"] or ""
            if not dist_name or (not discovery and _normalize(dist_name) != OWN_DISTRIBUTION):
                continue
            declared = list(dist.entry_points)
        except Exception as e:  # noqa: BLE001 - a broken distribution never stops a start
            logging.getLogger("tritonserver").warning(
                "skipping a distribution whose metadata cannot be read (%s: %s)",
                type(e).__name__, e)
            continue
        for ep in declared:
            if ep.group != GROUP:
                continue
            key = (ep.name, _normalize(dist_name))
            if key in seen:  # the same distribution seen twice on the path
                continue
            seen.add(key)
            found.setdefault(ep.name, []).append(
                Entry(ep.name, ep.value, dist_name, dist.version or ""))
    return found


_lock = threading.Lock()
_cache: Optional[dict[str, list[Entry]]] = None
_cache_key: Optional[tuple[bool, tuple[str, ...]]] = None
_classes: dict[Entry, type[FrameworkModel]] = {}


def entries() -> dict[str, list[Entry]]:
    """scan() for sys.path, kept while sys.path and the switch are unchanged."""
    global _cache, _cache_key
    key = (discovery_enabled(), tuple(sys.path))
    with _lock:
        if _cache is None or _cache_key != key:
            _cache, _cache_key = scan(), key
        return _cache


def refresh() -> None:
    """Forget what was read (after installing a distribution in this process)."""
    global _cache
    with _lock:
        _cache = None
        _classes.clear()


def parse_version(text: Any) -> Optional[tuple[int, int]]:
    match = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", text) if isinstance(text, str) else None
    return None if match is None else (int(match.group(1)), int(match.group(2)))


def check_class(entry: Entry, cls: Any) -> type[FrameworkModel]:
    """`cls` when it is a backend class this package can run, else the error."""
    from tritonserver._framework._model import FrameworkModel

    where = f"backend '{entry.name}' ({entry.value} from {entry.distribution} {entry.version})"
    if not (isinstance(cls, type) and issubclass(cls, FrameworkModel)):
        raise InvalidArgumentError(
            f"{where} is not a backend class: an entry point of group '{GROUP}' names a "
            "subclass of tritonserver.backend_api.Backend")
    declared = getattr(cls, "api_version", None)
    wanted = parse_version(declared)
    ours = parse_version(API_VERSION)
    assert ours is not None
    if wanted is None:
        raise InvalidArgumentError(
            f"{where} declares no backend API version: set api_version = \"MAJOR.MINOR\" "
            f"on the class (this tritonserver-embedded provides {API_VERSION})")
    if wanted[0] != ours[0] or wanted[1] > ours[1]:
        raise UnavailableError(
            f"{where} needs backend API {declared}, but this tritonserver-embedded provides "
            f"{API_VERSION} (it runs backends written for {ours[0]}.0 to {API_VERSION}); "
            "install a version of one or the other that matches")
    return cls


def resolve(name: str, found: Optional[dict[str, list[Entry]]] = None) -> Optional[Entry]:
    """The one entry serving `name`; None when none does; an error naming
    every distribution when several do."""
    candidates = (entries() if found is None else found).get(name, [])
    if not candidates:
        return None
    if len(candidates) > 1:
        who = " and ".join(f"{e.distribution} {e.version} ({e.value})" for e in candidates)
        raise InvalidArgumentError(
            f"backend '{name}' is declared by {len(candidates)} distributions: {who}; "
            f"uninstall all but one (entry point group '{GROUP}')")
    return candidates[0]


def backend_class(name: Optional[str]) -> Optional[type[FrameworkModel]]:
    """The class serving backend `name`, imported now; None when no
    distribution declares it (the model is an inprocess Python model)."""
    if not name or name == INPROCESS:
        return None  # Python models (model.py): never a plugin's
    entry = resolve(name)
    if entry is None:
        return None
    with _lock:
        cls = _classes.get(entry)
    if cls is not None:
        return cls
    try:
        loaded = entry.load()
    except ImportError as e:
        raise UnavailableError(
            f"backend '{name}' ({entry.value} from {entry.distribution} {entry.version}) "
            f"could not be imported: {e}") from None
    except AttributeError as e:
        raise NotFoundError(
            f"backend '{name}': {entry.distribution} {entry.version} declares {entry.value}, "
            f"which does not exist ({e})") from None
    cls = check_class(entry, loaded)
    with _lock:
        _classes[entry] = cls
    return cls


# ---- Backend libraries for the core ------------------------------------------

def plugin_names(package_backends_dir: Optional[str]) -> list[str]:
    """Declared backend names the package has no library for (plugins)."""
    have = set(os.listdir(package_backends_dir)) if package_backends_dir and \
        os.path.isdir(package_backends_dir) else set()
    valid = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    return sorted(n for n in entries()
                  if n not in have and valid.match(n) and n not in ("python", INPROCESS))


def backends_dir(package_backends_dir: Optional[str]) -> Optional[str]:
    """The folder to serve as the package's backends: `package_backends_dir`
    itself when no plugin is installed, else a folder holding a link to each
    of its backends and, per plugin name, ``<name>/libtriton_<name>.so``
    linked to the framework forwarder (the core finds a backend by its
    library's name). The folder is named by what it holds and reused, so it
    is made once per machine and never needs removing."""
    if not package_backends_dir:
        return package_backends_dir
    names = plugin_names(package_backends_dir)
    forwarder = os.path.join(package_backends_dir, FORWARDER, f"libtriton_{FORWARDER}.so")
    if not names or not os.path.isfile(forwarder):
        return package_backends_dir
    source = os.path.realpath(package_backends_dir)
    builtin = sorted(n for n in os.listdir(source) if os.path.isdir(os.path.join(source, n)))
    digest = hashlib.sha256(json.dumps([source, builtin, names]).encode()).hexdigest()[:16]
    target = os.path.join(tempfile.gettempdir(), f"tritonserver-plugins-{os.getuid()}-{digest}")
    if _trusted(target):
        return target
    staging = tempfile.mkdtemp(prefix=".tritonserver-plugins-", dir=tempfile.gettempdir())
    try:
        for name in builtin:
            os.symlink(os.path.join(source, name), os.path.join(staging, name))
        for name in names:
            os.mkdir(os.path.join(staging, name), 0o755)
            os.symlink(os.path.realpath(forwarder),
                       os.path.join(staging, name, f"libtriton_{name}.so"))
        os.chmod(staging, 0o755)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    try:
        os.rename(staging, target)
    except OSError:  # made meanwhile by a process beside us, or taken by someone else
        if _trusted(target):
            shutil.rmtree(staging, ignore_errors=True)
            return target
        atexit.register(shutil.rmtree, staging, True)  # ours alone, for this process
        return staging
    return target


def _trusted(folder: str) -> bool:
    """A folder this user made and no one else can change (the core loads
    the libraries it links to)."""
    try:
        info = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and \
        not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


# ---- python -m tritonserver backends -----------------------------------------

def _dependencies(cls: type[FrameworkModel]) -> tuple[bool, list[str]]:
    notes, ok = [], True
    for module in getattr(cls, "requires", ()) or ():
        try:
            imported = importlib.import_module(module)
        except Exception as e:  # noqa: BLE001 - any failure to import is the answer
            ok = False
            notes.append(f"{module}: {type(e).__name__}: {e}")
        else:
            notes.append(f"{module} {getattr(imported, '__version__', '')}".strip())
    return ok, notes


def describe(found: Optional[dict[str, list[Entry]]] = None) -> list[dict[str, Any]]:
    """One row per declared (name, distribution): where it comes from,
    whether it can load, whether its dependencies import."""
    rows = []
    found = entries() if found is None else found
    for name in sorted(found):
        for entry in found[name]:
            row: dict[str, Any] = {"backend": name, "distribution": entry.distribution,
                                   "version": entry.version, "entry_point": entry.value,
                                   "api_version": None, "loads": False,
                                   "dependencies_import": False, "dependencies": [],
                                   "problem": None}
            if len(found[name]) > 1:
                row["problem"] = str(_error(lambda: resolve(name, found)))
            try:
                cls = check_class(entry, entry.load())
            except Exception as e:  # noqa: BLE001 - shown, not raised
                row["problem"] = row["problem"] or f"{type(e).__name__}: {e}"
            else:
                row["api_version"] = getattr(cls, "api_version", None)
                row["loads"] = row["problem"] is None
                row["dependencies_import"], row["dependencies"] = _dependencies(cls)
            rows.append(row)
    return rows


def _error(fn: Any) -> Optional[Exception]:
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return e
    return None


def _table(rows: Iterable[dict[str, Any]]) -> str:
    lines = []
    for r in rows:
        deps = ", ".join(r["dependencies"]) or "none declared"
        state = "ok" if r["loads"] and r["dependencies_import"] else (
            "dependencies missing" if r["loads"] else "not loadable")
        lines.append(f"{r['backend']}: {r['distribution']} {r['version']} "
                     f"({r['entry_point']}), API {r['api_version'] or '?'}: {state}\n"
                     f"    dependencies: {deps}")
        if r["problem"]:
            lines.append(f"    problem: {r['problem']}")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tritonserver backends",
        description=f"The backends installed through entry point group '{GROUP}' (backend API "
                    f"{API_VERSION}): from which distribution, whether each loads and its "
                    "dependencies import.")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(list(argv or []))
    rows = describe()
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        if not discovery_enabled():
            print(f"discovery is off ({DISCOVERY_ENV}={os.environ.get(DISCOVERY_ENV)}): only "
                  f"{OWN_DISTRIBUTION}'s own backends are read")
        print(_table(rows) if rows else f"no backend declares entry point group '{GROUP}'")
    return 0 if all(r["loads"] for r in rows) else 1
