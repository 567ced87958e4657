"""The examples of the Python API reference (the `tritonserver` package's
documented examples: Server, Model, InferenceRequest...), run against our models.

Each test follows one documented example as closely as our example models
allow; a program written against the page must run unchanged.
"""

from __future__ import annotations

import os
import shutil

import numpy
import pytest

import tritonserver
from conftest import stop_within
from tritonserver import MemoryType, Tensor

FP16_CONFIG = '''backend: "identity"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP16 dims: [ -1, 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP16 dims: [ -1, 1 ] } ]
'''


@pytest.fixture(scope="module")
def repo(tmp_path_factory, example_repo):
    path = tmp_path_factory.mktemp("reference")
    for name in ("identity_bytes", "identity_batched", "repeat_int32"):
        shutil.copytree(os.path.join(example_repo, name), path / name)
    os.makedirs(path / "test" / "1")
    (path / "test" / "config.pbtxt").write_text(FP16_CONFIG)
    shutil.copytree(path / "identity_bytes", path / "new_name")
    (path / "new_name" / "config.pbtxt").write_text(
        (path / "identity_bytes" / "config.pbtxt").read_text().replace("identity_bytes", "new_name"))
    return str(path)


@pytest.fixture(scope="module")
def server(repo):
    server = tritonserver.Server(model_repository=repo,
                                 model_control_mode=tritonserver.ModelControlMode.EXPLICIT,
                                 startup_models=["test", "identity_bytes", "identity_batched"],
                                 exit_timeout=10)
    server.start()
    yield server
    stop_within(server)


def test_server_examples(server):
    assert server.live() is True
    assert server.ready() is True
    meta = server.metadata()
    assert meta["name"] == "triton" and "version" in meta and "extensions" in meta
    assert repr(server.model("test")) == "{'name': 'test', 'version': -1, 'state': None}"
    assert server.model("test").metadata()["inputs"][0] == {
        "name": "INPUT0", "datatype": "FP16", "shape": [-1, 1]}


def test_load_and_unload_examples(server):
    model = server.load("new_name")
    assert model.name == "new_name"
    assert server.models()[("new_name", 1)].state == "READY"
    server.unload("new_name", wait_for_unloaded=True)
    assert server.models()[("new_name", 1)].state == "UNAVAILABLE"
    assert ("new_name", 1) not in server.models(exclude_not_ready=True)


def test_model_examples(server):
    assert server.model("identity_batched").batch_properties() == \
        tritonserver.ModelBatchFlag.FIRST_DIM
    assert server.model("test").transaction_properties() == \
        tritonserver.ModelTxnPropertyFlag.ONE_TO_ONE
    assert server.model("test").config()["name"] == "test"
    assert server.model("test").ready() is True
    assert server.model("test").statistics()["model_stats"][0]["name"] == "test"
    request = server.model("test").create_request()
    assert isinstance(request, tritonserver.InferenceRequest) and request.inputs == {}


def test_infer_examples(server):
    responses = list(server.model("identity_bytes").infer(inputs={"INPUT0": ["hello"]}))
    response = responses[0]
    assert "InferenceResponse(" in repr(response)
    assert response.outputs["OUTPUT0"].to_bytes_array().tolist() == [b"hello"]

    request = server.model("test").create_request()
    request.inputs["INPUT0"] = numpy.array([[1.0]]).astype(numpy.float16)
    seen = [numpy.from_dlpack(r.outputs["OUTPUT0"]) for r in server.model("test").infer(request)]
    assert [a.tolist() for a in seen] == [[[1.0]]]


def test_cancel_example(server):
    server.load("repeat_int32")
    responses = server.model("repeat_int32").infer(inputs={"IN": numpy.arange(3, dtype=numpy.int32)})
    responses.cancel()  # best effort: it may already be done
    try:
        for response in responses:  # the iterator ends either way
            pass
    except tritonserver.CancelledError:
        pass  # it took effect
    assert server.live()


def test_tensor_examples():
    for tensor in (Tensor.from_bytes_array(numpy.array(["hello"])), Tensor.from_bytes_array(["hello"])):
        assert tensor.to_bytes_array().tolist() == [b"hello"]
    for tensor in (Tensor.from_string_array(numpy.array(["hello"])), Tensor.from_string_array(["hello"])):
        assert tensor.to_string_array().tolist() == ["hello"]
    tensor = Tensor.from_dlpack(numpy.array([0, 1, 2], dtype=numpy.float16))
    assert tensor.data_type == tritonserver.DataType.FP16
    numpy_nd_array = numpy.array(tensor.to_host())
    assert numpy_nd_array.tolist() == [0, 1, 2]
    for device in ("cpu", MemoryType.CPU, (MemoryType.CPU, 0), (tritonserver.DLDeviceType.kDLCPU, 0)):
        assert numpy.from_dlpack(tensor.to_device(device)).tolist() == [0, 1, 2]


def test_memory_buffer_and_allocator_examples():
    buffer = tritonserver.MemoryBuffer.from_dlpack(numpy.array([100], dtype=numpy.uint8))
    assert buffer.size == 1 and buffer.memory_type == MemoryType.CPU
    assert (numpy.ctypeslib.as_array((numpy.ctypeslib.ctypes.c_uint8 * 1).from_address(buffer.data_ptr))
            == [100]).all()

    class NumpyAllocator(tritonserver.MemoryAllocator):  # the TorchAllocator example, on numpy
        def allocate(self, size, memory_type, memory_type_id):
            return tritonserver.MemoryBuffer.from_dlpack(numpy.zeros(size, dtype=numpy.uint8))

    allocator = NumpyAllocator()
    memory_buffer = allocator.allocate(100, MemoryType.CPU, 0)
    assert memory_buffer.size == 100


def test_gpu_examples_need_a_gpu():
    from conftest import _gpu_seen

    if _gpu_seen():
        pytest.skip("a GPU is here: tests/gpu runs the GPU examples")
    tensor_cpu = Tensor.from_dlpack(numpy.array([0, 1, 2], dtype=numpy.float16))
    with pytest.raises(tritonserver.UnavailableError, match="cudaError"):
        tensor_cpu.to_device("gpu:0")
