"""The loop a user crashed core 2.51 with, replayed in fresh processes:
ONNX's own backend test models, config-less, each loaded, inferred once and
unloaded on one server (tests/reliability/onnx_zoo.py). Tearing down a model
with two CPU instances could end in a segmentation fault in the core's
model-deleter thread (docs/reliability.md);
such models now run as one core instance with two workers in the backend,
and no run may crash, hang or answer fewer than 90% of the cases right.

Marked `stress`: each run is a process of its own (about 12 s on 2 cores),
and the ASan re-run of this suite (test_sanitizers.py) leaves it out."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from typing import List, NamedTuple, Optional

import pytest

from reliability.support import record

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "onnx_zoo.py")
RUNS = 10
SOAK_RUNS = 50
RUN_TIMEOUT = 240.0  # one run takes about 12 s here; a hang fails the run, not the session
RESULT = re.compile(r"^onnx_zoo: (\d+)/(\d+) correct$", re.MULTILINE)


class Run(NamedTuple):
    """What one process of the script did."""

    returncode: Optional[int]  # None: killed at RUN_TIMEOUT
    correct: int
    tried: int
    tail: str  # the end of its output, for the failure message

    @property
    def crashed(self) -> bool:
        return self.returncode is not None and self.returncode < 0

    def signal_name(self) -> str:
        try:
            return signal.Signals(-(self.returncode or 0)).name
        except ValueError:
            return f"signal {-(self.returncode or 0)}"


def run_script() -> Run:
    """The script once, in a process of its own."""
    try:
        done = subprocess.run([sys.executable, SCRIPT], capture_output=True, text=True,
                              timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired as e:
        output = (e.stdout or "") if isinstance(e.stdout, str) else (e.stdout or b"").decode()
        return Run(None, 0, 0, output[-2000:])
    output = done.stdout + done.stderr
    found = RESULT.findall(done.stdout)
    correct, tried = (int(found[-1][0]), int(found[-1][1])) if found else (0, 0)
    return Run(done.returncode, correct, tried, output[-2000:])


def describe(runs: List[Run]) -> str:
    crashes = [r for r in runs if r.crashed]
    hangs = sum(r.returncode is None for r in runs)
    worst = min(runs, key=lambda r: (r.correct / r.tried) if r.tried else 0.0)
    signals = f" ({', '.join(r.signal_name() for r in crashes)})" if crashes else ""
    return (f"{len(runs)} runs, {len(crashes)} crashes{signals}, {hangs} hangs, "
            f"lowest run {worst.correct}/{worst.tried} correct")


@pytest.mark.stress
@pytest.mark.timeout(SOAK_RUNS * RUN_TIMEOUT)
def test_onnx_test_models_load_infer_unload_without_a_crash(soak):
    pytest.importorskip("onnx", reason="the ONNX backend test models come with the onnx wheel")
    pytest.importorskip("onnxruntime", reason="the onnxruntime backend needs onnxruntime")
    runs = [run_script() for _ in range(SOAK_RUNS if soak else RUNS)]
    figure = describe(runs)
    record("onnx zoo loop", figure)
    for index, run in enumerate(runs):
        assert not run.crashed, f"run {index} died of {run.signal_name()}:\n{run.tail}"
        assert run.returncode is not None, f"run {index} hung ({RUN_TIMEOUT} s):\n{run.tail}"
        assert run.tried > 0, f"run {index} printed no result line:\n{run.tail}"
        assert run.correct >= 0.9 * run.tried, f"run {index}: {figure}\n{run.tail}"
        assert run.returncode == 0, f"run {index} exited {run.returncode}:\n{run.tail}"
