"""The GPU paths on a device: DLPack and the CUDA array interface both ways
with CuPy and PyTorch, copies between host, pinned and device memory, output
memory on the requested device through the default and user allocators,
device inputs handed to the core in place, the C++ SDK's identity on a
KIND_GPU instance copying device to device, Python models given device
tensors, BLS outputs on a GPU, TorchScript on cuda:N.

Every test is marked ``gpu`` and skips where no GPU is seen (tests/conftest.py);
tests/api/test_gpu_paths.py covers what runs without one. tests/gpu/device_check.py
runs this file on a lent device."""

from __future__ import annotations

import contextlib
import shutil

import numpy as np
import pytest

import tritonserver
from tritonserver import DataType, MemoryBuffer, MemoryType, Tensor, _cuda

from conftest import start_server, stop_within, write_model

pytestmark = pytest.mark.gpu

cupy = pytest.importorskip("cupy")


def _devices() -> list[int]:
    return list(range(_cuda.device_count()))


@contextlib.contextmanager
def serving(repo):
    """A server on `repo`, stopped with a bound however the test ends."""
    s = start_server(model_repository=str(repo))
    try:
        yield s
    finally:
        stop_within(s)


# ---- Tensor ------------------------------------------------------------------

def test_cupy_arrays_go_in_and_out_in_place():
    a = cupy.arange(12, dtype=cupy.float32).reshape(3, 4)
    t = Tensor.from_dlpack(a)
    assert t.memory_type == MemoryType.GPU and t.memory_type_id == a.device.id
    assert t.data_ptr == a.data.ptr and t.size == a.nbytes
    back = cupy.from_dlpack(t)
    assert back.data.ptr == a.data.ptr
    a[0, 0] = 42
    assert float(back[0, 0]) == 42
    viewed = cupy.asarray(t)  # the CUDA array interface
    assert viewed.data.ptr == a.data.ptr and viewed.shape == (3, 4)


def test_the_cuda_array_interface_is_taken_in_place():
    a = cupy.arange(5, dtype=cupy.int32)

    class Interface:  # only the interface, as Numba's device arrays
        __cuda_array_interface__ = a.__cuda_array_interface__

    t = tritonserver._tensor.tensor_of(Interface())
    assert t.memory_type == MemoryType.GPU and t.data_ptr == a.data.ptr
    assert t.data_type == DataType.INT32 and tuple(t.shape) == (5,)
    np.testing.assert_array_equal(np.from_dlpack(t.to_host()), np.arange(5, dtype=np.int32))


def test_torch_cuda_tensors_go_in_and_out_in_place():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    x = torch.arange(8, dtype=torch.float16, device="cuda:0")
    t = Tensor.from_dlpack(x)
    assert t.memory_type == MemoryType.GPU and t.data_ptr == x.data_ptr()
    y = torch.from_dlpack(t)
    assert y.data_ptr() == x.data_ptr() and y.device == x.device


@pytest.mark.parametrize("device_id", _devices() or [0])
def test_to_device_and_back_on_each_gpu(device_id):
    host = Tensor.from_dlpack(np.linspace(0, 1, 1000, dtype=np.float32))
    on_gpu = host.to_device(f"gpu:{device_id}")
    assert on_gpu.memory_type == MemoryType.GPU and on_gpu.memory_type_id == device_id
    with cupy.cuda.Device(device_id):
        np.testing.assert_array_equal(cupy.asnumpy(cupy.from_dlpack(on_gpu)),
                                      np.from_dlpack(host))
    back = on_gpu.to_host()
    assert back.memory_type == MemoryType.CPU
    np.testing.assert_array_equal(np.from_dlpack(back), np.from_dlpack(host))
    pinned = on_gpu.to_device(MemoryType.CPU_PINNED)
    assert pinned.memory_type == MemoryType.CPU_PINNED
    np.testing.assert_array_equal(np.from_dlpack(pinned), np.from_dlpack(host))


def test_the_documented_to_device_example():
    tensor_cpu = Tensor.from_dlpack(np.array([0, 1, 2], dtype=np.float16))
    for device in (MemoryType.GPU, (MemoryType.GPU, 0),
                   (tritonserver.DLDeviceType.kDLCUDA, 0), "gpu", "gpu:0"):
        tensor_gpu = tensor_cpu.to_device(device)
        ndarray_gpu = cupy.from_dlpack(tensor_gpu)
        ndarray_gpu[0] = ndarray_gpu.mean()
        ndarray_cpu = np.from_dlpack(tensor_gpu.to_device("cpu"))
        assert ndarray_cpu[0] == float(ndarray_gpu[0])


def test_the_size_behind_a_device_pointer_is_its_allocations():
    pointer = cupy.cuda.runtime.malloc(1000)
    try:
        assert _cuda.bytes_from(pointer) >= 1000
        assert _cuda.bytes_from(pointer + 100) == _cuda.bytes_from(pointer) - 100
    finally:
        cupy.cuda.runtime.free(pointer)


