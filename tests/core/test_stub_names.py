"""A python-backend model whose name would run shell commands on the 2.51
stub's command line (``bash -c``) is refused as a 2026 python backend
refuses it ("Invalid stub name: contains invalid characters",
INVALID_ARG), on the stub and in-process alike, before anything runs;
qa/L0_backend_python/model_control checks the same over HTTP. Real core,
explicit loads with the model given as parameters (config and model.py)."""

from __future__ import annotations

import json

import pytest

import tritonserver
from conftest import skip_without_python_backend, start_server, stop_within

MODEL_PY = b"""
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())])
            for r in requests]
"""


def _parameters(name: str, **extra) -> dict:
    config = {"name": name, "backend": "python", "max_batch_size": 4,
              "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
              "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]}], **extra}
    return {"config": json.dumps(config), "file:1/model.py": MODEL_PY}


@pytest.fixture(params=["stub", "inprocess"], scope="module")
def server(request, tmp_path_factory):
    if request.param == "stub":
        skip_without_python_backend()
    repo = tmp_path_factory.mktemp("empty")
    s = start_server(model_repository=str(repo), python_backend=request.param,
                     model_control_mode=tritonserver.ModelControlMode.EXPLICIT)
    yield s
    stop_within(s)


@pytest.mark.parametrize("separator", [";", "|", "&", "$(", "`", "\\", "'", '"', "!", "~"])
def test_a_model_name_of_shell_characters_is_refused_and_runs_nothing(server, tmp_path,
                                                                      monkeypatch, separator):
    monkeypatch.chdir(tmp_path)  # where the stubs (children) would run `touch`
    marker = tmp_path / "ran"
    name = f"model{separator}touch ran"
    with pytest.raises(tritonserver.InvalidArgumentError,
                       match="Invalid stub name: contains invalid characters"):
        server.load(name, _parameters(name))
    assert not marker.exists()
    assert server.live()
    assert not server.model(name).ready()


def test_an_instance_group_name_of_shell_characters_is_refused(server, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "ran"
    group = [{"name": "g;touch ran", "kind": "KIND_CPU", "count": 1}]
    with pytest.raises(tritonserver.InvalidArgumentError,
                       match="Invalid stub name: contains invalid characters"):
        server.load("grouped", _parameters("grouped", instance_group=group))
    assert not marker.exists()
    assert server.live()


def test_valid_names_still_load_and_run(server):
    import numpy as np

    for name in ("TestModel123", "model-with-hyphens", "model_with_underscores"):
        model = server.load(name, _parameters(name))
        assert model.ready()
        out = next(model.infer(inputs={"INPUT0": np.ones((1, 2), np.float32)}))
        assert np.from_dlpack(out.outputs["OUTPUT0"]).tolist() == [[1.0, 1.0]]
        server.unload(name, wait_until_unloaded=True)


def test_a_shared_memory_prefix_of_shell_characters_is_refused(tmp_path):
    with pytest.raises(tritonserver.InvalidArgumentError,
                       match="Invalid shared memory region name: contains invalid characters"):
        start_server(model_repository=str(tmp_path), backend_configuration={
            "python": {"shm-region-prefix-name": "x;touch y"}})
