"""Tests of tritonserver._core: finding, installing and loading the real Triton core.

Fast tests use small directory trees for the search-order logic and the real
core installed from a local nvidia-pytriton wheel ($TRITONSERVER_CORE_WHEEL,
when set). Tests marked ``slow`` download
from PyPI (the wheel, numpy<2 for the stub environment) or start the core.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import textwrap
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PY_DIR = REPO / "python"

try:
    import tritonserver._core  # noqa: F401
except ImportError:
    sys.path.insert(0, str(PY_DIR))

from tritonserver import _core  # noqa: E402
from tritonserver._core import (  # noqa: E402
    CoreInstall,
    CoreInstallError,
    CoreLoadError,
    CoreNotFoundError,
    StubEnv,
    backend_directory,
    clear_core_cache,
    cli,
    core_version,
    find_core,
    inspect_path,
    install,
    install_core,
    locate,
    search_core,
    stub_env,
    stub_environment,
)

import tritonserver as _package  # noqa: E402

# The package under test, wherever it was imported from (site-packages after
# `pip install .`, or the source tree): subprocesses must load the same one.
PKG_DIR = Path(_package.__file__).resolve().parent

PYVER = "%d.%d" % sys.version_info[:2]
KNOWN_WHEEL = "nvidia_pytriton-0.7.0-py3-none-manylinux_2_35_x86_64.whl"


def _local_wheel():
    p = os.environ.get("TRITONSERVER_CORE_WHEEL")
    return p if p and os.path.isfile(p) else None


def _subprocess_env(**extra):
    env = dict(os.environ)
    if PKG_DIR.parent == PY_DIR:  # running from the source tree, not an install
        env["PYTHONPATH"] = os.pathsep.join([str(PY_DIR)] + [p for p in [env.get("PYTHONPATH")] if p])
    env.pop("TRITONSERVER_CORE", None)
    env.update(extra)
    return env


# Subprocesses import tritonserver._core alone: the package's own __init__ (the binding,
# which may import ssl first) is not run, so "ssl imported after the core" is really tested.
SHIM = (
    "import sys, types\n"
    "if 'tritonserver' not in sys.modules:\n"
    "    _pkg = types.ModuleType('tritonserver')\n"
    f"    _pkg.__path__ = [{str(PKG_DIR)!r}]\n"
    "    sys.modules['tritonserver'] = _pkg\n"
)


def script(code: str) -> str:
    return SHIM + textwrap.dedent(code)


def run_py(code, *, env=None, timeout=120, python=None):
    return subprocess.run(
        [python or sys.executable, "-c", script(code)],
        env=env or _subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, timeout=timeout,
    )


# --------------------------------------------------------------------------- #
# Fake install trees (for the search logic only: nothing here is loaded)
# --------------------------------------------------------------------------- #


def _touch(path: Path, data: bytes = b"", mode: int = 0o644) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(mode)
    return path


def make_pip_base(base: Path, pyver: str = PYVER, dist_version: str | None = None) -> Path:
    """A tree laid out like our install destination / a site-packages with nvidia-pytriton."""
    _touch(base / "nvidia_pytriton.libs" / "libtritonserver-0123abcd.so")
    _touch(base / "nvidia_pytriton.libs" / "libarchive-0000.so.13")
    root = base / "pytriton" / "tritonserver"
    _touch(root / "backends" / "python" / "libtriton_python.so")
    _touch(root / "backends" / "python" / "triton_python_backend_utils.py")
    _touch(root / "python_backend_stubs" / pyver / "triton_python_backend_stub", mode=0o755)
    _touch(root / "caches" / "local" / "libtritoncache_local.so")
    _touch(root / "bin" / "tritonserver", mode=0o755)
    if dist_version:
        _touch(base / f"nvidia_pytriton-{dist_version}.dist-info" / "METADATA",
               f"Metadata-Version: 2.4\nName: nvidia-pytriton\nVersion: {dist_version}\n\nbody\n".encode())
    return base


def make_container(root: Path, stub_python: str = PYVER, version: str = "2.51.0") -> Path:
    """A tree laid out like /opt/tritonserver in NVIDIA's container."""
    _touch(root / "lib" / "libtritonserver.so")
    pb = root / "backends" / "python"
    _touch(pb / "libtriton_python.so")
    _touch(pb / "triton_python_backend_utils.py")
    _touch(pb / "triton_python_backend_stub", b"\x7fELF...libpython%s.so.1.0\x00..." % stub_python.encode(), 0o755)
    _touch(root / "backends" / "onnxruntime" / "libtriton_onnxruntime.so")
    _touch(root / "backends" / "mine" / "libtriton_mine.so")
    _touch(root / "caches" / "local" / "libtritoncache_local.so")
    _touch(root / "bin" / "tritonserver", mode=0o755)
    (root / "TRITON_VERSION").write_text(version + "\n")
    return root


# --------------------------------------------------------------------------- #
# Search order
# --------------------------------------------------------------------------- #


@pytest.fixture
def places(tmp_path):
    dest = make_pip_base(tmp_path / "dest")
    site = make_pip_base(tmp_path / "site", dist_version="0.7.0")
    container = make_container(tmp_path / "opt" / "tritonserver")
    (tmp_path / "nothing").mkdir()
    return dict(dest=dest, site=site, container=container, empty=tmp_path / "nothing")


def _search(places, *, env=None, dest=True, site=True, container=True):
    return search_core(
        env_value=env,
        install_dir=str(places["dest"] if dest else places["empty"]),
        search_path=["", str(places["empty"]), str(places["site"] if site else places["empty"]), "/no/such/dir"],
        container_root=str(places["container"] if container else places["empty"]),
    )


