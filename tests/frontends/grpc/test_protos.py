"""The gRPC messages (frontends/grpc/protos.py): the descriptor set the build
installs, loaded without grpcio-tools, into a pool of its own beside
tritonclient's messages."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool

import tritonserver
from tritonserver.frontends.grpc import protos as _protos
from tritonserver.frontends.grpc.protos import messages

from tritonclient.grpc import service_pb2  # noqa: E402

PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(tritonserver.__file__)))


def test_the_package_holds_the_descriptor_set():
    path = _protos.package_file(*_protos.DESCRIPTORS)
    with open(path, "rb") as f:
        files = descriptor_pb2.FileDescriptorSet.FromString(f.read())
    names = {file.name for file in files.file}
    assert names == {"model_config.proto", "grpc_service.proto", "health.proto"}
    services = {f"{file.package}.{s.name}" for file in files.file for s in file.service}
    assert services == {"inference.GRPCInferenceService", "grpc.health.v1.Health"}


def test_messages_need_no_grpc_tools():
    code = (
        "import sys\n"
        "sys.modules['grpc_tools'] = None  # any import of it or its modules fails\n"
        "from tritonserver.frontends.grpc.protos import messages\n"
        "m = messages()\n"
        "request = m.ModelInferRequest(model_name='add_sub_fp32')\n"
        "request.inputs.add(name='INPUT0', datatype='FP32', shape=[4])\n"
        "again = m.ModelInferRequest.FromString(request.SerializeToString())\n"
        "assert again.inputs[0].shape == [4], again\n"
        "assert m.service('inference.GRPCInferenceService').FindMethodByName('ModelInfer')\n"
        "print('OK')\n")
    env = dict(os.environ, PYTHONPATH=PACKAGE_PARENT)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "OK"


def test_a_missing_descriptor_set_says_how_to_build(monkeypatch, tmp_path):
    missing = str(tmp_path / "descriptors.pb")
    monkeypatch.setattr(_protos, "package_file", lambda *parts: missing)
    with pytest.raises(RuntimeError, match=r"is missing: .*pip install"):
        _protos.descriptor_set()


def test_a_private_pool_beside_tritonclients_messages():
    """tritonclient registers the same ``inference.*`` names in protobuf's
    default pool; ours live apart, and the two agree on the wire."""
    ours = messages()
    assert ours.pool is not descriptor_pool.Default()
    assert ours.ModelInferRequest is not service_pb2.ModelInferRequest
    assert descriptor_pool.Default().FindMessageTypeByName("inference.ModelInferRequest")

    theirs = service_pb2.ModelInferRequest(model_name="add_sub_fp32", id="7")
    tensor = theirs.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 4])
    tensor.parameters["binary_data_size"].int64_param = 16
    theirs.raw_input_contents.append(b"\0" * 16)
    parsed = ours.ModelInferRequest.FromString(theirs.SerializeToString())
    assert parsed.model_name == "add_sub_fp32" and parsed.id == "7"
    assert list(parsed.inputs[0].shape) == [1, 4]
    assert parsed.inputs[0].parameters["binary_data_size"].int64_param == 16
    assert service_pb2.ModelInferRequest.FromString(parsed.SerializeToString()) == theirs
