"""Tests of the framework layer's batching (tritonserver._framework._batch)
and configurations (_framework._config), as the framework backends use
them: requests stacked into one run and the results split back, batch
inputs and scattered outputs, a configuration completed from a model's
tensors and checked against them, with Triton's texts."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tritonserver import InvalidArgumentError
from tritonserver._framework._batch import Batcher, BatchInput
from tritonserver._framework._config import (
    Completion,
    Tensor,
    batch_inputs,
    check,
    check_count,
    check_optional,
    complete,
    config_dims,
    expected_inputs,
    sequence_inputs,
    unexpected,
)

SETTINGS = settings(max_examples=100, deadline=None, database=None)
ONNX = Completion("onnxruntime", default_max_batch_size=4)
OPENVINO = Completion("openvino", default_max_batch_size=1, at_least_one=True, per_entry=False,
                      refuse_unbatchable=False, batching_when_listed=True)


class Request:
    """What the batcher reads of a request: its inputs by name."""

    def __init__(self, **inputs):
        self.inputs = inputs


def batching_config(**extra):
    config = {"max_batch_size": 8,
              "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [2]}],
              "output": [{"name": "Y", "data_type": "TYPE_FP32", "dims": [2]}]}
    config.update(extra)
    return config


# ---- Batcher ---------------------------------------------------------------------------


def test_one_plain_request_is_fed_as_it_is():
    batcher = Batcher(batching_config())
    x = np.ones((3, 2), np.float32)
    feed = batcher.feed([Request(X=x)], None)
    assert feed["X"] is x
    y = np.arange(6).reshape(3, 2)
    assert batcher.split([Request(X=x)], ["Y"], [y])[0]["Y"] is y


@given(st.lists(st.integers(1, 4), min_size=1, max_size=5))
@SETTINGS
def test_stacked_then_split_back_per_request(rows):
    batcher = Batcher(batching_config())
    requests = [Request(X=np.full((n, 2), k, np.float32)) for k, n in enumerate(rows)]
    feed = batcher.feed(requests, None)
    assert feed["X"].shape == (sum(rows), 2)
    assert batcher.sizes(requests) == rows
    parts = batcher.split(requests, ["Y"], [feed["X"] * 10])
    for k, (part, n) in enumerate(zip(parts, rows)):
        np.testing.assert_array_equal(part["Y"], np.full((n, 2), k * 10, np.float32))


def test_prepare_is_applied_to_each_input():
    batcher = Batcher(batching_config())
    requests = [Request(X=np.ones((1, 2), np.float32)), Request(X=np.ones((2, 2), np.float32))]
    seen = []

    def prepare(name, value):
        seen.append(name)
        return value.astype(np.float64) * 2

    feed = batcher.feed(requests, prepare)
    assert seen == ["X", "X"] and feed["X"].dtype == np.float64
    assert float(feed["X"].sum()) == 12.0


def test_mismatched_inputs_cannot_be_stacked():
    batcher = Batcher(batching_config())
    with pytest.raises(ValueError):
        batcher.feed([Request(X=np.ones((1, 2))), Request(X=np.ones((1, 3)))], None)
    with pytest.raises(KeyError):
        batcher.feed([Request(X=np.ones((1, 2))), Request(Z=np.ones((1, 2)))], None)


def test_ragged_inputs_batch_inputs_and_scattered_outputs():
    config = batching_config(
        input=[{"name": "R", "data_type": "TYPE_FP32", "dims": [-1], "allow_ragged_batch": True}],
        batch_input=[{"kind": "BATCH_ACCUMULATED_ELEMENT_COUNT", "target_name": ["ACC"],
                      "data_type": "TYPE_INT32", "source_input": ["R"]},
                     {"kind": "BATCH_ELEMENT_COUNT", "target_name": ["N", "N2"],
                      "data_type": "TYPE_INT64", "source_input": ["R"]}],
        batch_output=[{"kind": "BATCH_SCATTER_WITH_INPUT_SHAPE", "target_name": ["OUT"],
                       "source_input": ["R"]}])
    batcher = Batcher(config)
    assert not batcher.plain and batcher.ragged == {"R"}
    requests = [Request(R=np.arange(3, dtype=np.float32).reshape(1, 3)),
                Request(R=np.arange(5, dtype=np.float32).reshape(1, 5))]
    feed = batcher.feed(requests, None)
    assert feed["R"].shape == (8,)  # flattened and joined
    assert feed["ACC"].tolist() == [3, 8] and feed["ACC"].dtype == np.int32
    assert feed["N"].tolist() == [3, 5] and feed["N2"].dtype == np.int64
    parts = batcher.split(requests, ["OUT"], [feed["R"] + 1])
    assert parts[0]["OUT"].tolist() == [[1, 2, 3]]
    assert parts[1]["OUT"].tolist() == [[1, 2, 3, 4, 5]]
    # A scattered output with rows of its own: each element's row follows the shape.
    rows = np.arange(16, dtype=np.float32).reshape(8, 2)
    parts = batcher.split(requests, ["OUT"], [rows])
    assert parts[0]["OUT"].shape == (1, 3, 2) and parts[1]["OUT"].shape == (1, 5, 2)
    with pytest.raises(InvalidArgumentError, match="cannot be scattered"):
        batcher.split(requests, ["OUT"], [np.zeros(7)])


@pytest.mark.parametrize("kind,shapes,expected", [
    ("BATCH_ELEMENT_COUNT", [(1, 3), (2, 2)], [3, 4]),
    ("BATCH_ACCUMULATED_ELEMENT_COUNT", [(1, 3), (2, 2)], [3, 7]),
    ("BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO", [(1, 3), (2, 2)], [0, 3, 7]),
    ("BATCH_ITEM_SHAPE", [(1, 3), (2, 2)], [[3], [2], [2]]),
    ("BATCH_ITEM_SHAPE_FLATTEN", [(1, 3), (2, 2)], [3, 2, 2]),
])
def test_batch_input_values(kind, shapes, expected):
    value = BatchInput({"kind": kind, "target_name": ["T"], "data_type": "TYPE_INT32",
                        "source_input": ["S"]}).value(shapes)
    assert value.tolist() == expected and value.dtype == np.int32


def test_batch_input_max_as_shape_and_unknown_kind():
    entry = {"kind": "BATCH_MAX_ELEMENT_COUNT_AS_SHAPE", "target_name": ["T"],
             "source_input": ["S"]}
    assert BatchInput(entry).value([(1, 3), (1, 7)]).shape == (7,)
    assert BatchInput(entry).value([]).shape == (0,)
    with pytest.raises(InvalidArgumentError, match="BATCH_NOPE is not supported"):
        BatchInput({"kind": "BATCH_NOPE", "source_input": ["S"]}).value([(1,)])


def test_sequence_states_are_read_from_the_config():
    batcher = Batcher({"max_batch_size": 0, "input": [{"name": "X"}],
                       "sequence_batching": {"state": [{"input_name": "S_IN",
                                                        "output_name": "S_OUT",
                                                        "data_type": "TYPE_INT32"}]}})
    assert not batcher.batching and batcher.state_outputs == ["S_OUT"]
    assert batcher.sizes([Request(X=np.zeros((5,)))]) == [5]
    assert Batcher({}).sizes([Request(), Request()]) == [1, 1]


# ---- Configurations --------------------------------------------------------------------


MODEL_IN = [Tensor("X", "TYPE_FP32", [-1, 2])]
MODEL_OUT = [Tensor("Y", "TYPE_FP32", [-1, 2])]


def test_complete_fills_what_an_empty_config_lacks(caplog):
    with caplog.at_level(logging.WARNING, "tritonserver.onnxruntime"):
        done = complete("m", ONNX, {}, MODEL_IN, MODEL_OUT, True, None)
    assert done == {"max_batch_size": 4, "dynamic_batching": {},
                    "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [2]}],
                    "output": [{"name": "Y", "data_type": "TYPE_FP32", "dims": [2]}]}
    assert "max_batch_size set to 4" in caplog.text
    assert complete("m", ONNX, {}, MODEL_IN, MODEL_OUT, True, "16")["max_batch_size"] == 16
    # A model that cannot batch keeps its whole shape; a scalar becomes dims [1].
    fixed = complete("m", ONNX, {}, [Tensor("X", "TYPE_INT64", [])],
                     [Tensor("Y", "TYPE_FP32", [3])], False, None)
    assert fixed == {"input": [{"name": "X", "data_type": "TYPE_INT64", "dims": [1]}],
                     "output": [{"name": "Y", "data_type": "TYPE_FP32", "dims": [3]}]}


def test_complete_keeps_a_full_config_and_fills_entries():
    full = batching_config()
    assert complete("m", ONNX, full, MODEL_IN, MODEL_OUT, True, None) is None
    partial = {"max_batch_size": 2, "input": [{"name": "X"}]}
    done = complete("m", ONNX, partial, MODEL_IN, MODEL_OUT, True, None)
    assert done["input"] == [{"name": "X", "data_type": "TYPE_FP32", "dims": [2]}]
    assert done["dynamic_batching"] == {} and partial == {"max_batch_size": 2,
                                                          "input": [{"name": "X"}]}
    # OpenVINO fills only whole lists, and max_batch_size even when both are listed.
    done = complete("m", OPENVINO, {"input": [{"name": "X"}], "output": [{"name": "Y"}]},
                    MODEL_IN, MODEL_OUT, True, "0")
    assert done["max_batch_size"] == 1 and done["input"] == [{"name": "X"}]


def test_complete_refusals():
    with pytest.raises(InvalidArgumentError, match="'lots' is not an integer"):
        complete("m", ONNX, {}, MODEL_IN, MODEL_OUT, True, "lots")
    with pytest.raises(InvalidArgumentError, match="does not support batching"):
        complete("m", ONNX, {"max_batch_size": 4}, [Tensor("X", "TYPE_FP32", [2])], [], False,
                 None)
    # OpenVINO only warns.
    assert complete("m", OPENVINO, {"max_batch_size": 4}, [Tensor("X", "TYPE_FP32", [2])],
                    [], False, None) is not None


def test_counting_inputs():
    config = batching_config(
        input=[{"name": "A"}, {"name": "B", "optional": True}],
        batch_input=[{"target_name": ["T1", "T2"]}],
        sequence_batching={"control_input": [{"name": "START", "control": [{"kind": "X"}]},
                                             {"name": "NONE"}],
                           "state": [{"input_name": "S"}]})
    assert sequence_inputs(config) == ["START", "S"]
    assert batch_inputs(config) == ["T1", "T2"]
    assert expected_inputs(config) == 5
    check_count("m", config, ["a", "b", "c", "d", "e"])
    check_count("m", config, ["a"], count_sequence=False)
    with pytest.raises(InvalidArgumentError, match="expects 5 inputs, model provides 1 \\(a\\)"):
        check_count("m", config, ["a"])
    with pytest.raises(InvalidArgumentError, match="optional input 'B' is not supported"):
        check_optional("m", config)


def test_check_accepts_a_matching_config():
    check("m", batching_config(), MODEL_IN, MODEL_OUT)
    check("m", {"input": [{"name": "X", "data_type": "TYPE_INT64", "dims": [1]}]},
          [Tensor("X", "TYPE_INT64", [])], [])
    # A free model dim takes any configured input dim.
    check("m", {"max_batch_size": 0,
                "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [7]}]},
          [Tensor("X", "TYPE_FP32", [-1])], [])


@pytest.mark.parametrize("config,inputs,outputs,message", [
    (batching_config(input=[{"name": "Q", "data_type": "TYPE_FP32", "dims": [2]}]),
     MODEL_IN, MODEL_OUT, "unexpected inference input 'Q', allowed inputs are: X"),
    (batching_config(), [Tensor("X", "TYPE_INT32", [-1, 2])], MODEL_OUT,
     "expects datatype TYPE_FP32 for input 'X', the model provides TYPE_INT32"),
    (batching_config(), [Tensor("X", "TYPE_FP32", [3, 2])], MODEL_OUT,
     "its first dimension must be free"),
    (batching_config(), [Tensor("X", "TYPE_FP32", [-1, 3])], MODEL_OUT,
     "has shape [-1, 3] in the model, but the configuration gives [-1, 2] (a batch dimension"),
    (batching_config(), MODEL_IN, [Tensor("Y", "TYPE_FP32", [-1, -1])],
     "output 'Y' has shape [-1, -1]"),
    ({"input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [2]}]},
     [Tensor("X", "TYPE_FP32", [])], [], "is a scalar in the model"),
])
def test_check_refusals(config, inputs, outputs, message):
    with pytest.raises(InvalidArgumentError) as e:
        check("m", config, inputs, outputs)
    assert message in str(e.value) and "'m'" in str(e.value)


def test_reshape_and_defaulted_inputs():
    entry = {"name": "X", "dims": [4], "reshape": {"shape": [2, 2]}}
    assert config_dims(entry) == [2, 2]
    assert config_dims({"dims": ["3"]}) == [3]
    config = {"input": [entry, {"name": "D", "data_type": "TYPE_FP32", "dims": [1],
                                "optional": True}]}
    check("m", {**config, "input": [dict(entry, data_type="TYPE_FP32"), config["input"][1]]},
          [Tensor("X", "TYPE_FP32", [2, 2])], [], defaulted=(Tensor("D", "TYPE_FP32", []),))
    text = str(unexpected("m", "output", "Z", []))
    assert text.endswith("allowed outputs are: none")


@given(st.lists(st.sampled_from(["TYPE_FP32", "TYPE_INT8", "TYPE_BOOL"]), min_size=1,
                max_size=4),
       st.lists(st.integers(1, 5), min_size=0, max_size=3), st.booleans())
@SETTINGS
def test_a_completed_config_passes_its_own_check(types, dims, batchable):
    inputs = [Tensor(f"I{k}", t, ([-1] if batchable else []) + dims) for k, t in enumerate(types)]
    outputs = [Tensor("O", types[0], ([-1] if batchable else []) + dims)]
    done = complete("m", ONNX, {}, inputs, outputs, batchable, None)
    assert done is not None
    check("m", done, inputs, outputs)