def test_search_order_env_then_dest_then_sys_path_then_container(places):
    lib = places["site"] / "nvidia_pytriton.libs" / "libtritonserver-0123abcd.so"
    core = _search(places, env=str(lib))
    assert core.source == "env" and core.library == str(lib)

    core = _search(places)
    assert core.source == "pip"
    assert core.library == str(places["dest"] / "nvidia_pytriton.libs" / "libtritonserver-0123abcd.so")

    core = _search(places, dest=False)
    assert core.source == "pip" and core.libs_dir == str(places["site"] / "nvidia_pytriton.libs")

    core = _search(places, dest=False, site=False)
    assert core.source == "container"
    assert core.library == str(places["container"] / "lib" / "libtritonserver.so")

    with pytest.raises(CoreNotFoundError):
        _search(places, dest=False, site=False, container=False)


def test_pip_layout_fields(places):
    core = _search(places)
    root = places["dest"] / "pytriton" / "tritonserver"
    assert core == CoreInstall(
        library=str(places["dest"] / "nvidia_pytriton.libs" / "libtritonserver-0123abcd.so"),
        libs_dir=str(places["dest"] / "nvidia_pytriton.libs"),
        root=str(root),
        python_backend_dir=str(root / "backends" / "python"),
        stub_path=str(root / "python_backend_stubs" / PYVER / "triton_python_backend_stub"),
        cache_dir=str(root / "caches"),
        executable=str(root / "bin" / "tritonserver"),
        source="pip",
    )
    assert json.loads(json.dumps(core.to_dict()))["source"] == "pip"


def test_container_layout_fields(places):
    core = _search(places, dest=False, site=False)
    root = places["container"]
    assert core.root == str(root)
    assert core.libs_dir == str(root / "lib")
    assert core.python_backend_dir == str(root / "backends" / "python")
    assert core.stub_path == str(root / "backends" / "python" / "triton_python_backend_stub")
    assert core.cache_dir == str(root / "caches")
    assert core.executable == str(root / "bin" / "tritonserver")
    assert core_version(core) == "2.51.0"


def test_container_stub_for_another_python_is_not_used(tmp_path):
    other = "3.8" if PYVER != "3.8" else "3.9"
    root = make_container(tmp_path / "tritonserver", stub_python=other)
    core = search_core(env_value=None, install_dir=str(tmp_path / "x"), search_path=[],
                       container_root=str(root))
    assert core.python_backend_dir is not None
    assert core.stub_path is None


def test_stub_for_running_python_only(tmp_path):
    other = "3.8" if PYVER != "3.8" else "3.9"
    base = make_pip_base(tmp_path / "b", pyver=other)
    core = inspect_path(str(base), "pip")
    assert core.root is not None and core.stub_path is None


@pytest.mark.parametrize("what", ["library", "libs_dir", "base", "root"])
def test_env_accepts_file_folder_and_pip_root(places, what):
    base = places["site"]
    arg = {
        "library": base / "nvidia_pytriton.libs" / "libtritonserver-0123abcd.so",
        "libs_dir": base / "nvidia_pytriton.libs",
        "base": base,
        "root": base / "pytriton" / "tritonserver",
    }[what]
    core = _search(places, env=str(arg))
    assert core.source == "env"
    assert core.libs_dir == str(base / "nvidia_pytriton.libs")
    assert core.root == str(base / "pytriton" / "tritonserver")
    assert core.stub_path is not None


@pytest.mark.parametrize("what", ["root", "lib_dir", "library"])
def test_env_accepts_container_like_root(places, what):
    root = places["container"]
    arg = {"root": root, "lib_dir": root / "lib", "library": root / "lib" / "libtritonserver.so"}[what]
    core = _search(places, env=str(arg))
    assert core.source == "env" and core.root == str(root)
    assert core.python_backend_dir == str(root / "backends" / "python")


def test_env_bare_library_has_no_root(tmp_path, places):
    lib = _touch(tmp_path / "loose" / "libtritonserver.so")
    core = _search(places, env=str(lib))
    assert core.library == str(lib) and core.root is None
    assert core.python_backend_dir is None and core.stub_path is None and core.executable is None


def test_env_pointing_nowhere_is_an_error_not_a_fallback(places):
    with pytest.raises(CoreNotFoundError) as ei:
        _search(places, env=str(places["empty"]))
    msg = str(ei.value)
    assert "TRITONSERVER_CORE" in msg and str(places["empty"]) in msg
    assert "python -m tritonserver install-core" in msg


def test_not_found_lists_every_place_in_order(places):
    with pytest.raises(CoreNotFoundError) as ei:
        _search(places, dest=False, site=False, container=False)
    err = ei.value
    msg = str(err)
    assert isinstance(err, RuntimeError)
    assert "python -m tritonserver install-core" in msg
    looked = list(err.looked_in)
    assert looked[0].startswith("$TRITONSERVER_CORE")
    assert looked[1].startswith(str(places["empty"] / "nvidia_pytriton.libs"))
    assert "(sys.path)" in looked[2]
    assert looked[-1].startswith(str(places["empty"] / "lib" / "libtritonserver.so"))
    positions = [msg.index(p.split(" (")[0]) for p in looked[1:]]
    assert positions == sorted(positions)
    assert len(looked) == 4  # "" and duplicate sys.path entries are searched once


def test_library_name_patterns(tmp_path):
    d = tmp_path / "libs"
    _touch(d / "libtritonserver_other.so")
    _touch(d / "libtritoncache_local.so")
    assert inspect_path(str(d)) is None
    _touch(d / "libtritonserver-717102f0.so")
    assert inspect_path(str(d)).library.endswith("libtritonserver-717102f0.so")
    _touch(d / "libtritonserver.so")
    assert inspect_path(str(d)).library.endswith("/libtritonserver.so")


