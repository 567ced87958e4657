"""ONNX models for the tests, built with the onnx package (no files in the
repository), and model folders holding them."""

from __future__ import annotations

import os
from typing import Optional

import numpy as np
import onnx
from onnx import TensorProto, helper

OPSET = 17
IR_VERSION = 8  # what every onnxruntime >= 1.17 reads
# One CPU instance: core 2.51 can crash tearing down a model with two
# (docs/onnx.md, known issue).
ONE_INSTANCE = "instance_group [ { kind: KIND_CPU count: 1 } ]"

# Triton config type -> ONNX element type, for every type the backend maps.
TYPES = {
    "TYPE_BOOL": TensorProto.BOOL, "TYPE_INT8": TensorProto.INT8, "TYPE_INT16": TensorProto.INT16,
    "TYPE_INT32": TensorProto.INT32, "TYPE_INT64": TensorProto.INT64,
    "TYPE_UINT8": TensorProto.UINT8, "TYPE_UINT16": TensorProto.UINT16,
    "TYPE_UINT32": TensorProto.UINT32, "TYPE_UINT64": TensorProto.UINT64,
    "TYPE_FP16": TensorProto.FLOAT16, "TYPE_FP32": TensorProto.FLOAT,
    "TYPE_FP64": TensorProto.DOUBLE, "TYPE_STRING": TensorProto.STRING,
}


def _model(nodes, inputs, outputs, initializers=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "test", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model


def add_sub(first_dim="batch", width: int = 4) -> onnx.ModelProto:
    """SUM = A + B, DIFF = A - B (FP32, [first_dim, width])."""
    shape = [first_dim, width]
    tensor = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, shape)  # noqa: E731
    return _model([helper.make_node("Add", ["A", "B"], ["SUM"]),
                   helper.make_node("Sub", ["A", "B"], ["DIFF"])],
                  [tensor("A"), tensor("B")], [tensor("SUM"), tensor("DIFF")])


def identities(batch: bool = True) -> onnx.ModelProto:
    """OUT_<T> = IN_<T> for every type (shape [batch, n] or [n])."""
    shape = ["batch", "n"] if batch else ["n"]
    nodes, inputs, outputs = [], [], []
    for config_type, element in TYPES.items():
        suffix = config_type[len("TYPE_"):]
        nodes.append(helper.make_node("Identity", [f"IN_{suffix}"], [f"OUT_{suffix}"]))
        inputs.append(helper.make_tensor_value_info(f"IN_{suffix}", element, shape))
        outputs.append(helper.make_tensor_value_info(f"OUT_{suffix}", element, shape))
    return _model(nodes, inputs, outputs)


def scaled(scale: float, size: int = 4) -> onnx.ModelProto:
    """Y = X * W, W a weight of `size` values all `scale` (for external data)."""
    values = np.full(size, scale, np.float32).tobytes()  # raw: can live in external data
    weight = helper.make_tensor("W", TensorProto.FLOAT, [size], values, raw=True)
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch", size])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["batch", size])
    return _model([helper.make_node("Mul", ["X", "W"], ["Y"])], [x], [y], [weight])


def reshaper() -> onnx.ModelProto:
    """Y = reshape(X, SHAPE): fails inside run when SHAPE does not fit X."""
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, ["n"])
    shape = helper.make_tensor_value_info("SHAPE", TensorProto.INT64, [2])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["a", "b"])
    return _model([helper.make_node("Reshape", ["X", "SHAPE"], ["Y"])], [x, shape], [y])


def slow(size: int = 512, rounds: int = 40, between: Optional[str] = None) -> onnx.ModelProto:
    """Y = X @ W @ W ... (`rounds` matrix products of [size, size]): a run
    long enough to watch what happens while it runs. `between`: an
    elementwise op after each product but the last (a compiler that folds
    a chain of constant products cannot fold through it)."""
    weight = helper.make_tensor("W", TensorProto.FLOAT, [size, size],
                                [1.0 / size] * (size * size))
    nodes, last = [], "X"
    for i in range(rounds):
        out = "Y" if i == rounds - 1 else f"T{i}"
        nodes.append(helper.make_node("MatMul", [last, "W"], [out]))
        last = out
        if between and i < rounds - 1:
            last = f"U{i}"
            nodes.append(helper.make_node(between, [out], [last]))
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [size, size])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [size, size])
    return _model(nodes, [x], [y], [weight])


