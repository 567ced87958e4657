"""InferenceRequest fields reaching the model, and repository management."""

from __future__ import annotations

import json
import os
import queue
import shutil
import time

import numpy as np
import pytest

import tritonserver
from conftest import start_server, stop_within


def seen_by_model(server, **request):
    out = next(server.model("python_echo_params").infer(
        inputs={"INPUT0": np.zeros(1, np.float32)}, **request))
    return json.loads(out.outputs["PARAMS"].to_bytes_array()[0])


def test_parameters_of_every_type_reach_the_model(python_server):
    seen = seen_by_model(python_server, parameters={"s": "text", "i": -42, "b": True, "f": 0.25})
    assert seen["parameters"] == {"s": "text", "i": -42, "b": True, "f": 0.25}


def test_request_id_reaches_the_model_and_comes_back(python_server):
    seen = seen_by_model(python_server, request_id="req-77")
    assert seen["request_id"] == "req-77"
    out = next(python_server.model("python_echo_params").infer(
        inputs={"INPUT0": np.zeros(1, np.float32)}, request_id="req-78"))
    assert out.request_id == "req-78"


def test_explicit_request_object(python_server):
    model = python_server.model("python_echo_params")
    request = model.create_request(inputs={"INPUT0": np.zeros(1, np.float32)},
                                   parameters={"k": "v"}, request_id="r1")
    assert isinstance(request, tritonserver.InferenceRequest) and request.model is model
    seen = json.loads(next(model.infer(request)).outputs["PARAMS"].to_bytes_array()[0])
    assert seen == {"parameters": {"k": "v"}, "request_id": "r1"}


def test_poll_mode_picks_up_new_and_removed_models(example_repo, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copytree(os.path.join(example_repo, "identity_fp32"), repo / "identity_fp32")
    s = start_server(model_repository=str(repo), model_control_mode=tritonserver.ModelControlMode.POLL)
    try:
        assert {n for n, _ in s.models()} == {"identity_fp32"}
        shutil.copytree(os.path.join(example_repo, "add_sub_fp32"), repo / "add_sub_fp32")
        s.poll_model_repository()
        assert s.model("add_sub_fp32").ready()
        shutil.rmtree(repo / "identity_fp32")
        s.poll_model_repository()
        assert ("identity_fp32", 1) not in s.models(exclude_not_ready=True)
    finally:
        stop_within(s)


def test_register_repository_with_a_name_mapping(example_repo, tmp_path):
    extra = tmp_path / "extra"
    shutil.copytree(os.path.join(example_repo, "identity_fp32"), extra / "some_dir")
    s = start_server(model_repository=example_repo,
                     model_control_mode=tritonserver.ModelControlMode.EXPLICIT)
    try:
        s.register_model_repository(str(extra), {"some_dir": "renamed_identity"})
        model = s.load("renamed_identity")
        out = next(model.infer(inputs={"INPUT0": np.ones(2, np.float32)}))
        assert np.from_dlpack(out.outputs["OUTPUT0"]).tolist() == [1.0, 1.0]
        del out
        s.unload("renamed_identity", wait_until_unloaded=True, timeout=30)
        s.unregister_model_repository(str(extra))
        with pytest.raises(tritonserver.TritonError):
            s.load("renamed_identity")
    finally:
        stop_within(s)


def test_explicit_mode_startup_models(example_repo):
    s = start_server(model_repository=example_repo,
                     model_control_mode=tritonserver.ModelControlMode.EXPLICIT,
                     startup_models=["add_sub_int32"])
    try:
        ready = {n for n, _ in s.models(exclude_not_ready=True)}
        assert ready == {"add_sub_int32"}
    finally:
        stop_within(s)


PRIORITY_SLEEP = '''backend: "sleep"
max_batch_size: 1
input [ { name: "DELAY_US" data_type: TYPE_INT64 dims: [ 1 ] } ]
output [ { name: "WAITED_US" data_type: TYPE_INT64 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU, count: 1 } ]
dynamic_batching { priority_levels: 2 default_priority_level: 2 }
'''


def test_priority_overtakes_queued_requests(tmp_path):
    # One instance, busy; three default-priority requests queue, then one of
    # priority 1: it runs next, before the three queued earlier.
    os.makedirs(tmp_path / "prio" / "1")
    (tmp_path / "prio" / "config.pbtxt").write_text(PRIORITY_SLEEP)
    s = start_server(model_repository=str(tmp_path))
    try:
        model = s.model("prio")
        done: "queue.SimpleQueue" = queue.SimpleQueue()

        def send(request_id, us, **fields):
            return model.infer(inputs={"DELAY_US": np.array([[us]], np.int64)},
                               request_id=request_id, response_queue=done, **fields)

        iterators = [send("blocker", 600_000)]
        time.sleep(0.1)  # the blocker is executing
        iterators += [send(f"low{i}", 1_000) for i in range(3)]
        iterators.append(send("high", 1_000, priority=1))
        order = [done.get(timeout=30).request_id for _ in iterators]
        assert order[:2] == ["blocker", "high"], order
        assert sorted(order[2:]) == ["low0", "low1", "low2"]
        del iterators
    finally:
        stop_within(s)