def test_find_core_is_cached_and_follows_env(monkeypatch, places):
    clear_core_cache()
    a = make_pip_base(places["empty"] / "a")
    b = make_pip_base(places["empty"] / "b")
    monkeypatch.setenv("TRITONSERVER_CORE", str(a))
    first = find_core()
    assert first.source == "env" and first.libs_dir == str(a / "nvidia_pytriton.libs")
    assert find_core() is first
    monkeypatch.setenv("TRITONSERVER_CORE", str(b))
    assert find_core().libs_dir == str(b / "nvidia_pytriton.libs")
    # A core that vanished is searched again.
    monkeypatch.setenv("TRITONSERVER_CORE", str(a))
    assert find_core().libs_dir == str(a / "nvidia_pytriton.libs")
    os.unlink(find_core().library)
    with pytest.raises(CoreNotFoundError):
        find_core()
    clear_core_cache()


def test_core_version_sources(tmp_path, places):
    assert core_version(inspect_path(str(places["site"]))) == "2.51.0"  # dist-info 0.7.0
    assert core_version(inspect_path(str(places["dest"]))) is None  # nothing to tell
    assert core_version(inspect_path(str(make_pip_base(tmp_path / "u", dist_version="0.0.1")))) is None
    (places["dest"] / locate.MARKER_NAME).write_text(json.dumps({"triton_version": "9.9.9"}))
    assert core_version(inspect_path(str(places["dest"]))) == "9.9.9"


def test_core_not_found_error_lives_in_errors_module():
    from tritonserver._core import errors

    assert CoreNotFoundError is errors.CoreNotFoundError
    assert CoreNotFoundError.__module__ == "tritonserver._core.errors"
    assert issubclass(CoreNotFoundError, RuntimeError)


# --------------------------------------------------------------------------- #
# Installer, on small wheels made here
# --------------------------------------------------------------------------- #


