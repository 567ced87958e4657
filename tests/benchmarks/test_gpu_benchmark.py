"""benchmarks/gpu.py and the C API driver's gpu16MiB where no GPU is seen:
the benchmark says it needs one and exits 0 having measured nothing (so the
device check can run it anywhere), and the driver refuses the workload with
the CUDA runtime's reason instead of handing the core host memory as device
memory. On a GPU both run for real in tests/gpu/device_check.py."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCHMARKS = os.path.join(REPO, "benchmarks")


def _gpu_visible() -> bool:
    from tritonserver import _cuda, _gpu

    return _gpu.present() and _cuda.device_count() > 0


pytestmark = pytest.mark.skipif(_gpu_visible(), reason="a GPU is visible: "
                                "tests/gpu/device_check.py runs the benchmark there")


def test_the_gpu_benchmark_says_it_needs_a_gpu_and_exits_0(tmp_path):
    result = tmp_path / "gpu.json"
    proc = subprocess.run([sys.executable, os.path.join(BENCHMARKS, "gpu.py"), "--quick",
                           "--json", str(result), "--logs", str(tmp_path / "logs")],
                          cwd=REPO, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "benchmarks/gpu.py needs a GPU" in proc.stdout
    assert "nothing measured" in proc.stdout
    assert not result.exists()


@pytest.mark.slow
@pytest.mark.timeout(660)
def test_the_c_api_driver_refuses_gpu16mib_without_a_gpu(tmp_path):
    sys.path.insert(0, BENCHMARKS)
    try:
        from tsbench.core_floor import CoreFloor
    finally:
        sys.path.remove(BENCHMARKS)
    floor = CoreFloor(str(tmp_path))  # builds benchmarks/native when it is not built yet
    args, env = floor.command(("gpu16MiB",), ["--rounds", "1", "--seconds", "0.1"])
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "c_api_bench: gpu16MiB needs a GPU: " in proc.stderr
    assert proc.stdout == ""
