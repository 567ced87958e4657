"""The GPU paths' branches that run without a GPU: tensors labelled as
device memory described and exported without their memory being touched,
the CUDA runtime's own errors where there is no device, and the checks made
before any CUDA call. tests/gpu runs the same paths on a device."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest

import tritonserver
from tritonserver import DataType, MemoryBuffer, MemoryType, Tensor, _cuda
from tritonserver._tensor import tensor_of

from conftest import _gpu_seen

no_gpu = pytest.mark.skipif(_gpu_seen(), reason="checks what happens without a GPU")


def _labelled(memory_type: MemoryType, device_id: int = 0, data_type=DataType.FP32,
              shape=(2, 3)) -> Tensor:
    """A tensor that says its (host) bytes are in `memory_type`: enough for
    everything that reads only the description."""
    array = np.arange(6, dtype=np.float32)
    buffer = MemoryBuffer(array.ctypes.data, memory_type, device_id, array.nbytes, array)
    return Tensor(data_type, shape, buffer)


def test_the_cuda_runtime_is_the_one_the_core_ships():
    core = tritonserver._runtime.ensure_core_loaded()
    shipped = glob.glob(os.path.join(core.libs_dir, "libcudart*.so*"))
    if not shipped:
        pytest.skip("this core's folder has no libcudart")
    loaded = _cuda.runtime()
    assert os.path.realpath(loaded._name) in {os.path.realpath(p) for p in shipped}


@no_gpu
def test_without_a_gpu_the_runtime_sees_no_device():
    assert _cuda.device_count() == 0


def test_a_gpu_tensor_exports_its_device_through_dlpack_in_place():
    t = _labelled(MemoryType.GPU, 1)
    assert t.__dlpack_device__() == (tritonserver.DLDeviceType.kDLCUDA, 1)
    back = Tensor.from_dlpack(t)
    assert back.memory_type == MemoryType.GPU and back.memory_type_id == 1
    assert back.data_ptr == t.data_ptr and back.size == t.size
    assert back.data_type == DataType.FP32 and tuple(back.shape) == (2, 3)


def test_a_pinned_tensor_is_cuda_host_memory_and_host_readable():
    t = _labelled(MemoryType.CPU_PINNED)
    assert t.__dlpack_device__() == (tritonserver.DLDeviceType.kDLCUDAHost, 0)
    assert t.to_host() is t and t.to_device("cpu_pinned") is t
    back = Tensor.from_dlpack(t)
    assert back.memory_type == MemoryType.CPU_PINNED and back.data_ptr == t.data_ptr


def test_the_cuda_array_interface_describes_gpu_tensors_only():
    t = _labelled(MemoryType.GPU, 0)
    interface = t.__cuda_array_interface__
    assert interface == {"shape": (2, 3), "typestr": "<f4", "data": (t.data_ptr, False),
                         "strides": None, "stream": None, "version": 3}
    assert not hasattr(_labelled(MemoryType.CPU), "__cuda_array_interface__")
    assert not hasattr(_labelled(MemoryType.CPU_PINNED), "__cuda_array_interface__")
    assert not hasattr(_labelled(MemoryType.GPU, 0, DataType.BYTES), "__cuda_array_interface__")


def test_a_gpu_tensor_on_its_device_is_itself():
    t = _labelled(MemoryType.GPU, 2)
    assert t.to_device("gpu:2") is t and t.to_device((MemoryType.GPU, 2)) is t
    assert t.to_device((tritonserver.DLDeviceType.kDLCUDA, 2)) is t


@no_gpu
@pytest.mark.parametrize("data_type,move", [
    (DataType.FP32, lambda t: t.to_host()),
    (DataType.FP32, lambda t: t.to_device("cpu")),
    (DataType.FP32, lambda t: t.to_device("gpu:1")),
    (DataType.FP32, lambda t: np.array(t)),
    (DataType.BYTES, lambda t: t.to_bytes_array()),
], ids=["to_host", "to_device_cpu", "to_device_other_gpu", "numpy_array", "to_bytes_array"])
def test_moving_gpu_memory_without_a_gpu_names_the_cuda_error(data_type, move):
    with pytest.raises(tritonserver.UnavailableError, match=r"failed: cudaError\w+: "):
        move(_labelled(MemoryType.GPU, 0, data_type))


@no_gpu
@pytest.mark.parametrize("device", ["gpu", "gpu:0", tritonserver.MemoryType.CPU_PINNED])
def test_moving_host_memory_to_a_device_without_a_gpu_names_the_cuda_error(device):
    with pytest.raises(tritonserver.UnavailableError, match=r"failed: cudaError\w+: "):
        _labelled(MemoryType.CPU).to_device(device)


class _CudaArray:
    """An object with only the CUDA array interface, as Numba's device arrays."""

    def __init__(self, **interface):
        self.__cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (4096, False),
                                         "version": 3, **interface}


@pytest.mark.parametrize("interface,text", [
    ({"strides": (8,)}, "not C-contiguous"),
    ({"typestr": ">f4"}, "byte order is not native"),
    ({"mask": object()}, "masked arrays"),
])
def test_a_cuda_array_the_core_cannot_take_is_refused_before_any_cuda_call(interface, text):
    with pytest.raises(tritonserver.TritonError, match=text):
        tensor_of(_CudaArray(**interface))


