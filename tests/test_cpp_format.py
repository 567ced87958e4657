"""Every C++ file of the project follows .clang-format (Google-based)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cpp_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "*.cc", "*.h"], cwd=REPO, capture_output=True,
                         text=True, check=False).stdout.split()
    return [f for f in out if not f.startswith("third_party/")]


@pytest.mark.skipif(shutil.which("clang-format") is None, reason="clang-format is not installed")
@pytest.mark.skipif(not os.path.isdir(os.path.join(REPO, ".git")), reason="not a git checkout")
def test_cpp_follows_clang_format():
    files = cpp_files()
    assert files
    result = subprocess.run(["clang-format", "--dry-run", "-Werror", *files], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
