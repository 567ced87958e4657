"""Trace mode opentelemetry without the otel extra: tritonserver._otel
refuses with the right error and the command that installs it (this runs
whether the extra is installed or not: the import of the SDK is blocked)."""

from __future__ import annotations

import subprocess
import sys


def test_without_the_extra_the_error_says_what_to_install():
    code = ("import sys; sys.modules['opentelemetry'] = None\n"
            "from tritonserver import UnavailableError\n"
            "try:\n    import tritonserver._otel\n"
            "except UnavailableError as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert "trace mode 'opentelemetry' needs the OpenTelemetry SDK" in done.stdout, done.stderr
    assert 'pip install "tritonserver-embedded[otel]"' in done.stdout
