"""Installing a Triton core from the ``nvidia-pytriton`` wheel, without its Python deps.

Only ``nvidia_pytriton.libs/`` and ``pytriton/tritonserver/`` are taken from the
wheel, keeping their relative layout (the binaries' RPATH is
``$ORIGIN/../../../../nvidia_pytriton.libs``). Nothing is installed into the
user's site-packages; ``pip list`` does not show it.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
from typing import Optional

from . import locate
from .errors import CoreInstallError
from .locking import file_lock
from .locate import MARKER_NAME, PIP_LIBS_DIRNAME, CoreInstall, default_install_dir
from .stub_env import ensure_stub_env

ENV_WHEEL = "TRITONSERVER_CORE_WHEEL"
PYTRITON_PACKAGE = "nvidia-pytriton"
PYTRITON_VERSION = "0.7.0"
TRITON_VERSION = locate.PYTRITON_TO_TRITON[PYTRITON_VERSION]
TRITON_API_VERSION = "1.34"
EXTRACT_PREFIXES = (PIP_LIBS_DIRNAME + "/", "pytriton/tritonserver/")

# sha256 of wheels we have checked by hand. A wheel with one of these names must match.
KNOWN_WHEEL_SHA256 = {
    "nvidia_pytriton-0.7.0-py3-none-manylinux_2_35_x86_64.whl":
        "21f063ff93bb426d0c06b7a55e7eb9efcfe62c0dddd9a908e9877e18710128df",
}

STUB_ENV_DIRNAME = "stub-env"


def _say(quiet: bool, msg: str) -> None:
    if not quiet:
        print(msg, file=sys.stderr, flush=True)


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _download_wheel(into: str, quiet: bool) -> str:
    cmd = [
        sys.executable, "-m", "pip", "download",
        "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
        "--dest", into,
        f"{PYTRITON_PACKAGE}=={PYTRITON_VERSION}",
    ]
    _say(quiet, f"Downloading {PYTRITON_PACKAGE}=={PYTRITON_VERSION} (about 55 MB, wheel only, no dependencies)...")
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.strip().splitlines()[-15:])
        raise CoreInstallError(
            f"'{' '.join(cmd[2:])}' failed (exit {proc.returncode}). The core ships only as a "
            f"manylinux_2_35 x86_64 wheel (glibc >= 2.35). To install from a wheel you already have, "
            f"set {ENV_WHEEL}=/path/to/the.whl.\npip said:\n{tail}"
        )
    wheels = [n for n in os.listdir(into) if n.endswith(".whl") and n.startswith("nvidia_pytriton-")]
    if len(wheels) != 1:
        raise CoreInstallError(f"pip download left {wheels!r} in {into}; expected one nvidia_pytriton wheel")
    return os.path.join(into, wheels[0])


def _check_wheel(path: str) -> str:
    name = os.path.basename(path)
    if not (name.startswith("nvidia_pytriton-") and name.endswith(".whl")):
        raise CoreInstallError(f"{path} is not an nvidia_pytriton wheel")
    digest = _sha256(path)
    expected = KNOWN_WHEEL_SHA256.get(name)
    if expected is not None and digest != expected:
        raise CoreInstallError(f"{path}: sha256 {digest} does not match the known {expected}")
    return digest


def _wheel_version(name: str) -> str:
    parts = name.split("-")
    return parts[1] if len(parts) > 1 else "unknown"


def _safe_member_path(dest: str, name: str) -> str:
    if name.startswith("/") or "\\" in name:
        raise CoreInstallError(f"refusing wheel member with unsafe path: {name!r}")
    parts = [p for p in name.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise CoreInstallError(f"refusing wheel member with unsafe path: {name!r}")
    return os.path.join(dest, *parts)


def _extract(wheel: str, dest: str) -> int:
    """Extract the core's members of ``wheel`` into ``dest``; returns the file count."""
    count = 0
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            name = info.filename
            if not name.startswith(EXTRACT_PREFIXES):
                continue
            target = _safe_member_path(dest, name)
            mode = (info.external_attr >> 16) & 0xFFFF
            if info.is_dir() or name.endswith("/"):
                os.makedirs(target, exist_ok=True)
                os.chmod(target, 0o755)
                continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if stat.S_ISLNK(mode):
                link = zf.read(info).decode("utf-8")
                resolved = os.path.normpath(os.path.join(os.path.dirname(target), link))
                if os.path.isabs(link) or not resolved.startswith(dest + os.sep):
                    raise CoreInstallError(f"refusing symlink {name!r} -> {link!r} leaving the install")
                os.symlink(link, target)
                count += 1
                continue
            with zf.open(info) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
            perm = stat.S_IMODE(mode) or 0o644
            # Keep exec bits, drop group/other write (the wheel has some 0o666/0o777 files).
            perm = (perm | 0o644) & ~0o022
            os.chmod(target, perm)
            count += 1
    if count == 0:
        raise CoreInstallError(f"{wheel} holds no {' or '.join(EXTRACT_PREFIXES)} files")
    return count


