"""OpenVINO models for the tests: ONNX models built with the onnx package
(models_onnx), converted by OpenVINO's own converter and saved as
model.xml + model.bin (no files in the repository)."""

from __future__ import annotations

import os
import tempfile
from typing import Optional

import onnx
import openvino as ov
from onnx import TensorProto, helper

from frameworks import models_onnx as onnx_models

add_sub = onnx_models.add_sub
scaled = onnx_models.scaled


def slow() -> onnx.ModelProto:
    """A long run OpenVINO cannot shorten: products with a Tanh between
    them (it folds a chain of constant products into one), large enough
    for CPUs where its default bf16 precision runs a 512x512 product in
    well under a millisecond."""
    return onnx_models.slow(size=1024, rounds=24, between="Tanh")


# Triton config type -> ONNX element type, for the types the backend serves.
SERVED = {t: e for t, e in onnx_models.TYPES.items() if t not in ("TYPE_FP64", "TYPE_STRING")}


def identities(types: dict, batch: bool = True) -> onnx.ModelProto:
    """OUT_<T> = IN_<T> for each type (shape [batch, n] or [n])."""
    shape = ["batch", "n"] if batch else ["n"]
    nodes, inputs, outputs = [], [], []
    for config_type, element in types.items():
        suffix = config_type[len("TYPE_"):]
        nodes.append(helper.make_node("Identity", [f"IN_{suffix}"], [f"OUT_{suffix}"]))
        inputs.append(helper.make_tensor_value_info(f"IN_{suffix}", element, shape))
        outputs.append(helper.make_tensor_value_info(f"OUT_{suffix}", element, shape))
    return onnx_models._model(nodes, inputs, outputs)


def fixed_add(width: int = 4) -> onnx.ModelProto:
    """Y = X + 1, X and Y of static shape [width] (FP32)."""
    one = helper.make_tensor("ONE", TensorProto.FLOAT, [1], [1.0])
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [width])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [width])
    return onnx_models._model([helper.make_node("Add", ["X", "ONE"], ["Y"])], [x], [y], [one])


def convert(model: onnx.ModelProto, batch_layout: bool = False) -> ov.Model:
    """The ONNX model converted by OpenVINO (with layout "N..." on every
    input and output when `batch_layout`: what makes it batch on completion)."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.onnx")
        onnx.save(model, path)
        converted = ov.convert_model(path)
    if batch_layout:
        for port in list(converted.inputs) + list(converted.outputs):
            port.get_node().set_layout(ov.Layout("N..."))
    return converted


def write(repo: str, name: str, model: onnx.ModelProto, config: Optional[str] = None,
          version: int = 1, batch_layout: bool = False, onnx_file: Optional[str] = None,
          filename: str = "model.xml") -> str:
    """<repo>/<name>/<version>/<filename> + its .bin (or the ONNX file
    itself as `onnx_file`), and config.pbtxt when given."""
    folder = os.path.join(repo, name, str(version))
    os.makedirs(folder, exist_ok=True)
    if onnx_file:
        onnx.save(model, os.path.join(folder, onnx_file))
    else:
        ov.save_model(convert(model, batch_layout), os.path.join(folder, filename))
    if config is not None:
        with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
            f.write(config)
    return os.path.join(repo, name)
