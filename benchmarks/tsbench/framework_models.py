"""The models of benchmarks/frameworks.py, built at run time in three
formats from the ONNX models of tsbench/onnx_models.py (same architecture,
same weights):

* ``<model>.onnx``: onnx_models.build;
* ``<model>.pt``: a torch ``nn.Module`` of the same layers, its weights
  copied from the ONNX initializers, traced with ``torch.jit.trace``;
  input ``INPUT__0``, output ``OUTPUT__0`` (the pytorch backend's index names);
* ``<model>.xml`` + ``.bin``: ``openvino.convert_model`` of the ONNX file,
  saved with ``openvino.save_model``; ``INPUT0`` and ``OUTPUT0`` as in ONNX.
"""

from __future__ import annotations

import os
import warnings

from tsbench import onnx_models

FRAMEWORKS = ("onnxruntime", "pytorch", "openvino")
SUFFIX = {"onnxruntime": ".onnx", "pytorch": ".pt", "openvino": ".xml"}
# framework -> (input name, output name) of its model files
NAMES = {"onnxruntime": ("INPUT0", "OUTPUT0"), "pytorch": ("INPUT__0", "OUTPUT__0"),
         "openvino": ("INPUT0", "OUTPUT0")}


def path(folder: str, model: str, framework: str) -> str:
    return os.path.join(folder, model + SUFFIX[framework])


def _torch_module(model: str):
    """The nn.Module of `model`, its parameters registered in the order of the
    ONNX initializers (tsbench/onnx_models.py: W0, W1, ...)."""
    import torch
    from torch import nn

    class Mlp(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            w = onnx_models.MLP_WIDTHS
            self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(w, w[1:]))

        def forward(self, INPUT__0):  # the backend binds INPUT__0 by its index
            x = INPUT__0
            for i, layer in enumerate(self.layers):
                x = layer(x)
                if i < len(self.layers) - 1:
                    x = torch.relu(x)
            return x

    class ResNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            c = onnx_models.RESNET_CHANNELS
            self.stem = nn.Conv2d(3, c, 7, stride=2, padding=3)
            self.pool = nn.MaxPool2d(3, stride=2, padding=1)
            self.blocks = nn.ModuleList(
                nn.ModuleList((nn.Conv2d(c, c, 3, padding=1), nn.Conv2d(c, c, 3, padding=1)))
                for _ in range(onnx_models.RESNET_BLOCKS))
            self.head = nn.Linear(c, onnx_models.SHAPES["resnet"][1])

        def forward(self, INPUT__0):
            x = self.pool(torch.relu(self.stem(INPUT__0)))
            for first, second in self.blocks:
                x = torch.relu(x + second(torch.relu(first(x))))
            return self.head(torch.flatten(torch.mean(x, dim=(2, 3), keepdim=True), 1))

    return {"mlp": Mlp, "resnet": ResNet}[model]()


def _copy_weights(module, onnx_path: str) -> None:
    import onnx
    import torch
    from onnx import numpy_helper

    inits = {i.name: numpy_helper.to_array(i) for i in onnx.load(onnx_path).graph.initializer}
    weights = [inits[f"W{i}"] for i in range(len(inits))]
    params = list(module.parameters())
    assert len(params) == len(weights), (len(params), len(weights))
    with torch.no_grad():
        for p, w in zip(params, weights):
            if p.dim() == 2:  # Linear keeps (out, in); ONNX's MatMul takes (in, out)
                w = w.T
            assert tuple(p.shape) == w.shape, (tuple(p.shape), w.shape)
            p.copy_(torch.from_numpy(w.copy()))


def build(folder: str) -> dict:
    """Write every model in every format into `folder`; returns
    {model: {framework: path}}."""
    import openvino
    import torch

    onnx_paths = onnx_models.build(folder)
    paths = {}
    for model, onnx_path in onnx_paths.items():
        module = _torch_module(model).eval()
        _copy_weights(module, onnx_path)
        x = torch.from_numpy(onnx_models.sample(model))
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore", DeprecationWarning)
            traced = torch.jit.trace(module, x)
            traced.save(path(folder, model, "pytorch"))
        openvino.save_model(openvino.convert_model(onnx_path), path(folder, model, "openvino"))
        paths[model] = {f: path(folder, model, f) for f in FRAMEWORKS}
    return paths