def _fake_wheel(path: Path, members) -> Path:
    """members: (name, bytes, mode) tuples; mode may include S_IFLNK."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        for name, data, mode in members:
            info = zipfile.ZipInfo(name)
            info.create_system = 3
            info.external_attr = mode << 16
            zf.writestr(info, data)
    return path


FAKE_MEMBERS = [
    ("nvidia_pytriton.libs/libtritonserver-aaaa.so", b"x", 0o100666),
    ("pytriton/tritonserver/bin/tritonserver", b"#!/bin/sh\n", 0o100777),
    ("pytriton/tritonserver/backends/python/libtriton_python.so", b"x", 0o100666),
    ("pytriton/tritonserver/backends/python/triton_python_backend_utils.py", b"x", 0o100666),
    (f"pytriton/tritonserver/python_backend_stubs/{PYVER}/triton_python_backend_stub", b"x", 0o100755),
    ("pytriton/__init__.py", b"not extracted", 0o100644),
    ("nvidia_pytriton-9.9.9.dist-info/METADATA", b"Version: 9.9.9\n", 0o100644),
]


def test_install_fake_wheel_extracts_only_the_core(tmp_path, monkeypatch):
    wheel = _fake_wheel(tmp_path / "w" / "nvidia_pytriton-9.9.9-py3-none-any.whl", FAKE_MEMBERS)
    monkeypatch.setenv("TRITONSERVER_CORE_WHEEL", str(wheel))
    dest = tmp_path / "dest"
    core = install_core(str(dest), quiet=True, stub_env=False)
    assert core.library == str(dest / "nvidia_pytriton.libs" / "libtritonserver-aaaa.so")
    assert core.executable and core.stub_path and core.python_backend_dir
    assert not (dest / "pytriton" / "__init__.py").exists()
    assert not list(dest.glob("*.dist-info"))
    assert stat.S_IMODE(os.stat(core.executable).st_mode) == 0o755
    assert stat.S_IMODE(os.stat(core.library).st_mode) == 0o644
    marker = json.loads((dest / locate.MARKER_NAME).read_text())
    assert marker["wheel"] == wheel.name and marker["version"] == "9.9.9"
    assert marker["triton_version"] == "2.51.0"
    assert marker["sha256"] == install._sha256(str(wheel))
    # nothing left beside dest
    assert sorted(p.name for p in tmp_path.iterdir()) == [".dest.lock", "dest", "w"]


def test_install_replaces_and_keeps_stub_env(tmp_path, monkeypatch):
    wheel = _fake_wheel(tmp_path / "nvidia_pytriton-9.9.9-py3-none-any.whl", FAKE_MEMBERS)
    monkeypatch.setenv("TRITONSERVER_CORE_WHEEL", str(wheel))
    dest = tmp_path / "dest"
    install_core(str(dest), quiet=True, stub_env=False)
    _touch(dest / "stub-env" / "py3.x" / "kept")
    _touch(dest / "pytriton" / "stale")
    install_core(str(dest), quiet=True, stub_env=False, force=True)
    assert (dest / "stub-env" / "py3.x" / "kept").exists()
    assert not (dest / "pytriton" / "stale").exists()


def test_install_rejects_unsafe_members(tmp_path, monkeypatch):
    bad = FAKE_MEMBERS + [("pytriton/tritonserver/../../evil", b"x", 0o100644)]
    wheel = _fake_wheel(tmp_path / "nvidia_pytriton-9.9.9-py3-none-any.whl", bad)
    monkeypatch.setenv("TRITONSERVER_CORE_WHEEL", str(wheel))
    with pytest.raises(CoreInstallError, match="unsafe"):
        install_core(str(tmp_path / "dest"), quiet=True, stub_env=False)
    assert not (tmp_path / "dest").exists() and not (tmp_path / "evil").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".dest.new-")]
    with pytest.raises(CoreInstallError, match="unsafe"):
        install._safe_member_path(str(tmp_path), "/pytriton/tritonserver/x")


def test_install_symlinks_must_stay_inside(tmp_path, monkeypatch):
    ok = FAKE_MEMBERS + [("nvidia_pytriton.libs/libalias.so", b"libtritonserver-aaaa.so", stat.S_IFLNK | 0o777)]
    wheel_name = "nvidia_pytriton-9.9.9-py3-none-any.whl"
    monkeypatch.setenv("TRITONSERVER_CORE_WHEEL", str(_fake_wheel(tmp_path / "a" / wheel_name, ok)))
    dest = tmp_path / "dest"
    install_core(str(dest), quiet=True, stub_env=False)
    assert os.readlink(dest / "nvidia_pytriton.libs" / "libalias.so") == "libtritonserver-aaaa.so"
    bad = FAKE_MEMBERS + [("nvidia_pytriton.libs/libevil.so", b"/etc/passwd", stat.S_IFLNK | 0o777)]
    monkeypatch.setenv("TRITONSERVER_CORE_WHEEL", str(_fake_wheel(tmp_path / "b" / wheel_name, bad)))
    with pytest.raises(CoreInstallError, match="symlink"):
        install_core(str(tmp_path / "dest2"), quiet=True, stub_env=False)


def test_install_checks_known_wheel_hash(tmp_path, monkeypatch):
    wheel = _fake_wheel(tmp_path / KNOWN_WHEEL, FAKE_MEMBERS)
    monkeypatch.setenv("TRITONSERVER_CORE_WHEEL", str(wheel))
    with pytest.raises(CoreInstallError, match="sha256"):
        install_core(str(tmp_path / "dest"), quiet=True, stub_env=False)
    monkeypatch.setenv("TRITONSERVER_CORE_WHEEL", str(tmp_path / "missing.whl"))
    with pytest.raises(CoreInstallError, match="not a file"):
        install_core(str(tmp_path / "dest"), quiet=True, stub_env=False)


def test_install_rejects_a_broken_wheel(tmp_path, monkeypatch):
    wheel = tmp_path / "nvidia_pytriton-9.9.9-py3-none-any.whl"
    wheel.write_bytes(b"not a zip")
    monkeypatch.setenv("TRITONSERVER_CORE_WHEEL", str(wheel))
    with pytest.raises(CoreInstallError, match="not a valid wheel"):
        install_core(str(tmp_path / "dest"), quiet=True, stub_env=False)
    assert not (tmp_path / "dest").exists()


def test_default_install_dir_is_per_environment():
    assert locate.default_install_dir() == os.path.join(sys.prefix, "share", "tritonserver", "core")


# --------------------------------------------------------------------------- #
# The real core, installed from the local wheel
# --------------------------------------------------------------------------- #


@pytest.fixture(scope="session")
def real_dest(tmp_path_factory):
    wheel = _local_wheel()
    if wheel is None:
        pytest.skip("no local nvidia-pytriton 0.7.0 wheel: set TRITONSERVER_CORE_WHEEL")
    dest = tmp_path_factory.mktemp("core") / "core"
    old = os.environ.get("TRITONSERVER_CORE_WHEEL")
    os.environ["TRITONSERVER_CORE_WHEEL"] = wheel
    try:
        install_core(str(dest), quiet=True, stub_env=False)
    finally:
        if old is None:
            del os.environ["TRITONSERVER_CORE_WHEEL"]
        else:
            os.environ["TRITONSERVER_CORE_WHEEL"] = old
    return dest


@pytest.fixture(scope="session")
def real_core(real_dest):
    return inspect_path(str(real_dest), "pip")


def test_real_install_layout(real_dest, real_core):
    root = real_dest / "pytriton" / "tritonserver"
    assert real_core.library == str(real_dest / "nvidia_pytriton.libs" / "libtritonserver-717102f0.so")
    assert real_core.root == str(root)
    assert real_core.stub_path == str(root / "python_backend_stubs" / PYVER / "triton_python_backend_stub")
    assert real_core.cache_dir and os.path.isfile(os.path.join(real_core.cache_dir, "local", "libtritoncache_local.so"))
    for exe in (real_core.executable, real_core.stub_path):
        m = stat.S_IMODE(os.stat(exe).st_mode)
        assert m & 0o111 == 0o111 and not m & 0o022
    for f in (real_dest / "nvidia_pytriton.libs").iterdir():
        assert not stat.S_IMODE(f.stat().st_mode) & 0o022
    assert core_version(real_core) == "2.51.0"
    marker = json.loads((real_dest / locate.MARKER_NAME).read_text())
    assert marker["wheel"] == KNOWN_WHEEL
    assert marker["sha256"] == install.KNOWN_WHEEL_SHA256[KNOWN_WHEEL]
    assert marker["version"] == "0.7.0" and marker["triton_version"] == "2.51.0"
    assert not (real_dest / "pytriton" / "__init__.py").exists()


def test_real_install_is_idempotent_and_fast(real_dest, monkeypatch):
    monkeypatch.setenv("TRITONSERVER_CORE_WHEEL", _local_wheel())
    lib = real_dest / "nvidia_pytriton.libs" / "libtritonserver-717102f0.so"
    before = lib.stat()
    t = time.monotonic()
    install_core(str(real_dest), quiet=True, stub_env=False)
    assert time.monotonic() - t < 3.0
    after = lib.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_env_var_finds_the_real_install(real_dest, real_core, monkeypatch):
    monkeypatch.setenv("TRITONSERVER_CORE", str(real_dest))
    clear_core_cache()
    try:
        core = find_core()
    finally:
        clear_core_cache()
    assert core.library == real_core.library and core.source == "env"


LOAD_AND_CHECK = """
    import ctypes, json, os, sys, threading
    from tritonserver._core import inspect_path, load_core, core_handle, preload
    core = inspect_path(sys.argv[1] if len(sys.argv) > 1 else {dest!r}, "pip")
    ssl_before = "_ssl" in sys.modules or "ssl" in sys.modules
    errors = []
    def go():
        try:
            load_core(core)
        except Exception as e:
            errors.append(repr(e))
    threads = [threading.Thread(target=go) for _ in range(6)]
    [t.start() for t in threads]; [t.join() for t in threads]
    load_core(core)
    lib = core_handle(core)
    fn = lib["TRITONSERVER_ApiVersion"]
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.POINTER(ctypes.c_uint32)] * 2
    major, minor = ctypes.c_uint32(), ctypes.c_uint32()
    err = fn(ctypes.byref(major), ctypes.byref(minor))
    import hashlib, ssl
    print(json.dumps(dict(err=err, api=[major.value, minor.value], errors=errors, ssl_before=ssl_before,
                          cores=len(preload._cores), ssl=ssl.OPENSSL_VERSION,
                          sha=hashlib.sha256(b"abc").hexdigest(),
                          archive=any("libarchive" in l for l in open("/proc/self/maps")))))
