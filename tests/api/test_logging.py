"""log_file, log_info/warn/error, log_verbose and log_format really control
the core's log. The core's logger is process-wide, so each case runs its
server in a fresh process and reads the file it wrote."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest

import tritonserver

SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import tritonserver
    s = tritonserver.Server(model_repository=tritonserver.example_model_repository(),
                            model_control_mode=tritonserver.ModelControlMode.EXPLICIT,
                            startup_models=["identity_fp32"], **eval(sys.argv[1])).start()
    next(s.model("identity_fp32").infer(inputs={"INPUT0": np.ones(2, np.float32)}))
    try:
        s.load("no_such_model")  # logs an error line
    except tritonserver.TritonError:
        pass
    s.stop()
""")


def server_log(tmp_path, **options) -> list[str]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "server.log"
    options["log_file"] = str(path)
    result = subprocess.run([sys.executable, "-c", SCRIPT, f"dict({_literal(options)})"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return path.read_text().splitlines() if path.exists() else []


def _literal(options: dict) -> str:
    parts = []
    for key, value in options.items():
        if isinstance(value, tritonserver.LogFormat):
            value = f"tritonserver.LogFormat.{value.name}"
        else:
            value = repr(value)
        parts.append(f"{key}={value}")
    return ", ".join(parts)


def levels(lines: list[str]) -> set[str]:
    """The severity letters (I, W, E) of default-format lines."""
    return {line[0] for line in lines if re.match(r"^[IWE]\d{4} ", line)}


def test_info_lines_only_when_log_info(tmp_path):
    lines = server_log(tmp_path / "on", log_info=True, log_error=False)
    assert levels(lines) == {"I"}
    assert any("successfully loaded 'identity_fp32'" in line for line in lines)
    assert server_log(tmp_path / "off", log_info=False, log_error=False) == []


def test_error_lines_only_when_log_error(tmp_path):
    lines = server_log(tmp_path, log_error=True)
    assert levels(lines) == {"E"}
    assert any("no_such_model" in line for line in lines)


def test_log_verbose_adds_verbose_lines(tmp_path):
    plain = server_log(tmp_path / "plain", log_info=True)
    verbose = server_log(tmp_path / "verbose", log_info=True, log_verbose=1)
    marker = "auto-completed config"
    assert not any(marker in line for line in plain)
    assert any(marker in line for line in verbose)
    assert len(verbose) > len(plain)


@pytest.mark.parametrize("log_format,pattern", [
    (tritonserver.LogFormat.DEFAULT, r"^I\d{4} \d\d:\d\d:\d\d\.\d+ "),
    (tritonserver.LogFormat.ISO8601, r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ I "),
])
def test_log_format(tmp_path, log_format, pattern):
    # Every record (a line naming its source file; tables span many lines)
    # starts with the format's prefix.
    records = [line for line in server_log(tmp_path, log_info=True, log_format=log_format)
               if re.search(r" \w+\.cc:\d+\] ", line)]
    assert records and all(re.match(pattern, line) for line in records), records[:3]
