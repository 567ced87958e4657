"""OpenVINO models run as Triton's openvino backend runs them: a batching
model at exactly max_batch_size rows (smaller batches padded with
ENABLE_BATCH_PADDING=yes, refused otherwise), the dynamic batcher's
requests in one run, instances in parallel (OpenVINO releases the GIL),
outputs equal to OpenVINO's own."""

from __future__ import annotations


import numpy as np
import openvino as ov
import pytest

import tritonserver
from conftest import start_server, stop_within
from openvino_backend import models
from parallel_runs import all_at_once, batched, overlapping

BATCHED = """
backend: "openvino"
max_batch_size: 8
dynamic_batching {{ max_queue_delay_microseconds: 200000 }}
input [ {{ name: "A" data_type: TYPE_FP32 dims: [ 4 ] }},
        {{ name: "B" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "SUM" data_type: TYPE_FP32 dims: [ 4 ] }},
         {{ name: "DIFF" data_type: TYPE_FP32 dims: [ 4 ] }} ]
{parameters}
"""
PADDING = 'parameters { key: "ENABLE_BATCH_PADDING" value: { string_value: "Yes" } }'


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("openvino_repo"))
    models.write(root, "padded", models.add_sub(), BATCHED.format(parameters=PADDING))
    models.write(root, "unpadded", models.add_sub(), BATCHED.format(parameters=""))
    models.write(root, "slow", models.slow(), """
backend: "openvino"
instance_group [ { kind: KIND_CPU count: 2 } ]
parameters { key: "INFERENCE_NUM_THREADS" value: { string_value: "2" } }
parameters { key: "NUM_STREAMS" value: { string_value: "2" } }
""")
    return root


@pytest.fixture(scope="module")
def server(repo):
    s = start_server(model_repository=repo, strict_model_config=False)
    yield s
    stop_within(s)


def openvino_answers(repo: str, name: str, feed: dict) -> dict:
    """What OpenVINO itself answers for `feed` (the model file as it is)."""
    compiled = ov.Core().compile_model(f"{repo}/{name}/1/model.xml", "CPU")
    return {k.get_any_name(): v for k, v in compiled(feed).items()}


def test_a_smaller_batch_is_padded_and_trimmed(server, repo):
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((3, 4)).astype(np.float32) for _ in range(2))
    out = next(server.model("padded").infer(inputs={"A": a, "B": b})).outputs
    expected = openvino_answers(repo, "padded", {"A": a, "B": b})
    for name in ("SUM", "DIFF"):
        got = np.from_dlpack(out[name])
        assert got.shape == (3, 4)
        np.testing.assert_allclose(got, expected[name], rtol=1e-6)


def test_without_padding_only_full_batches_run(server):
    model = server.model("unpadded")
    full = np.ones((8, 4), np.float32)
    out = next(model.infer(inputs={"A": full, "B": full})).outputs
    assert np.from_dlpack(out["SUM"]).tolist() == [[2.0] * 4] * 8
    small = np.ones((2, 4), np.float32)
    with pytest.raises(tritonserver.TritonError,
                       match="expected requests with batch size '8', got '2'... this error can "
                             "be avoided by setting 'ENABLE_BATCH_PADDING' parameter"):
        list(model.infer(inputs={"A": small, "B": small}))
    assert server.live()
    out = next(model.infer(inputs={"A": full, "B": full})).outputs
    assert np.from_dlpack(out["DIFF"]).tolist() == [[0.0] * 4] * 8


def test_requests_batched_by_the_dynamic_batcher_run_together(server):
    model = server.model("padded")
    before = model.statistics()["model_stats"][0]
    feeds = [{"A": np.full((1, 4), i, np.float32),
              "B": np.full((1, 4), i, np.float32)} for i in range(12)]
    for i, out in enumerate(all_at_once(model, feeds)):
        assert out["SUM"].tolist() == [[2.0 * i] * 4]
        assert out["DIFF"].tolist() == [[0.0] * 4]
    batched(model, before, 12)  # some requests shared a run


def test_instances_run_in_parallel_with_the_gil_free(server, repo):
    """Two instances (one infer request each, on a compiled model with two
    CPU streams), two long runs at once: they overlap, a Python thread keeps
    ticking while they run, and both answer as OpenVINO does. (With one
    stream, OpenVINO's default for one compiled model, the two infer
    requests take turns.)"""
    model = server.model("slow")
    x = np.ones((1024, 1024), np.float32)
    next(model.infer(inputs={"X": x}))  # warm up
    expected = openvino_answers(repo, "slow", {"X": x})["Y"]
    for y in overlapping(model, {"X": x}, "Y").outputs:
        np.testing.assert_allclose(np.from_dlpack(y), expected, rtol=1e-5)
    assert model.statistics()["model_stats"][0]["execution_count"] >= 3