def test_bytes_tensors_in_device_memory_are_read_through_the_host():
    t = Tensor.from_bytes_array([b"ab", b"", b"xyz"]).to_device("gpu")
    assert t.memory_type == MemoryType.GPU
    assert t.to_bytes_array().tolist() == [b"ab", b"", b"xyz"]


# ---- Inference ---------------------------------------------------------------

@pytest.fixture(scope="module")
def gpu_server(tmp_path_factory, example_repo):
    """The example models, plus identity on a KIND_GPU instance per device."""
    repo = tmp_path_factory.mktemp("gpu_repo")
    shutil.copytree(f"{example_repo}/identity_fp32", repo / "identity_fp32")
    shutil.copytree(f"{example_repo}/add_sub_fp32", repo / "add_sub_fp32")
    config = (repo / "identity_fp32" / "config.pbtxt").read_text()
    gpus = ", ".join(str(d) for d in _devices())
    write_model(repo, "identity_gpu", config.replace('name: "identity_fp32"', 'name: "identity_gpu"')
                .replace("instance_group [ { kind: KIND_CPU, count: 1 } ]",
                         f"instance_group [ {{ kind: KIND_GPU, count: 1, gpus: [ {gpus} ] }} ]"),
                {})
    with serving(repo) as s:
        yield s


@pytest.mark.parametrize("model", ["identity_fp32", "identity_gpu"])
@pytest.mark.parametrize("device_id", _devices() or [0])
def test_device_inputs_and_outputs_on_the_requested_gpu(gpu_server, model, device_id):
    with cupy.cuda.Device(device_id):
        x = cupy.random.rand(1 << 16).astype(cupy.float32)
    out = next(gpu_server.model(model).infer(inputs={"INPUT0": x},
                                             output_memory_type=f"gpu:{device_id}"))
    y = out.outputs["OUTPUT0"]
    assert y.memory_type == MemoryType.GPU and y.memory_type_id == device_id
    with cupy.cuda.Device(device_id):
        assert bool((cupy.from_dlpack(y) == x).all())


@pytest.mark.parametrize("model", ["identity_fp32", "identity_gpu"])
@pytest.mark.parametrize("where", ["cpu", "cpu_pinned"])
def test_device_inputs_to_host_outputs(gpu_server, model, where):
    x = cupy.arange(1000, dtype=cupy.float32)
    y = next(gpu_server.model(model).infer(inputs={"INPUT0": x},
                                           output_memory_type=where)).outputs["OUTPUT0"]
    assert y.memory_type == (MemoryType.CPU if where == "cpu" else MemoryType.CPU_PINNED)
    np.testing.assert_array_equal(np.from_dlpack(y), cupy.asnumpy(x))


def test_host_inputs_to_device_outputs_of_a_two_output_model(gpu_server):
    a, b = np.arange(16, dtype=np.float32), np.ones(16, np.float32)
    out = next(gpu_server.model("add_sub_fp32").infer(inputs={"INPUT0": a, "INPUT1": b},
                                                      output_memory_type="gpu")).outputs
    np.testing.assert_array_equal(cupy.asnumpy(cupy.from_dlpack(out["OUTPUT0"])), a + b)
    np.testing.assert_array_equal(np.from_dlpack(out["OUTPUT1"].to_host()), a - b)


class CupyAllocator(tritonserver.MemoryAllocator):
    def __init__(self):
        self.calls = []
        self.arrays = []

    def allocate(self, size, memory_type, memory_type_id):
        self.calls.append((size, MemoryType(memory_type), memory_type_id))
        with cupy.cuda.Device(memory_type_id):
            array = cupy.empty(size, cupy.uint8)
        self.arrays.append(array)
        return MemoryBuffer.from_dlpack(array)


def test_a_user_allocator_gets_device_memory_asked_for_on_its_gpu(gpu_server):
    device_id = _devices()[-1]
    allocator = CupyAllocator()
    x = np.arange(256, dtype=np.float32)
    y = next(gpu_server.model("identity_gpu").infer(
        inputs={"INPUT0": x}, output_memory_allocator=allocator,
        output_memory_type=(MemoryType.GPU, device_id))).outputs["OUTPUT0"]
    assert allocator.calls == [(1024, MemoryType.GPU, device_id)]
    assert y.data_ptr == allocator.arrays[0].data.ptr
    np.testing.assert_array_equal(np.from_dlpack(y.to_host()), x)


# ---- Python models ------------------------------------------------------------

class _Where(tritonserver.PythonModel):
    """Answers with its input, and says where the input was."""

    def execute(self, requests):
        replies = []
        for request in requests:
            x = request.inputs["X"]
            on_gpu = isinstance(x, Tensor) and x.memory_type == MemoryType.GPU
            replies.append({"Y": cupy.from_dlpack(x) * 2 if on_gpu else np.asarray(x) * 2,
                            "GPU": np.array([on_gpu])})
        return replies