"""


def test_load_core_real(real_dest):
    out = run_py(LOAD_AND_CHECK.format(dest=str(real_dest)))
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["err"] is None and res["api"] == [1, 34]
    assert res["errors"] == [] and res["cores"] == 1
    assert not res["ssl_before"]  # ssl was first imported after the core was loaded
    assert res["archive"]
    clean = run_py("import ssl; print(ssl.OPENSSL_VERSION)")
    assert res["ssl"] == clean.stdout.strip()
    assert res["sha"] == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_rtld_global_would_have_changed_ssl(real_dest):
    """Control: shows the ssl check above can fail (the wheel carries OpenSSL 3.0.2)."""
    code = """
        import os, sys
        from tritonserver._core import inspect_path, preload
        preload._MODE = os.RTLD_GLOBAL | os.RTLD_NOW
        preload.load_core(inspect_path(sys.argv[1], "pip"))
        import ssl; print(ssl.OPENSSL_VERSION)
    """
    out = subprocess.run([sys.executable, "-c", script(code), str(real_dest)],
                         env=_subprocess_env(), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "OpenSSL 3.0.2 " in out.stdout


def test_load_core_errors(tmp_path):
    empty = _touch(tmp_path / "a" / "libtritonserver.so")
    with pytest.raises(CoreLoadError, match="cannot load"):
        _core.load_core(inspect_path(str(empty)))


def test_load_core_names_a_dependency_found_nowhere(real_dest, tmp_path):
    # libcurl from the wheel needs libnghttp2-*, which this folder does not have.
    fake = tmp_path / "libs" / "libtritonserver-0bad.so"
    fake.parent.mkdir()
    fake.write_bytes((real_dest / "nvidia_pytriton.libs" / "libcurl-75a2bf80.so.4.7.0").read_bytes())
    out = run_py(f"""
        from tritonserver._core import inspect_path, load_core, CoreLoadError
        try:
            load_core(inspect_path({str(fake)!r}))
        except CoreLoadError as e:
            print("ERR", e)
    """)
    assert "ERR" in out.stdout and "found neither by the system loader nor in" in out.stdout
    assert "libnghttp2" in out.stdout or "libssh" in out.stdout or ".so" in out.stdout


# --------------------------------------------------------------------------- #
# StubEnv
# --------------------------------------------------------------------------- #


def test_stub_env_apply_is_idempotent():
    s = StubEnv(True, kind="stub-env", python="/e/bin/python3", path_prepend="/e/bin",
                ld_library_path_append="/py/lib")
    env = {"PATH": "/usr/bin:/e/bin:/bin", "LD_LIBRARY_PATH": "/x"}
    s.apply(env)
    assert env == {"PATH": "/e/bin:/usr/bin:/bin", "LD_LIBRARY_PATH": "/x:/py/lib"}
    s.apply(env)
    assert env == {"PATH": "/e/bin:/usr/bin:/bin", "LD_LIBRARY_PATH": "/x:/py/lib"}
    assert s.changes(env) == {}
    env2 = {}
    s.apply(env2)
    assert env2["PATH"].split(":")[0] == "/e/bin" and env2["LD_LIBRARY_PATH"] == "/py/lib"
    off = StubEnv(False, reason="no")
    env3 = {"PATH": "/a"}
    off.apply(env3)
    assert env3 == {"PATH": "/a"}


def test_stub_environment_without_stub(tmp_path):
    other = "3.8" if PYVER != "3.8" else "3.9"
    core = inspect_path(str(make_pip_base(tmp_path / "b", pyver=other)))
    s = stub_environment(core)
    assert not s.usable and PYVER in s.reason and "stub" in s.reason


def test_stub_environment_refuses_numpy2_without_stub_env(tmp_path, monkeypatch):
    from importlib import metadata

    try:
        np_major = int(metadata.version("numpy").split(".")[0])
    except metadata.PackageNotFoundError:
        np_major = None
    if np_major is not None and np_major < 2:
        pytest.skip("this environment has numpy<2: the interpreter itself is used")
    monkeypatch.setattr(stub_env, "default_install_dir", lambda: str(tmp_path / "nowhere"))
    core = inspect_path(str(make_pip_base(tmp_path / "b")))
    s = stub_environment(core)
    assert not s.usable
    if sys.version_info >= (3, 13):  # numpy<2 has no wheels for it: no stub environment helps
        assert "Python 3.12 or older" in s.reason and "numpy" in s.reason
    else:
        assert "python -m tritonserver install-core" in s.reason and "numpy" in s.reason
    assert s.changes({"PATH": "/bin"}) == {}


def _fake_ready_env(base: Path, numpy_version: str = "1.26.4") -> Path:
    env = base / "stub-env" / f"py{PYVER}"
    (env / "bin").mkdir(parents=True)
    os.symlink(sys.executable, env / "bin" / "python3")
    (env / stub_env.READY_NAME).write_text(json.dumps({"numpy_version": numpy_version}))
    return env


def test_stub_environment_prefers_the_install_stub_env(tmp_path, monkeypatch):
    from importlib import metadata

    try:
        if int(metadata.version("numpy").split(".")[0]) < 2:
            pytest.skip("this environment has numpy<2: the interpreter itself is used")
    except metadata.PackageNotFoundError:
        pass
    monkeypatch.setattr(stub_env, "default_install_dir", lambda: str(tmp_path / "default"))
    base = make_pip_base(tmp_path / "dest")
    (base / locate.MARKER_NAME).write_text("{}")
    env = _fake_ready_env(base)
    s = stub_environment(inspect_path(str(base), "pip"))
    assert s.usable and s.kind == "stub-env" and s.numpy_version == "1.26.4"
    assert s.path_prepend == str(env / "bin") and s.python == str(env / "bin" / "python3")
    # A core elsewhere (pip --no-deps into site-packages) uses the default install's stub env.
    site = make_pip_base(tmp_path / "site")
    assert not stub_environment(inspect_path(str(site), "pip")).usable
    default_env = _fake_ready_env(tmp_path / "default")
    s = stub_environment(inspect_path(str(site), "pip"))
    assert s.usable and s.path_prepend == str(default_env / "bin")
    # A broken env (its python gone) is not used.
    os.unlink(default_env / "bin" / "python3")
    assert not stub_environment(inspect_path(str(site), "pip")).usable


# --------------------------------------------------------------------------- #
# Backend folder
# --------------------------------------------------------------------------- #


def _own_backends(tmp_path: Path) -> Path:
    pkg = tmp_path / "pkg_backends"
    _touch(pkg / "mine" / "libtriton_mine.so")
    _touch(pkg / "mine" / "helper.txt")
    _touch(pkg / "other" / "libtriton_other.so")
    _touch(pkg / "notabackend" / "readme.txt")
    return pkg


def test_backend_directory_pip_core(tmp_path):
    core = inspect_path(str(make_pip_base(tmp_path / "b")), "pip")
    pkg = _own_backends(tmp_path)
    d = Path(backend_directory(core, str(pkg)))
    assert d.name.startswith("tritonserver-backends-")
    assert sorted(p.name for p in d.iterdir()) == ["mine", "other", "python"]
    assert os.readlink(d / "mine" / "libtriton_mine.so") == str(pkg / "mine" / "libtriton_mine.so")
    assert os.readlink(d / "mine" / "helper.txt") == str(pkg / "mine" / "helper.txt")
    assert os.readlink(d / "mine" / "libtritonserver.so") == core.library
    assert os.readlink(d / "other" / "libtritonserver.so") == core.library
    py = d / "python"
    assert os.readlink(py / "triton_python_backend_stub") == core.stub_path
    assert os.readlink(py / "libtriton_python.so") == os.path.join(core.python_backend_dir, "libtriton_python.so")
    assert (py / "triton_python_backend_utils.py").is_file()
    assert backend_directory(core, str(pkg)) == str(d)  # once per process
    d2 = backend_directory(core, None)
    assert d2 != str(d) and sorted(os.listdir(d2)) == ["python"]


def test_backend_directory_container_core_does_not_shadow_ours(tmp_path):
    root = make_container(tmp_path / "tritonserver")
    core = inspect_path(str(root), "container")
    pkg = _own_backends(tmp_path)
    d = Path(backend_directory(core, str(pkg)))
    assert sorted(p.name for p in d.iterdir()) == ["mine", "onnxruntime", "other", "python"]
    assert (d / "mine").is_dir() and not (d / "mine").is_symlink()
    assert os.readlink(d / "mine" / "libtriton_mine.so") == str(pkg / "mine" / "libtriton_mine.so")
    assert os.readlink(d / "onnxruntime") == str(root / "backends" / "onnxruntime")
    assert os.readlink(d / "python" / "triton_python_backend_stub") == core.stub_path


def test_backend_directory_removed_at_exit_not_by_forked_child(tmp_path):
    base = make_pip_base(tmp_path / "b")
    out = run_py(f"""
        import os, sys
        from tritonserver._core import inspect_path, backend_directory
        d = backend_directory(inspect_path({str(base)!r}), None)
        pid = os.fork()
        if pid == 0:
            sys.exit(0)  # runs the inherited atexit handlers
        os.waitpid(pid, 0)
        print(d, os.path.isdir(d))
    """)
    assert out.returncode == 0, out.stderr
    d, alive = out.stdout.split()
    assert alive == "True"
    assert not os.path.exists(d)


# --------------------------------------------------------------------------- #
# CLI
# --------------------------------------------------------------------------- #


def test_cli_core_info_and_version(real_dest, real_core, monkeypatch, capsys):
    monkeypatch.setenv("TRITONSERVER_CORE", str(real_dest))
    clear_core_cache()
    try:
        assert cli.main(["core-info"]) == 0
        info = json.loads(capsys.readouterr().out)
        assert info["library"] == real_core.library and info["version"] == "2.51.0"
        assert set(info) >= {"library", "libs_dir", "root", "python_backend_dir", "stub_path",
                             "cache_dir", "executable", "source"}
        assert cli.main(["--version"]) == 0
        out = capsys.readouterr().out
        assert out.startswith("tritonserver ") and "2.51.0" in out and real_core.library in out
    finally:
        clear_core_cache()


def test_cli_when_no_core(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("TRITONSERVER_CORE", raising=False)
    monkeypatch.setattr(locate, "default_install_dir", lambda: str(tmp_path / "none"))
    monkeypatch.setattr(locate, "CONTAINER_ROOT", str(tmp_path / "opt"))
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    clear_core_cache()
    try:
        assert cli.main(["core-info"]) == 1
        err = capsys.readouterr().err
        assert str(tmp_path / "none") in err and "install-core" in err
        assert cli.main(["--version"]) == 0
        out = capsys.readouterr().out
        assert "not found" in out and str(tmp_path / "opt") in out
    finally:
        clear_core_cache()


def test_cli_help_without_command(capsys):
    assert cli.main([]) == 2
    assert "install-core" in capsys.readouterr().out


# --------------------------------------------------------------------------- #
# Slow: the stub environment (venv + numpy<2 from PyPI), the core running,
# the real download.
# --------------------------------------------------------------------------- #


@pytest.fixture(scope="session")
def stub_dest(real_dest):
    if sys.version_info >= (3, 13):
        pytest.skip("numpy<2 has no wheels for Python 3.13+")
    env = stub_env.ensure_stub_env(str(real_dest), quiet=True)
    assert env is not None, "ensure_stub_env failed (needs PyPI for numpy<2)"
    return real_dest


def _stub_os_env(core):
    s = stub_environment(core)
    assert s.usable, s.reason
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    s.apply(env)
    return s, env


@pytest.mark.slow
@pytest.mark.timeout(600)  # PyPI downloads (wheel, numpy<2) on a cold cache
def test_stub_env_python_has_numpy1_and_user_packages(stub_dest, real_core):
    env_dir = stub_dest / "stub-env" / f"py{PYVER}"
    t = time.monotonic()
    assert stub_env.ensure_stub_env(str(stub_dest)) == str(env_dir)
    assert time.monotonic() - t < 1.0  # already made
    import numpy

    if int(numpy.__version__.split(".")[0]) < 2:
        pytest.skip("with numpy 1 the stub uses this interpreter, not the stub env")
    s, env = _stub_os_env(real_core)
    assert s.kind == "stub-env" and s.numpy_version.startswith("1.26")
    assert s.python == str(env_dir / "bin" / "python3")
    # What the stub will find: python3 first on PATH.
    import shutil

    py = shutil.which("python3", path=env["PATH"])
    assert py == s.python
    code = "import json, numpy, pytest; print(json.dumps([numpy.__version__, numpy.__file__, pytest.__file__]))"
    out = subprocess.run([py, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "Error processing" not in out.stderr, out.stderr
    np_version, np_file, pytest_file = json.loads(out.stdout)
    assert np_version.startswith("1.26.")
    assert np_file.startswith(str(env_dir))
    assert not pytest_file.startswith(str(env_dir))  # from the user's site-packages


@pytest.mark.slow
@pytest.mark.timeout(600)  # PyPI downloads (wheel, numpy<2) on a cold cache
def test_stub_binary_starts_with_stub_env(stub_dest, real_core):
    s, env = _stub_os_env(real_core)
    out = subprocess.run([real_core.stub_path], env=env, capture_output=True, text=True, timeout=60)
    text = out.stdout + out.stderr
    assert out.returncode != 0
    assert "Expected 9 arguments" in text, text
    assert "error while loading shared libraries" not in text and "numpy" not in text.lower()
    ldd = subprocess.run(["ldd", real_core.stub_path], env=env, capture_output=True, text=True).stdout
    assert "not found" not in ldd
    if s.ld_library_path_append:
        assert os.path.join(s.ld_library_path_append, f"libpython{PYVER}.so") in ldd


@pytest.mark.slow
@pytest.mark.timeout(600)  # PyPI downloads (wheel, numpy<2) on a cold cache
def test_stub_environment_uses_interpreter_with_numpy1(stub_dest, real_core):
    """Run from the stub env's own python (numpy 1.26): the interpreter itself is chosen."""
    py = str(stub_dest / "stub-env" / f"py{PYVER}" / "bin" / "python3")
    out = run_py(f"""
        import json
        from tritonserver._core import inspect_path, stub_environment
        s = stub_environment(inspect_path({str(stub_dest)!r}, "pip"))
        print(json.dumps([s.usable, s.kind, s.numpy_version, s.path_prepend]))
    """, python=py)
    assert out.returncode == 0, out.stderr
    usable, kind, npv, prepend = json.loads(out.stdout)
    assert usable and kind == "interpreter" and npv.startswith("1.26")
    assert prepend == str(stub_dest / "stub-env" / f"py{PYVER}" / "bin")


