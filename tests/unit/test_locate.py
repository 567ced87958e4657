"""Tests of tritonserver._core that need no core: the search order on fake
install trees (search_core's keyword arguments stand in for the real
places), the installer on small wheels made here, the stub environment's
choice and the backend folder. Nothing here loads a real core (moved from
tests/core/test_locate.py, which keeps the tests of the real one).
"""

from __future__ import annotations

import json
import filecmp
import os
import stat
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from tritonserver import _core
from tritonserver._core import (
    CoreInstall,
    CoreInstallError,
    CoreLoadError,
    CoreNotFoundError,
    StubEnv,
    backend_directory,
    clear_core_cache,
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

PYVER = "%d.%d" % sys.version_info[:2]
KNOWN_WHEEL = "nvidia_pytriton-0.7.0-py3-none-manylinux_2_35_x86_64.whl"


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


def _search(places, *, env=None, dest=True, site=True, container=True, inherited=None):
    return search_core(
        env_value=env,
        install_dir=str(places["dest"] if dest else places["empty"]),
        inherited_dir=inherited,
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


def test_a_venv_with_system_site_packages_finds_the_base_pythons_core(places, tmp_path):
    """A virtual environment made with --system-site-packages sees the base
    Python's packages, this one among them: the core installed beside it (by
    install-core, under the base's prefix) comes before any sys.path folder,
    and after the environment's own."""
    base = make_pip_base(tmp_path / "base")
    core = _search(places, dest=False, inherited=str(base))
    assert core.libs_dir == str(base / "nvidia_pytriton.libs")
    assert _search(places, inherited=str(base)).libs_dir == str(
        places["dest"] / "nvidia_pytriton.libs")
    with pytest.raises(CoreNotFoundError) as e:
        _search(places, dest=False, site=False, container=False,
                inherited=str(tmp_path / "none"))
    assert any("the base Python's" in place for place in e.value.looked_in)


def test_the_base_prefix_counts_only_when_its_site_packages_are_seen(monkeypatch):
    monkeypatch.setattr(sys, "base_prefix", "/base")
    monkeypatch.setattr(sys, "prefix", "/venv")
    inherited = locate.inherited_install_dir
    assert inherited(["/venv/lib/python3.11/site-packages"]) is None
    assert inherited(["/venv/lib/python3.11/site-packages", "/base/lib/python3.11/site-packages"]) \
        == "/base/share/tritonserver/core"
    monkeypatch.setattr(sys, "prefix", "/base")
    assert inherited(["/base/lib/python3.11/site-packages"]) is None


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


def test_load_core_errors(tmp_path):
    empty = _touch(tmp_path / "a" / "libtritonserver.so")
    with pytest.raises(CoreLoadError, match="cannot load"):
        _core.load_core(inspect_path(str(empty)))


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
    assert s.path_prepend == str(env / stub_env.LOOKUP_DIRNAME)
    assert s.python == str(env / "bin" / "python3")
    # A core elsewhere (pip --no-deps into site-packages) uses the default install's stub env.
    site = make_pip_base(tmp_path / "site")
    assert not stub_environment(inspect_path(str(site), "pip")).usable
    default_env = _fake_ready_env(tmp_path / "default")
    s = stub_environment(inspect_path(str(site), "pip"))
    assert s.usable and s.path_prepend == str(default_env / stub_env.LOOKUP_DIRNAME)
    # A broken env (its python gone) is not used.
    os.unlink(default_env / "bin" / "python3")
    assert not stub_environment(inspect_path(str(site), "pip")).usable


def test_the_stubs_python3_on_path_runs_the_next_one_for_everyone_else(tmp_path):
    """The folder put first on PATH for the stub holds one python3, which the
    stub only locates (its environment is the pyvenv.cfg above it); the
    process's children that run python3 get the one after it on PATH."""
    env = tmp_path / "stub-env" / "py3.x"
    env.mkdir(parents=True)
    folder = stub_env.lookup_dir(str(env))
    assert folder == str(env / stub_env.LOOKUP_DIRNAME)
    assert sorted(os.listdir(folder)) == ["python3"]
    theirs = tmp_path / "user" / "bin"
    theirs.mkdir(parents=True)
    _touch(theirs / "python3", b'#!/bin/sh\necho "theirs $# $1"\n', mode=0o755)
    path = os.pathsep.join([folder, str(theirs), "/usr/bin", "/bin"])
    out = subprocess.run(["python3", "two words"], env={"PATH": path}, capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0 and out.stdout == "theirs 1 two words\n", out.stderr
    # The same folder named twice, or through another spelling, is skipped too.
    again = os.pathsep.join([folder, folder + "/", str(theirs), "/usr/bin", "/bin"])
    out = subprocess.run(["python3"], env={"PATH": again}, capture_output=True, text=True,
                         timeout=30)
    assert out.stdout == "theirs 0 \n", out.stderr
    # No other python3 on PATH: the usual 127 with a message, never itself again.
    out = subprocess.run([os.path.join(folder, "python3")],
                         env={"PATH": os.pathsep.join([folder, "/nonexistent"])},
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 127 and "python3: not found" in out.stderr
    assert stub_env.lookup_dir(str(env)) == folder  # made once, found after


def test_no_room_for_the_lookup_folder_falls_back_to_the_envs_bin(tmp_path):
    env = tmp_path / "env"
    (env / "bin").mkdir(parents=True)
    os.chmod(env, 0o555)
    try:
        if os.access(env, os.W_OK):
            pytest.skip("running as a user that can write anywhere")
        assert stub_env.lookup_dir(str(env)) == str(env / "bin")
    finally:
        os.chmod(env, 0o755)


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
    # The libraries are the files themselves (the core refuses a runtime that
    # resolves outside the folder): the stub's by default, and both by name.
    stub_lib = os.path.join(core.python_backend_dir, "libtriton_python.so")
    assert not (py / "libtriton_python.so").is_symlink()
    assert filecmp.cmp(py / "libtriton_python.so", stub_lib, shallow=False)
    assert filecmp.cmp(py / "libtriton_python_stub.so", stub_lib, shallow=False)
    assert (py / "triton_python_backend_utils.py").is_file()
    assert backend_directory(core, str(pkg)) == str(d)  # once per process
    d2 = backend_directory(core, None)
    assert d2 != str(d) and sorted(os.listdir(d2)) == ["python"]
    # Each library is one file by both its names.
    assert os.path.samefile(py / "libtriton_python.so", py / "libtriton_python_stub.so")
    # In-process (Options.python_backend), the package's forwarder to its
    # inprocess backend is libtriton_python.so; the stub's stays there by
    # its runtime name.
    _touch(pkg / "inprocess" / "libtriton_inprocess.so")
    forwarder = pkg / "inprocess" / "python_inprocess" / "libtriton_python_inprocess.so"
    forwarder.parent.mkdir()
    forwarder.write_bytes(b"forwards to inprocess")
    d3 = Path(backend_directory(core, str(pkg), python_in_process=True))
    assert d3 != d
    assert (d3 / "python" / "libtriton_python.so").read_bytes() == b"forwards to inprocess"
    assert os.path.samefile(d3 / "python" / "libtriton_python.so",
                            d3 / "python" / "libtriton_python_inprocess.so")
    assert filecmp.cmp(d3 / "python" / "libtriton_python_stub.so", stub_lib, shallow=False)
    # What it forwards to, beside it in the same folder.
    assert os.path.samefile(d3 / "inprocess" / "libtriton_inprocess.so",
                            pkg / "inprocess" / "libtriton_inprocess.so")


def test_backend_directory_puts_the_stub_library_behind_the_guard(tmp_path):
    """With the package's stub guard, the stub's names are the guard and the
    core's library is stub/libtriton_python.so, beside the core it needs;
    the guard's folder is no backend of its own."""
    core = inspect_path(str(make_pip_base(tmp_path / "b")), "pip")
    pkg = _own_backends(tmp_path)
    _touch(pkg / "stub_guard" / "python_stub_guard" / "libtriton_python_stub_guard.so", b"guard")
    d = Path(backend_directory(core, str(pkg)))
    assert sorted(p.name for p in d.iterdir()) == ["mine", "other", "python"]
    py = d / "python"
    assert (py / "libtriton_python.so").read_bytes() == b"guard"
    assert os.path.samefile(py / "libtriton_python.so", py / "libtriton_python_stub.so")
    stub_lib = os.path.join(core.python_backend_dir, "libtriton_python.so")
    assert filecmp.cmp(py / "stub" / "libtriton_python.so", stub_lib, shallow=False)
    assert not (py / "stub" / "libtriton_python.so").is_symlink()
    assert os.readlink(py / "stub" / "libtritonserver.so") == core.library
    # In-process by default: the guard keeps the stub's runtime name.
    _touch(pkg / "inprocess" / "libtriton_inprocess.so")
    forwarder = pkg / "inprocess" / "python_inprocess" / "libtriton_python_inprocess.so"
    _touch(forwarder, b"forwards to inprocess")
    d2 = Path(backend_directory(core, str(pkg), python_in_process=True))
    assert (d2 / "python" / "libtriton_python_stub.so").read_bytes() == b"guard"
    assert filecmp.cmp(d2 / "python" / "stub" / "libtriton_python.so", stub_lib, shallow=False)


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


def test_a_users_python_based_backend_shadows_the_packages_backend_of_its_name(tmp_path):
    """qa/L0_backend_python/python_based_backends names its backend add_sub,
    as one of the package's: the user's model.py serves, not the package's
    library (which the core would prefer, beside it)."""
    core = inspect_path(str(make_pip_base(tmp_path / "b")), "pip")
    pkg = _own_backends(tmp_path)
    user = tmp_path / "user"
    _touch(user / "mine" / "model.py", b"class TritonPythonModel: pass\n")
    d = Path(backend_directory(core, str(pkg), str(user)))
    assert sorted(p.name for p in d.iterdir()) == ["mine", "other", "python"]
    assert os.readlink(d / "mine") == str(user / "mine")
    assert not (d / "mine" / "libtriton_mine.so").exists()
    assert os.readlink(d / "other" / "libtriton_other.so") == str(pkg / "other" / "libtriton_other.so")


def test_backend_directory_removed_at_exit_not_by_forked_child(tmp_path):
    base = make_pip_base(tmp_path / "b")
    code = f"""
        import os, sys
        from tritonserver._core import inspect_path, backend_directory
        d = backend_directory(inspect_path({str(base)!r}), None)
        pid = os.fork()
        if pid == 0:
            sys.exit(0)  # runs the inherited atexit handlers
        os.waitpid(pid, 0)
        print(d, os.path.isdir(d))
    """
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    d, alive = out.stdout.split()
    assert alive == "True"
    assert not os.path.exists(d)
