"""model_load_device_limits and cuda_memory_pool_sizes reach the core. Without
a GPU the core accepts GPU settings and has nothing to apply them to; what it
refuses shows the values arrive, and its error names the Options field."""

from __future__ import annotations

import numpy as np
import pytest

import tritonserver
from conftest import start_server, stop_within

GPU, CPU = tritonserver.InstanceGroupKind.GPU, tritonserver.InstanceGroupKind.CPU


def test_a_gpu_load_limit_is_accepted(example_repo):
    s = start_server(model_repository=example_repo,
                     model_load_device_limits=[tritonserver.ModelLoadDeviceLimit(GPU, 0, 0.5)])
    try:
        out = next(s.model("identity_fp32").infer(inputs={"INPUT0": np.ones(2, np.float32)}))
        assert np.from_dlpack(out.outputs["OUTPUT0"]).tolist() == [1.0, 1.0]
    finally:
        stop_within(s)


def test_the_core_refuses_a_load_limit_on_cpu(tmp_path):
    # Our validation lets any InstanceGroupKind through; this message is the core's.
    with pytest.raises(tritonserver.InvalidArgumentError,
                       match=r"^Options.model_load_device_limits: .*not supported.*CPU"):
        tritonserver.Server(model_repository=str(tmp_path),
                            model_load_device_limits=[tritonserver.ModelLoadDeviceLimit(CPU, 0, 0.5)]
                            ).start()


@pytest.mark.parametrize("fraction", [1.5, -0.1, "half", True])
def test_a_load_limit_fraction_outside_0_to_1_is_refused_before_the_core(tmp_path, fraction):
    with pytest.raises(tritonserver.InvalidArgumentError, match="Options.model_load_device_limits"):
        tritonserver.Server(model_repository=str(tmp_path),
                            model_load_device_limits=[tritonserver.ModelLoadDeviceLimit(GPU, 0, fraction)]
                            ).start()


def test_cuda_memory_pool_sizes_are_accepted_without_a_gpu(example_repo):
    s = start_server(model_repository=example_repo, cuda_memory_pool_sizes={0: 1 << 20})
    try:
        assert s.ready()
    finally:
        stop_within(s)


@pytest.mark.parametrize("sizes", [{"0": 1}, {0: -1}, {0: 1.5}, [0]])
def test_bad_cuda_memory_pool_sizes_are_refused(tmp_path, sizes):
    with pytest.raises(tritonserver.InvalidArgumentError, match="Options.cuda_memory_pool_sizes"):
        tritonserver.Server(model_repository=str(tmp_path), cuda_memory_pool_sizes=sizes).start()
