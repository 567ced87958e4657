"""The ONNX models of benchmarks/onnx_backend.py, built with onnx.helper at run time
(random weights from a fixed seed; no model file is kept in the repository).

* ``mlp``: [batch, 16] -> 64 -> 64 -> 16, MatMul + Add (+ Relu but last);
* ``resnet``: [batch, 3, 224, 224] -> a 7x7 stride-2 stem conv and a 3x3
  stride-2 max pool, residual blocks of two 3x3 convs (Add, Relu), a global
  average pool and a MatMul to 10 classes.

Every model has one FP32 input ``INPUT0`` and one FP32 output ``OUTPUT0``;
the first dimension is free.
"""

from __future__ import annotations

import os

import numpy as np

OPSET = 17
IR_VERSION = 8  # what every onnxruntime >= 1.17 reads
SEED = 20240607
MODELS = ("mlp", "resnet")
# model -> (input dims without the batch, output width)
SHAPES = {"mlp": ((16,), 16), "resnet": ((3, 224, 224), 10)}
MLP_WIDTHS = (16, 64, 64, 16)
RESNET_CHANNELS = 64
RESNET_BLOCKS = 3  # about 7 ms an inference on one core here


class _Graph:
    """Nodes and initializers of one graph, with seeded random weights."""

    def __init__(self) -> None:
        self.rng = np.random.default_rng(SEED)
        self.nodes: list = []
        self.weights: list = []

    def weight(self, shape: tuple, fan_in: int) -> str:
        from onnx import numpy_helper

        name = f"W{len(self.weights)}"
        values = self.rng.standard_normal(shape).astype(np.float32) * np.sqrt(2.0 / fan_in)
        self.weights.append(numpy_helper.from_array(values.astype(np.float32), name))
        return name

    def node(self, op: str, inputs: list, **attributes) -> str:
        from onnx import helper

        out = f"T{len(self.nodes)}"
        self.nodes.append(helper.make_node(op, inputs, [out], **attributes))
        return out

    def conv(self, x: str, c_in: int, c_out: int, kernel: int, stride: int = 1) -> str:
        w = self.weight((c_out, c_in, kernel, kernel), c_in * kernel * kernel)
        b = self.weight((c_out,), c_out)
        pad = kernel // 2
        return self.node("Conv", [x, w, b], kernel_shape=[kernel, kernel],
                         strides=[stride, stride], pads=[pad] * 4)

    def dense(self, x: str, n_in: int, n_out: int) -> str:
        return self.node("Add", [self.node("MatMul", [x, self.weight((n_in, n_out), n_in)]),
                                 self.weight((n_out,), n_out)])

    def model(self, last: str, name: str, input_dims: tuple, output_width: int):
        import onnx
        from onnx import TensorProto, helper

        self.nodes.append(helper.make_node("Identity", [last], ["OUTPUT0"]))
        x = helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["batch", *input_dims])
        y = helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["batch", output_width])
        graph = helper.make_graph(self.nodes, name, [x], [y], initializer=self.weights)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = IR_VERSION
        onnx.checker.check_model(model)
        return model


def mlp():
    g = _Graph()
    x = "INPUT0"
    layers = list(zip(MLP_WIDTHS, MLP_WIDTHS[1:]))
    for i, (n_in, n_out) in enumerate(layers):
        x = g.dense(x, n_in, n_out)
        if i < len(layers) - 1:
            x = g.node("Relu", [x])
    return g.model(x, "mlp", *SHAPES["mlp"])


def resnet():
    g = _Graph()
    c = RESNET_CHANNELS
    x = g.node("Relu", [g.conv("INPUT0", 3, c, 7, stride=2)])
    x = g.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    for _ in range(RESNET_BLOCKS):
        y = g.conv(g.node("Relu", [g.conv(x, c, c, 3)]), c, c, 3)
        x = g.node("Relu", [g.node("Add", [x, y])])
    x = g.node("Flatten", [g.node("GlobalAveragePool", [x])])
    return g.model(g.dense(x, c, SHAPES["resnet"][1]), "resnet", *SHAPES["resnet"])


def build(folder: str) -> dict:
    """Write <folder>/<model>.onnx for every model; returns {model: path}."""
    import onnx

    paths = {}
    for name, builder in (("mlp", mlp), ("resnet", resnet)):
        paths[name] = os.path.join(folder, name + ".onnx")
        onnx.save(builder(), paths[name])
    return paths


def sample(name: str) -> np.ndarray:
    """A batch-1 input of the model (seeded)."""
    dims = SHAPES[name][0]
    return np.random.default_rng(SEED + 1).standard_normal((1, *dims)).astype(np.float32)