def conv_net(seed: int = 3) -> onnx.ModelProto:
    """A small convolutional network: [batch, 3, 32, 32] -> two 3x3 convs
    with ReLU, a residual add, global average pooling, a dense layer to 10
    classes (LOGITS)."""
    rng = np.random.default_rng(seed)

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        values = (rng.standard_normal(shape) * 0.1).astype(np.float32)
        return helper.make_tensor(name, TensorProto.FLOAT, list(shape), values.tobytes(), raw=True)

    pads = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    nodes = [
        helper.make_node("Conv", ["IMAGE", "W1", "B1"], ["c1"], **pads),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "W2", "B2"], ["c2"], **pads),
        helper.make_node("Add", ["c2", "r1"], ["sum"]),
        helper.make_node("Relu", ["sum"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["pooled"]),
        helper.make_node("Flatten", ["pooled"], ["flat"]),
        helper.make_node("Gemm", ["flat", "W3", "B3"], ["LOGITS"]),
    ]
    weights = [weight("W1", 8, 3, 3, 3), weight("B1", 8), weight("W2", 8, 8, 3, 3),
               weight("B2", 8), weight("W3", 8, 10), weight("B3", 10)]
    image = helper.make_tensor_value_info("IMAGE", TensorProto.FLOAT, ["batch", 3, 32, 32])
    logits = helper.make_tensor_value_info("LOGITS", TensorProto.FLOAT, ["batch", 10])
    return _model(nodes, [image], [logits], weights)


def _fp32(name: str, shape: list) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def sequence_controls() -> onnx.ModelProto:
    """OUTPUT = INPUT * READY + 100 * START: the sequence batcher's control
    tensors as graph inputs (each [batch, 1])."""
    return _model([helper.make_node("Mul", ["INPUT", "READY"], ["ready_input"]),
                   helper.make_node("Mul", ["START", "HUNDRED"], ["started"]),
                   helper.make_node("Add", ["ready_input", "started"], ["OUTPUT"])],
                  [_fp32(n, ["batch", 1]) for n in ("INPUT", "START", "READY")],
                  [_fp32("OUTPUT", ["batch", 1])],
                  [helper.make_tensor("HUNDRED", TensorProto.FLOAT, [], [100.0])])


def running_sum() -> onnx.ModelProto:
    """OUTPUT = OUTPUT_STATE = INPUT + INPUT_STATE: a sum over a sequence
    kept in the sequence's implicit state (each [batch, 1])."""
    return _model([helper.make_node("Add", ["INPUT", "INPUT_STATE"], ["OUTPUT"]),
                   helper.make_node("Identity", ["OUTPUT"], ["OUTPUT_STATE"])],
                  [_fp32("INPUT", ["batch", 1]), _fp32("INPUT_STATE", ["batch", 1])],
                  [_fp32("OUTPUT", ["batch", 1]), _fp32("OUTPUT_STATE", ["batch", 1])])


def with_default() -> onnx.ModelProto:
    """Y = X + OFFSET ([4]), OFFSET an initializer a request may override
    (an optional input)."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["X", "OFFSET"], ["Y"])], "test",
        [_fp32("X", [4]), _fp32("OFFSET", [4])], [_fp32("Y", [4])],
        initializer=[helper.make_tensor("OFFSET", TensorProto.FLOAT, [4], [10.0] * 4)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model


def ragged_scale() -> onnx.ModelProto:
    """OUT = INPUT * max(INDEX): a ragged INPUT (the batch's elements in one
    flat [n]) times the batch's element count, from the batch input INDEX
    (BATCH_ACCUMULATED_ELEMENT_COUNT, [requests])."""
    return _model([helper.make_node("ReduceMax", ["INDEX"], ["total"], keepdims=0),
                   helper.make_node("Mul", ["INPUT", "total"], ["OUT"])],
                  [_fp32("INPUT", ["n"]), _fp32("INDEX", ["requests"])], [_fp32("OUT", ["n"])])


def write(repo: str, name: str, model: onnx.ModelProto, config: Optional[str] = None,
          version: int = 1, filename: str = "model.onnx", external_data: bool = False) -> str:
    """<repo>/<name>/<version>/<filename> (a folder holding model.onnx and its
    weights when external_data), and config.pbtxt when given."""
    folder = os.path.join(repo, name, str(version))
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, filename)
    if external_data:
        os.makedirs(path, exist_ok=True)
        onnx.save(model, os.path.join(path, "model.onnx"), save_as_external_data=True,
                  all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
    else:
        onnx.save(model, path)
    if config is not None:
        with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
            f.write(config)
    return os.path.join(repo, name)
