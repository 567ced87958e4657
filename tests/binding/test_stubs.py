"""The binding's stubs: shipped with the package, and matching the built
module (mypy stubtest); the Options table and the binding's setters agree."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import tritonserver
from tritonserver._c import triton_bindings
from tritonserver._options import setter_names

pytest.importorskip("mypy")

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(tritonserver.__file__)))


def test_py_typed_ships_with_the_stubs():
    package = os.path.dirname(tritonserver.__file__)
    for name in ("py.typed", "_enums.pyi", os.path.join("_c", "triton_bindings.pyi"),
                 os.path.join("_inprocess", "_backend.pyi")):
        assert os.path.exists(os.path.join(package, name)), name


def test_stubs_match_the_runtime():
    result = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "tritonserver._c.triton_bindings",
         "tritonserver._enums", "--allowlist", os.path.join(HERE, "stubtest_allowlist.txt")],
        env=dict(os.environ, PYTHONPATH=PACKAGE_PARENT), capture_output=True, text=True,
        timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_options_field_has_a_setter_and_every_setter_a_field():
    bound = {name for name in dir(triton_bindings.ServerOptions)
             if name.startswith(("set_", "add_"))}
    assert setter_names() == bound