@no_gpu
def test_a_cuda_array_without_a_gpu_names_the_cuda_error():
    with pytest.raises(tritonserver.UnavailableError, match="cudaPointerGetAttributes failed"):
        tensor_of(_CudaArray())


def test_a_cuda_array_of_nothing_needs_no_device():
    t = tensor_of(_CudaArray(shape=(0,), data=(0, False)))
    assert t.memory_type == MemoryType.GPU and t.size == 0 and tuple(t.shape) == (0,)


@no_gpu
def test_device_and_pinned_allocations_without_a_gpu_name_the_cuda_error():
    with pytest.raises(tritonserver.UnavailableError, match="cudaError"):
        _cuda.DeviceAllocation(16, 0)
    with pytest.raises(tritonserver.UnavailableError, match="cudaMallocHost of 16 bytes failed"):
        _cuda.PinnedAllocation(16)


@no_gpu
def test_the_size_of_an_allocation_without_a_gpu_names_the_cuda_error():
    with pytest.raises(tritonserver.UnavailableError, match="cuMemGetAddressRange"):
        _cuda.bytes_from(4096)


def test_an_ipc_handle_of_the_wrong_size_is_refused():
    with pytest.raises(tritonserver.InvalidArgumentError, match="64 bytes, not 3"):
        _cuda.IpcMapping(b"abc", 0)


@no_gpu
def test_without_a_gpu_only_the_cpu_allocator_ships():
    assert set(tritonserver.default_memory_allocators) == {MemoryType.CPU}


# ---- Through the core: device memory met by backends without a GPU ----------

class _LabelledGpuAllocator(tritonserver.MemoryAllocator):
    """Host memory labelled as GPU 0's: whoever copies into it must go
    through CUDA, which without a GPU fails with its own error."""

    def allocate(self, size, memory_type, memory_type_id):
        array = np.empty(size, np.uint8)
        return MemoryBuffer(array.ctypes.data, MemoryType.GPU, 0, size, array)


def _answers_after(model) -> None:
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(
        np.from_dlpack(next(model.infer(inputs={"INPUT0": x})).outputs["OUTPUT0"]), x)


@no_gpu
def test_an_sdk_backend_writing_to_device_memory_without_a_gpu_fails_that_request(server):
    model = server.model("identity_fp32")
    with pytest.raises(tritonserver.UnavailableError,
                       match="cudaMemcpy of 16 bytes from CPU to GPU memory failed"):
        next(model.infer(inputs={"INPUT0": np.ones(4, np.float32)},
                         output_memory_allocator=_LabelledGpuAllocator()))
    _answers_after(model)


@no_gpu
def test_an_sdk_backend_reading_device_memory_without_a_gpu_fails_that_request(server):
    model = server.model("identity_fp32")
    with pytest.raises(tritonserver.UnavailableError,
                       match="cudaMemcpy of 24 bytes from GPU to CPU memory failed"):
        next(model.infer(inputs={"INPUT0": _labelled(MemoryType.GPU, shape=(6,))}))
    _answers_after(model)


class _Echo(tritonserver.PythonModel):
    def execute(self, requests):
        return [{"OUTPUT0": r.inputs["INPUT0"]} for r in requests]


@no_gpu
def test_a_python_model_answering_into_device_memory_without_a_gpu_fails_that_request(
        explicit_empty):
    model = explicit_empty.register_model("echo_gpu_paths", _Echo,
                                          inputs={"INPUT0": (np.float32, [-1])},
                                          outputs={"OUTPUT0": (np.float32, [-1])})
    with pytest.raises(tritonserver.UnavailableError,
                       match="cudaMemcpy of 12 bytes from CPU to GPU memory failed"):
        next(model.infer(inputs={"INPUT0": np.ones(3, np.float32)},
                         output_memory_allocator=_LabelledGpuAllocator()))
    _answers_after(model)


PB_WHERE = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "CPU", np.array([pb_utils.get_input_tensor_by_name(r, "X").is_cpu()]))])
            for r in requests]
"""


@no_gpu
@pytest.mark.parametrize("force_cpu", ["yes", "no"])
def test_pb_utils_device_inputs_follow_force_cpu_only_input_tensors(tmp_path, force_cpu):
    from conftest import start_server, stop_within, write_model

    write_model(tmp_path, "where", f"""
        name: "where"
        backend: "inprocess"
        input [ {{ name: "X", data_type: TYPE_FP32, dims: [ 2, 3 ] }} ]
        output [ {{ name: "CPU", data_type: TYPE_BOOL, dims: [ 1 ] }} ]
        parameters {{ key: "FORCE_CPU_ONLY_INPUT_TENSORS" value: {{ string_value: "{force_cpu}" }} }}
        """, {"model.py": PB_WHERE})
    s = start_server(model_repository=str(tmp_path))
    try:
        model = s.model("where")
        if force_cpu == "no":  # the model sees the input where it is
            out = next(model.infer(inputs={"X": _labelled(MemoryType.GPU)})).outputs["CPU"]
            assert not bool(np.from_dlpack(out)[0])
        else:  # it is copied to the host for the model, which needs CUDA
            with pytest.raises(tritonserver.TritonError, match="cudaMemcpy of 24 bytes failed"):
                next(model.infer(inputs={"X": _labelled(MemoryType.GPU)}))
        host = np.zeros((2, 3), np.float32)
        assert bool(np.from_dlpack(next(model.infer(inputs={"X": host})).outputs["CPU"])[0])
    finally:
        stop_within(s)