def test_a_python_model_gets_device_inputs_and_may_answer_with_device_arrays(explicit_empty):
    model = explicit_empty.register_model(
        "where", _Where, inputs={"X": (np.float32, [-1])},
        outputs={"Y": (np.float32, [-1]), "GPU": (np.bool_, [1])})
    x = cupy.arange(10, dtype=cupy.float32)
    out = next(model.infer(inputs={"X": x}, output_memory_type="gpu")).outputs
    assert bool(np.from_dlpack(out["GPU"].to_host())[0])
    assert out["Y"].memory_type == MemoryType.GPU
    assert bool((cupy.from_dlpack(out["Y"]) == x * 2).all())


PB_MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X")
            gpu = np.array([not x.is_cpu()])
            if x.is_cpu():
                y = pb_utils.Tensor("Y", x.as_numpy() + 1)
            else:
                import cupy
                y = pb_utils.Tensor.from_dlpack("Y", cupy.from_dlpack(x.to_dlpack()) + 1)
            responses.append(pb_utils.InferenceResponse([y, pb_utils.Tensor("GPU", gpu)]))
        return responses
"""

PB_CONFIG = """
name: "{name}"
backend: "inprocess"
input [ {{ name: "X", data_type: TYPE_FP32, dims: [ -1 ] }} ]
output [ {{ name: "Y", data_type: TYPE_FP32, dims: [ -1 ] }},
         {{ name: "GPU", data_type: TYPE_BOOL, dims: [ 1 ] }} ]
instance_group [ {{ kind: KIND_GPU, count: 1, gpus: [ 0 ] }} ]
{parameters}
"""


@pytest.mark.parametrize("force_cpu", [None, "yes", "no"])
def test_pb_utils_inputs_follow_force_cpu_only_input_tensors(tmp_path, force_cpu):
    name = f"pb_{force_cpu or 'default'}"
    parameters = ("" if force_cpu is None else
                  f'parameters {{ key: "FORCE_CPU_ONLY_INPUT_TENSORS" '
                  f'value: {{ string_value: "{force_cpu}" }} }}')
    write_model(tmp_path, name, PB_CONFIG.format(name=name, parameters=parameters),
                {"model.py": PB_MODEL})
    with serving(tmp_path) as s:
        x = cupy.arange(6, dtype=cupy.float32)
        out = next(s.model(name).infer(inputs={"X": x})).outputs
        assert bool(np.from_dlpack(out["GPU"])[0]) == (force_cpu == "no")
        np.testing.assert_array_equal(np.from_dlpack(out["Y"]), cupy.asnumpy(x) + 1)


BLS_MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X")
            called = pb_utils.InferenceRequest(
                model_name="identity_fp32", requested_output_names=["OUTPUT0"],
                inputs=[pb_utils.Tensor("INPUT0", x.as_numpy())],
                preferred_memory=pb_utils.PreferredMemory(pb_utils.TRITONSERVER_MEMORY_GPU, 0))
            answer = called.exec()
            if answer.has_error():
                raise pb_utils.TritonModelException(answer.error().message())
            out = pb_utils.get_output_tensor_by_name(answer, "OUTPUT0")
            gpu = np.array([not out.is_cpu()])
            y = pb_utils.Tensor.from_dlpack("Y", out.to_dlpack())
            responses.append(pb_utils.InferenceResponse([y, pb_utils.Tensor("GPU", gpu)]))
        return responses
"""


def test_bls_outputs_on_the_gpu_asked_for(tmp_path, example_repo):
    shutil.copytree(f"{example_repo}/identity_fp32", tmp_path / "identity_fp32")
    write_model(tmp_path, "bls_gpu", PB_CONFIG.format(name="bls_gpu", parameters=""),
                {"model.py": BLS_MODEL})
    with serving(tmp_path) as s:
        x = np.arange(5, dtype=np.float32)
        out = next(s.model("bls_gpu").infer(inputs={"X": x})).outputs
        assert bool(np.from_dlpack(out["GPU"])[0])
        np.testing.assert_array_equal(np.from_dlpack(out["Y"]), x)


# ---- Frameworks ----------------------------------------------------------------

def test_torchscript_on_a_kind_gpu_instance_runs_on_cuda(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")

    class Double(torch.nn.Module):
        def forward(self, x):
            assert x.is_cuda
            return x * 2

    (tmp_path / "double" / "1").mkdir(parents=True)
    torch.jit.script(Double()).save(str(tmp_path / "double" / "1" / "model.pt"))
    (tmp_path / "double" / "config.pbtxt").write_text("""
name: "double"
backend: "pytorch"
input [ { name: "INPUT__0", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "OUTPUT__0", data_type: TYPE_FP32, dims: [ -1 ] } ]
instance_group [ { kind: KIND_GPU, count: 1, gpus: [ 0 ] } ]
""")
    with serving(tmp_path) as s:
        x = torch.arange(7, dtype=torch.float32, device="cuda:0")
        out = next(s.model("double").infer(inputs={"INPUT__0": x},
                                           output_memory_type="gpu")).outputs["OUTPUT__0"]
        assert out.memory_type == MemoryType.GPU
        assert torch.equal(torch.from_dlpack(out), x * 2)
