"""Triton's time-to-first-response histogram (nv_inference_first_response_histogram_ms,
--metrics-config histogram_latencies=true) and the configuration's model_metrics, on core
2.51, which has neither: the package times the requests it sends (see
tritonserver._control.latency_histograms)."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

import tritonserver
from conftest import start_server, stop_within

FAMILY = "nv_inference_first_response_histogram_ms"
ON = {"": {"histogram_latencies": "true"}}
MODEL_METRICS = """
model_metrics {
  metric_control: [
    {
      metric_identifier: { family: "nv_inference_first_response_histogram_ms" }
      histogram_options: { buckets: [ %s ] }
    }
  ]
}
"""


def histogram(server: tritonserver.Server, model: str) -> dict[str, float]:
    """The model's samples of the family: {"count": .., "sum": .., "le=100": ..}."""
    samples = {}
    pattern = re.compile(rf'^{FAMILY}_(count|sum|bucket)\{{model="{model}",version="1"'
                         r'(?:,le="([^"]+)")?\} (\S+)$', re.MULTILINE)
    for kind, le, value in pattern.findall(server.metrics()):
        samples[f"le={le}" if kind == "bucket" else kind] = float(value)
    return samples


@pytest.fixture
def repo(example_repo, tmp_path):
    path = tmp_path / "repo"
    for name in ("sleep_us", "repeat_int32", "identity_fp32"):
        shutil.copytree(f"{example_repo}/{name}", path / name)
    return path


def explicit(repo, **options) -> tritonserver.Server:
    return start_server(model_repository=str(repo),
                        model_control_mode=tritonserver.ModelControlMode.EXPLICIT, **options)


def test_off_unless_asked(repo):
    s = explicit(repo)
    try:
        s.load("identity_fp32")
        list(s.model("identity_fp32").infer(inputs={"INPUT0": np.ones(2, np.float32)}))
        assert FAMILY not in s.metrics()
    finally:
        stop_within(s)


def test_a_loaded_model_shows_its_histogram_and_each_request_is_observed_once(repo):
    s = explicit(repo, metrics_configuration=ON)
    try:
        s.load("sleep_us")
        s.load("repeat_int32")
        # Loaded, before any request: zero, with Triton's default buckets.
        assert histogram(s, "sleep_us") == {"count": 0, "sum": 0, "le=100": 0, "le=500": 0,
                                            "le=2000": 0, "le=5000": 0, "le=+Inf": 0}
        for _ in range(3):
            for response in s.model("sleep_us").infer(
                    inputs={"DELAY_US": np.array([30000], np.int64)}):
                assert np.from_dlpack(response.outputs["WAITED_US"])[0] >= 30000
        h = histogram(s, "sleep_us")
        assert h["count"] == 3 and h["le=+Inf"] == 3
        # Whole milliseconds, each at least the model's 30.
        assert 90 <= h["sum"] < 3 * 2000 and h["sum"] == int(h["sum"])
        # Decoupled: four responses, one first response.
        responses = list(s.model("repeat_int32").infer(
            inputs={"IN": np.array([1, 2, 3, 4], np.int32)}))
        assert len([r for r in responses if r.outputs]) == 4
        assert histogram(s, "repeat_int32")["count"] == 1
        # Unloaded: gone from /metrics.
        s.unload("repeat_int32", wait_until_unloaded=True)
        assert histogram(s, "repeat_int32") == {}
    finally:
        stop_within(s)


def test_model_metrics_sets_the_buckets_on_a_core_that_does_not_know_the_field(repo):
    config = repo / "identity_fp32" / "config.pbtxt"
    text = config.read_text()
    config.write_text(text + MODEL_METRICS % "-1, 0.0, 1, 2.5")
    s = explicit(repo, metrics_configuration=ON)
    try:
        s.load("identity_fp32")
        list(s.model("identity_fp32").infer(inputs={"INPUT0": np.ones(2, np.float32)}))
        h = histogram(s, "identity_fp32")
        assert sorted(k for k in h if k.startswith("le=")) == [
            "le=+Inf", "le=-1", "le=0", "le=1", "le=2.5"]
        assert h["count"] == 1 and h["le=-1"] == 0
        # Reloaded with other buckets: a histogram with those.
        config.write_text(text + MODEL_METRICS % "7")
        s.load("identity_fp32")
        assert sorted(k for k in histogram(s, "identity_fp32") if k.startswith("le=")) == [
            "le=+Inf", "le=7"]
    finally:
        stop_within(s)
    # Histograms off: the field is still taken out of what the core reads.
    config.write_text(text + MODEL_METRICS % "1")
    s = explicit(repo)
    try:
        s.load("identity_fp32")
        assert s.model("identity_fp32").ready() and FAMILY not in s.metrics()
    finally:
        stop_within(s)


@pytest.mark.parametrize("control,message", [
    ('histogram_options: { buckets: [ 1 ] }', "metric control must specify 'metric_identifier'"),
    ('metric_identifier: { family: "" } histogram_options: { buckets: [ 1 ] }',
     "metric identifier must specify non-empty 'family'"),
    (f'metric_identifier: {{ family: "{FAMILY}" }}',
     "metric control must specify 'histogram_options'"),
    (f'metric_identifier: {{ family: "{FAMILY}" }} histogram_options: {{ }}',
     "histogram options must specify non-empty 'buckets'"),
])
def test_a_model_metrics_triton_refuses_fails_the_load_with_its_text(repo, control, message):
    config = repo / "identity_fp32" / "config.pbtxt"
    config.write_text(config.read_text() + f"model_metrics {{ metric_control: [ {{ {control} }} ] }}\n")
    s = explicit(repo, metrics_configuration=ON)
    try:
        with pytest.raises(tritonserver.InvalidArgumentError, match=re.escape(message)):
            s.load("identity_fp32")
        assert s.model("identity_fp32").state in (None, "UNAVAILABLE")
    finally:
        stop_within(s)
