"""Finding and loading the core, seen from a fresh process each time."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import conftest
import tritonserver


def run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    """`code` in a fresh process that finds the core by itself (or by `env`)."""
    environ = {k: v for k, v in os.environ.items() if k != "TRITONSERVER_CORE"}
    environ.update(env)
    return conftest.run_python(code, environ)


def test_import_needs_no_core():
    # A wrong TRITONSERVER_CORE does not matter until a server starts.
    result = run_python("""
        import tritonserver
        print(tritonserver.__version__)
        print(tritonserver._c.triton_bindings.core_loaded())
    """, TRITONSERVER_CORE="/nonexistent/libtritonserver.so")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-1] == "False"


def test_start_without_a_core_says_where_it_looked_and_how_to_install(tmp_path):
    result = run_python(f"""
        import sys
        from tritonserver._core import locate
        locate.default_install_dir = lambda: {str(tmp_path)!r}
        sys.path[:] = [p for p in sys.path if 'site-packages' not in p or 'tritonserver' in p]
        import tritonserver
        locate.CONTAINER_ROOT = {str(tmp_path / 'opt')!r}
        try:
            tritonserver.Server(model_repository={str(tmp_path)!r}).start()
        except tritonserver.UnavailableError as e:
            print("RAISED", type(e).__name__)
            print(e)
    """)
    assert result.returncode == 0, result.stderr
    assert "RAISED" in result.stdout
    assert "python -m tritonserver install-core" in result.stdout
    assert str(tmp_path) in result.stdout


def test_bad_env_var_is_reported():
    result = run_python("""
        import tritonserver
        try:
            tritonserver.Server(model_repository="/tmp").start()
        except tritonserver.TritonError as e:
            print("RAISED", e)
    """, TRITONSERVER_CORE="/nonexistent/libtritonserver.so")
    assert "RAISED" in result.stdout and "/nonexistent" in result.stdout


def test_core_does_not_hijack_openssl():
    code = """
        import json, sys
        import tritonserver
        if {load}:
            tritonserver._runtime.ensure_core_loaded()
        import ssl, hashlib
        print(json.dumps([ssl.OPENSSL_VERSION, hashlib.sha256(b"x").hexdigest()]))
    """
    without = run_python(code.format(load=False))
    with_core = run_python(code.format(load=True))
    assert without.returncode == 0 and with_core.returncode == 0, with_core.stderr
    assert json.loads(without.stdout) == json.loads(with_core.stdout)


def test_cli_version_names_core_and_location():
    result = subprocess.run([sys.executable, "-m", "tritonserver", "--version"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert tritonserver.__version__ in result.stdout
    assert "2.51" in result.stdout and "libtritonserver" in result.stdout


def test_loaded_core_api_version(server):
    bindings = tritonserver._c.triton_bindings
    assert bindings.api_version() >= (1, 34)
    assert bindings.core_path().endswith(".so")
    # Every function we declare exists in a 1.34 core.
    assert bindings.missing_core_functions() == ""


def test_a_function_the_core_lacks_raises_unsupported():
    # As on a core that predates the function: import, start and other calls
    # work; only the call that needs it raises UnsupportedError, by name.
    result = run_python("""
        import numpy as np
        import tritonserver
        from tritonserver._c import triton_bindings
        server = tritonserver.Server(model_repository=tritonserver.example_model_repository())
        server.start(wait_until_ready=True)
        assert triton_bindings.forget_core_function("TRITONSERVER_InferenceRequestSetDoubleParameter")
        model = server.model("identity_fp32")
        x = np.ones(2, np.float32)
        try:
            model.infer(inputs={"INPUT0": x}, parameters={"scale": 0.5})
        except tritonserver.UnsupportedError as e:
            print("UNSUPPORTED", e)
        out = next(model.infer(inputs={"INPUT0": x}, parameters={"n": 1}))
        print("STILL WORKS", np.from_dlpack(out.outputs["OUTPUT0"]).tolist())
        del out
        server.stop()
    """)
    assert result.returncode == 0, result.stderr
    assert "UNSUPPORTED TRITONSERVER_InferenceRequestSetDoubleParameter" in result.stdout
    assert "STILL WORKS [1.0, 1.0]" in result.stdout