PY_MODEL_CONFIG = """
name: "add1"
backend: "python"
max_batch_size: 0
input [ { name: "IN", data_type: TYPE_FP32, dims: [ 4 ] } ]
output [
  { name: "OUT", data_type: TYPE_FP32, dims: [ 4 ] },
  { name: "NPMAJOR", data_type: TYPE_INT32, dims: [ 1 ] }
]
instance_group [ { kind: KIND_CPU, count: 1 } ]
"""

PY_MODEL = """
import numpy as np
import pytest  # from the user's site-packages, through the stub env's .pth
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            major = int(np.__version__.split(".")[0])
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUT", (x + 1).astype(np.float32)),
                pb_utils.Tensor("NPMAJOR", np.array([major], dtype=np.int32)),
            ]))
        return responses
"""


@pytest.fixture
def py_model_repo(tmp_path):
    repo = tmp_path / "repo"
    (repo / "add1" / "1").mkdir(parents=True)
    (repo / "add1" / "config.pbtxt").write_text(PY_MODEL_CONFIG)
    (repo / "add1" / "1" / "model.py").write_text(PY_MODEL)
    return repo


@pytest.mark.slow
@pytest.mark.timeout(600)  # PyPI downloads (wheel, numpy<2) on a cold cache
def test_python_model_loads_in_process(stub_dest, py_model_repo):
    """load_core + backend_directory + StubEnv: the core loads a python model in this process."""
    code = """
        import ctypes, os, sys
        from tritonserver._core import inspect_path, load_core, core_handle, backend_directory, stub_environment
        core = inspect_path(sys.argv[1], "pip")
        s = stub_environment(core)
        assert s.usable, s.reason
        s.apply()
        load_core(core)
        lib = core_handle(core)
        P = ctypes.c_void_p
        def f(name, *args):
            fn = lib[name]; fn.restype = P; fn.argtypes = list(args); return fn
        msg = lib["TRITONSERVER_ErrorMessage"]; msg.restype = ctypes.c_char_p; msg.argtypes = [P]
        def chk(err):
            if err:
                raise RuntimeError(msg(err).decode())
        opts = P()
        chk(f("TRITONSERVER_ServerOptionsNew", ctypes.POINTER(P))(ctypes.byref(opts)))
        chk(f("TRITONSERVER_ServerOptionsSetModelRepositoryPath", P, ctypes.c_char_p)(opts, sys.argv[2].encode()))
        chk(f("TRITONSERVER_ServerOptionsSetBackendDirectory", P, ctypes.c_char_p)(
            opts, backend_directory(core, None).encode()))
        chk(f("TRITONSERVER_ServerOptionsSetModelLoadRetryCount", P, ctypes.c_uint32)(opts, 0))
        chk(f("TRITONSERVER_ServerOptionsSetBackendConfig", P, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p)(
            opts, b"python", b"shm-region-prefix-name", b"tsrvtest%d" % os.getpid()))
        srv = P()
        chk(f("TRITONSERVER_ServerNew", ctypes.POINTER(P), P)(ctypes.byref(srv), opts))
        ready = ctypes.c_bool(False)
        chk(f("TRITONSERVER_ServerModelIsReady", P, ctypes.c_char_p, ctypes.c_int64, ctypes.POINTER(ctypes.c_bool))(
            srv, b"add1", -1, ctypes.byref(ready)))
        print("READY", ready.value, flush=True)
        chk(f("TRITONSERVER_ServerStop", P)(srv))
        chk(f("TRITONSERVER_ServerDelete", P)(srv))
        import ssl
        print("SSL", ssl.OPENSSL_VERSION)
    """
    env = _subprocess_env()
    out = subprocess.run([sys.executable, "-c", script(code), str(stub_dest), str(py_model_repo)],
                         env=env, capture_output=True, text=True, timeout=180)
    assert "READY True" in out.stdout, out.stdout[-3000:] + out.stderr[-5000:]
    clean = run_py("import ssl; print(ssl.OPENSSL_VERSION)").stdout.strip()
    assert f"SSL {clean}" in out.stdout


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.timeout(600)  # PyPI downloads (wheel, numpy<2) on a cold cache
def test_python_model_infers_correctly_with_stub_env(stub_dest, real_core, py_model_repo, tmp_path):
    """The wheel's tritonserver binary, our backend folder and StubEnv: numpy 1 in the stub,
    tensors arrive intact (numpy 2 would give zeros)."""
    s, env = _stub_os_env(real_core)
    # A separate process: the symlinked libtriton_python.so finds libarchive this way.
    env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [real_core.libs_dir, env.get("LD_LIBRARY_PATH")]))
    port = _free_port()
    log = open(tmp_path / "server.log", "w")
    proc = subprocess.Popen(
        [real_core.executable, f"--model-repository={py_model_repo}",
         f"--backend-directory={backend_directory(real_core, None)}",
         "--http-address=127.0.0.1", f"--http-port={port}", "--allow-grpc=false",
         "--allow-metrics=false", "--model-load-retry-count=0",
         f"--backend-config=python,shm-region-prefix-name=tsrvbin{os.getpid()}"],
        env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/models/add1/ready", timeout=1)
                break
            except OSError:
                time.sleep(0.3)
        assert proc.poll() is None, (tmp_path / "server.log").read_text()[-4000:]
        body = json.dumps({"inputs": [{"name": "IN", "shape": [4], "datatype": "FP32",
                                       "data": [1, 2, 3, 4]}]}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v2/models/add1/infer", data=body,
                                     headers={"Content-Type": "application/json"})
        res = json.loads(urllib.request.urlopen(req, timeout=30).read())
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
    outs = {o["name"]: o["data"] for o in res["outputs"]}
    assert outs["OUT"] == [2.0, 3.0, 4.0, 5.0]
    assert outs["NPMAJOR"] == [1]


@pytest.mark.slow
@pytest.mark.timeout(600)  # PyPI downloads (wheel, numpy<2) on a cold cache
def test_cli_install_core_from_local_wheel(stub_dest, monkeypatch, capsys):
    monkeypatch.setenv("TRITONSERVER_CORE_WHEEL", _local_wheel())
    assert cli.main(["install-core", "--dest", str(stub_dest)]) == 0
    out = capsys.readouterr().out
    assert "installed" in out and "python backend models: enabled" in out
    assert f"TRITONSERVER_CORE={stub_dest}" in out


@pytest.mark.slow
@pytest.mark.timeout(600)  # PyPI downloads (wheel, numpy<2) on a cold cache
def test_install_core_real_download(tmp_path, monkeypatch):
    monkeypatch.delenv("TRITONSERVER_CORE_WHEEL", raising=False)
    dest = tmp_path / "core"
    core = install_core(str(dest), quiet=True, stub_env=False)
    marker = json.loads((dest / locate.MARKER_NAME).read_text())
    assert marker["wheel"] in install.KNOWN_WHEEL_SHA256
    assert marker["sha256"] == install.KNOWN_WHEEL_SHA256[marker["wheel"]]
    assert core.stub_path and core.executable
    t = time.monotonic()
    install_core(str(dest), quiet=True, stub_env=False)  # no second download
    assert time.monotonic() - t < 3.0
    out = run_py(LOAD_AND_CHECK.format(dest=str(dest)))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1])["api"] == [1, 34]