def _installed_matches(dest: str, *, sha256: Optional[str]) -> bool:
    marker = locate.read_marker(dest)
    if not marker or marker.get("version") != PYTRITON_VERSION:
        return False
    if sha256 is not None and marker.get("sha256") != sha256:
        return False
    core = locate.inspect_path(dest, "pip")
    return core is not None and core.root is not None


def install_core(
    dest: Optional[str] = None,
    *,
    quiet: bool = False,
    force: bool = False,
    stub_env: bool = True,
) -> CoreInstall:
    """Install the Triton core into ``dest`` (default: ``<sys.prefix>/share/tritonserver/core``).

    Idempotent: when ``dest`` already holds the same wheel's core it only makes
    sure the stub environment exists. ``$TRITONSERVER_CORE_WHEEL`` names a local
    wheel to use instead of downloading.
    """
    dest = os.path.abspath(os.path.expanduser(dest or default_install_dir()))
    parent = os.path.dirname(dest)
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as e:
        raise CoreInstallError(
            f"cannot create {parent}: {e}. Install elsewhere with "
            f"'python -m tritonserver install-core --dest DIR' and set {locate.ENV_CORE}=DIR"
        ) from e

    local_wheel = os.environ.get(ENV_WHEEL) or None
    if local_wheel:
        local_wheel = os.path.abspath(os.path.expanduser(local_wheel))
        if not os.path.isfile(local_wheel):
            raise CoreInstallError(f"${ENV_WHEEL}={local_wheel} is not a file")

    try:
        with file_lock(os.path.join(parent, "." + os.path.basename(dest) + ".lock")):
            wheel_sha = _check_wheel(local_wheel) if local_wheel else None
            if not force and _installed_matches(dest, sha256=wheel_sha):
                _say(quiet, f"Triton core {TRITON_VERSION} already installed in {dest}")
            else:
                _install_locked(dest, parent, local_wheel, wheel_sha, quiet)
    except OSError as e:
        raise CoreInstallError(f"installing the Triton core into {dest} failed: {e}") from e

    if stub_env:

        ensure_stub_env(dest, quiet=quiet)

    locate.clear_core_cache()
    core = locate.inspect_path(dest, "pip")
    if core is None:  # pragma: no cover - extraction verified above
        raise CoreInstallError(f"installed core not found in {dest}")
    return core


def _install_locked(dest: str, parent: str, local_wheel: Optional[str], wheel_sha: Optional[str], quiet: bool) -> None:
    staging: Optional[str]  # None once moved into place
    staging = tempfile.mkdtemp(prefix="." + os.path.basename(dest) + ".new-", dir=parent)
    download_dir = None
    try:
        if local_wheel:
            wheel = local_wheel
        else:
            download_dir = tempfile.mkdtemp(prefix="tritonserver-core-download-")
            wheel = _download_wheel(download_dir, quiet)
            wheel_sha = _check_wheel(wheel)
        _say(quiet, f"Extracting the Triton core from {os.path.basename(wheel)} into {dest} ...")
        try:
            count = _extract(wheel, staging)
        except zipfile.BadZipFile as e:
            raise CoreInstallError(f"{wheel} is not a valid wheel: {e}") from e
        if locate.inspect_path(staging, "pip") is None:
            raise CoreInstallError(f"{wheel} contains no libtritonserver library under {PIP_LIBS_DIRNAME}/")
        marker = {
            "package": PYTRITON_PACKAGE,
            "wheel": os.path.basename(wheel),
            "version": _wheel_version(os.path.basename(wheel)),
            "triton_version": TRITON_VERSION,
            "api_version": TRITON_API_VERSION,
            "sha256": wheel_sha,
            "files": count,
            "installed_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
        with open(os.path.join(staging, MARKER_NAME), "w", encoding="utf-8") as f:
            json.dump(marker, f, indent=2)
            f.write("\n")
        os.chmod(staging, 0o755)

        old = None
        if os.path.lexists(dest):
            # Keep an existing stub environment: it does not depend on the wheel.
            env_dir = os.path.join(dest, STUB_ENV_DIRNAME)
            if os.path.isdir(env_dir) and not os.path.islink(env_dir):
                os.rename(env_dir, os.path.join(staging, STUB_ENV_DIRNAME))
            old = tempfile.mkdtemp(prefix="." + os.path.basename(dest) + ".old-", dir=parent)
            os.rename(dest, os.path.join(old, "core"))
        os.rename(staging, dest)
        staging = None
        if old:
            shutil.rmtree(old, ignore_errors=True)
        _say(quiet, f"Installed Triton core {TRITON_VERSION} ({count} files) in {dest}")
    finally:
        if staging:
            shutil.rmtree(staging, ignore_errors=True)
        if download_dir:
            shutil.rmtree(download_dir, ignore_errors=True)
