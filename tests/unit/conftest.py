"""The unit tier: code that runs without a Triton core (no Server is
started here, no core is looked for), each test in milliseconds.

Only the standard library is imported here: tests/conftest.py's fixtures
stay available but none of them is used, since each would start a core.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import pytest


def write_model(repo: Path, name: str, config: Optional[str] = None,
                files: tuple[str, ...] = ()) -> Path:
    """A model folder ``repo/name`` with ``config`` as its config.pbtxt (none
    when None) and empty ``files`` (relative paths such as ``1/model.onnx``)."""
    folder = repo / name
    folder.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (folder / "config.pbtxt").write_text(config, encoding="utf-8")
    for relative in files:
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
    return folder


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """An empty model repository in tmp_path."""
    path = tmp_path / "repo"
    path.mkdir()
    return path


@pytest.fixture
def model(repo: Path):
    """write_model in ``repo``: ``model("m", config_text, files=...)``."""
    return lambda name, config=None, files=(): write_model(repo, name, config, files)


@pytest.fixture(autouse=True)
def _no_core_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test here may depend on a core the environment points at."""
    if os.environ.get("TRITONSERVER_CORE"):
        monkeypatch.delenv("TRITONSERVER_CORE")
