"""classification_label: the top class's label, from the model's label file."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tritonserver
from conftest import start_server, stop_within

CONFIG = '''backend: "identity"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] label_filename: "labels.txt" } ]
'''


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    repo = tmp_path_factory.mktemp("classify")
    os.makedirs(repo / "animals" / "1")
    (repo / "animals" / "config.pbtxt").write_text(CONFIG)
    (repo / "animals" / "labels.txt").write_text("cat\ndog\nbird\nfish\n")
    os.makedirs(repo / "unlabelled" / "1")
    (repo / "unlabelled" / "config.pbtxt").write_text(CONFIG.replace(' label_filename: "labels.txt"', ""))
    s = start_server(model_repository=str(repo))
    yield s
    stop_within(s)


@pytest.mark.parametrize("scores,label", [([0.1, 0.7, 0.15, 0.05], "dog"),
                                          ([0.0, 0.0, 0.0, 0.9], "fish"),
                                          ([5, 1, 1, 1], "cat")])
def test_top_class_label(classifier, scores, label):
    out = next(classifier.model("animals").infer(
        inputs={"INPUT0": np.array(scores, np.float32)}, parameters={"classification": True}))
    assert out.classification_label == label
    np.testing.assert_array_equal(np.from_dlpack(out.outputs["OUTPUT0"]), np.float32(scores))


def test_no_label_unless_asked(classifier):
    out = next(classifier.model("animals").infer(inputs={"INPUT0": np.ones(4, np.float32)}))
    assert out.classification_label is None


def test_no_label_file_gives_none(classifier):
    out = next(classifier.model("unlabelled").infer(
        inputs={"INPUT0": np.array([0, 1, 0, 0], np.float32)}, parameters={"classification": 1}))
    assert out.classification_label is None


def test_bad_classification_parameter(classifier):
    with pytest.raises(tritonserver.InvalidArgumentError, match="classification"):
        classifier.model("animals").infer(inputs={"INPUT0": np.ones(4, np.float32)},
                                          parameters={"classification": "top"})
