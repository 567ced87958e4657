"""Tests of tritonserver._core with the real Triton core: installed from a
local nvidia-pytriton wheel ($TRITONSERVER_CORE_WHEEL, when set), loaded,
run with the stub environment, and the command line. Tests marked ``slow``
download from PyPI (the wheel, numpy<2 for the stub environment) or start
the core. The search order on fake trees, the installer on small wheels,
StubEnv and the backend folder need no core: tests/unit/test_locate.py.
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
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PY_DIR = REPO / "python"

try:
    import tritonserver._core  # noqa: F401
except ImportError:
    sys.path.insert(0, str(PY_DIR))

from tritonserver._core import (  # noqa: E402
    backend_directory,
    clear_core_cache,
    cli,
    core_version,
    find_core,
    inspect_path,
    install,
    install_core,
    locate,
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
    # What the stub finds first on PATH: a python3 in a folder of the stub
    # environment (it takes its prefix from the pyvenv.cfg above it)...
    import shutil

    found = shutil.which("python3", path=env["PATH"])
    assert found == str(env_dir / stub_env.LOOKUP_DIRNAME / "python3")
    assert (env_dir / "pyvenv.cfg").is_file()
    # ...that, run by the process's children, runs the python3 they would
    # have found without it: the user's, not the numpy<2 environment's.
    without = os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                              if p != os.path.dirname(found))
    theirs = shutil.which("python3", path=without)
    code = "import sys; print(sys.executable)"
    out = subprocess.run(["python3", "-c", code], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert os.path.realpath(out.stdout.strip()) == os.path.realpath(theirs)
    py = s.python
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
