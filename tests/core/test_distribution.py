"""The distribution name (tritonserver-embedded) and NVIDIA's package of the
same import name installed beside it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

import tritonserver
from tritonserver import _distribution

REPO = Path(__file__).resolve().parents[2]


def test_the_version_is_read_from_our_distribution():
    try:
        expected = metadata.version("tritonserver-embedded")
    except metadata.PackageNotFoundError:
        pytest.skip("run from a source tree, not an installed package")
    assert tritonserver.__version__ == expected
    out = subprocess.run([sys.executable, "-m", "tritonserver", "--version"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == f"tritonserver-embedded {expected} (import name tritonserver)"


def test_pyproject_publishes_the_new_name_and_its_extras_name_it():
    text = (REPO / "pyproject.toml").read_text()
    assert re.search(r'^name = "tritonserver-embedded"$', text, re.M)
    # Every self-reference of an extra names our distribution, never NVIDIA's.
    assert '"tritonserver[' not in text
    assert '"tritonserver-embedded[serve]"' in text


def test_docs_and_messages_install_the_new_name():
    places = [REPO / "README.md", *(REPO / "docs").glob("*.md"),
              *(REPO / "python" / "tritonserver").rglob("*.py"),
              REPO / ".github" / "workflows" / "wheels.yml"]
    # `pip install tritonserver` or `pip install "tritonserver[...]"`: NVIDIA's package.
    wrong = re.compile(r"pip install (--\S+ )*[\"']?tritonserver(\[|[\"'\s]|$)")
    found = [f"{p.relative_to(REPO)}: {line.strip()}" for p in places if p.is_file()
             for line in p.read_text().splitlines() if wrong.search(line)]
    assert found == []
    assert _distribution.install_command("onnx") == 'pip install "tritonserver-embedded[onnx]"'


def _fake_nvidia_package(tmp_path: Path, version: str = "2.73.0", summary: str = "") -> dict:
    """An environment where metadata says a tritonserver distribution is installed (NVIDIA's
    2.73.0 unless told otherwise)."""
    info = tmp_path / "site" / f"tritonserver-{version}.dist-info"
    info.mkdir(parents=True)
    summary_line = f"Summary: {summary}\n" if summary else ""
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: tritonserver\nVersion: {version}\n{summary_line}")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(tmp_path / "site")] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def test_nvidia_package_beside_ours_is_named_at_import_and_in_core_info(tmp_path):
    env = _fake_nvidia_package(tmp_path)
    imported = subprocess.run([sys.executable, "-c", "import tritonserver"], capture_output=True,
                              text=True, env=env, timeout=120)
    assert imported.returncode == 0, imported.stderr
    assert "NVIDIA's 'tritonserver' 2.73.0 is installed" in imported.stderr
    assert "pip uninstall -y tritonserver tritonserver-embedded" in imported.stderr

    info = subprocess.run([sys.executable, "-m", "tritonserver", "core-info"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert "NVIDIA's 'tritonserver' 2.73.0 is installed" in info.stderr
    if info.returncode == 0:  # a core was found: the JSON names the other package
        assert '"nvidia_tritonserver": "2.73.0"' in info.stdout


def test_this_project_under_its_former_name_is_not_called_nvidias(tmp_path):
    # Developers' environments can hold this project installed as `tritonserver` 0.1.0 before
    # the rename: its summary is ours, and nothing warns.
    text = (REPO / "pyproject.toml").read_text()
    assert f'description = "{_distribution.SUMMARY}"' in text
    env = _fake_nvidia_package(tmp_path, "0.1.0", _distribution.SUMMARY)
    out = subprocess.run([sys.executable, "-W", "error", "-c", "import tritonserver"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "NVIDIA" not in out.stderr


def test_no_warning_without_nvidia_package():
    out = subprocess.run([sys.executable, "-W", "error", "-c", "import tritonserver"],
                         capture_output=True, text=True, timeout=120)
    if _distribution.other_distribution() is not None:
        pytest.skip("NVIDIA's tritonserver is installed in this environment")
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
