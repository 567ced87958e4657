"""Worker: the models of tsbench/framework_models.py, one system per process.

Run by benchmarks/frameworks.py:

    python benchmarks/tsbench/framework_worker.py --system NAME [--model-dir DIR] [loop options]

Systems, for each framework F of onnxruntime, pytorch, openvino (batch 1,
one FP32 input, one FP32 output, `sync` only):

* ``F-direct``: the framework called from Python with our backend's default
  settings: ``onnxruntime.InferenceSession(path, SessionOptions(),
  providers=["CPUExecutionProvider"]).run(None, feed)``;
  ``torch.jit.load(path)`` then ``with torch.inference_mode():
  module(torch.from_numpy(x)).numpy()``; ``ov.Core().compile_model(model,
  "CPU", {"ALLOW_AUTO_BATCHING": False})`` and one infer request:
  ``set_tensor(name, Tensor(x))``, ``infer()``, ``get_tensor(output).data``
  (our backend's calls; ``infer(feed)`` with a dict takes twice as long on
  the MLP; our backend sets no other property unless the configuration
  asks);
* ``F-python``: the F-direct call inside a PythonModel (``backend:
  "inprocess"``) of our Server: what running F costs on the server's
  instance thread with no framework layer, the floor of any Python backend
  of F on this core;
* ``F-server``: our tritonserver.Server, the model served by F's backend
  (``platform: "onnxruntime_onnx"``, ``backend: "pytorch"``, ``backend:
  "openvino"``), ``max_batch_size: 0`` with the batch in the dims for all
  three (the openvino backend fixes a batching model's batch to
  max_batch_size), one CPU instance.

Every served output is checked against the direct framework's first. The
models come from --model-dir (as framework_models.build writes them), else
they are built here. Prints one JSON line on stdout.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import warnings

if not __package__:  # run as a script: the benchmarks folder holds tsbench
    sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from tsbench import api_calls, loops, onnx_models  # noqa: E402
from tsbench.framework_models import FRAMEWORKS, NAMES, path  # noqa: E402
from tsbench.onnx_worker import check, open_session  # noqa: E402

SYSTEMS = tuple(f"{f}-{kind}" for f in FRAMEWORKS for kind in ("direct", "python", "server"))
ENGINES = {"onnxruntime": 'platform: "onnxruntime_onnx"', "pytorch": 'backend: "pytorch"',
           "openvino": 'backend: "openvino"'}
FILES = {"onnxruntime": ("model.onnx",), "pytorch": ("model.pt",),
         "openvino": ("model.xml", "model.bin")}
CONFIG = """
name: "{name}"
{engine}
max_batch_size: 0
input [ {{ name: "{input}", data_type: TYPE_FP32, dims: [ -1, {dims} ] }} ]
output [ {{ name: "{output}", data_type: TYPE_FP32, dims: [ -1, {width} ] }} ]
instance_group [ {{ kind: KIND_CPU, count: 1 }} ]
"""
# F-python: the direct call of F-direct inside a PythonModel of our Server.
PYTHON_MODEL = """
import sys

sys.path.append({benchmarks!r})
from tsbench.framework_worker import Direct
from tritonserver import PythonModel


class Runner(PythonModel):
    def initialize(self):
        self.run = Direct({framework!r}, {model!r}, {folder!r}).run

    def execute(self, requests):
        run = self.run
        return [{{{output!r}: run(r.inputs[{input!r}])}} for r in requests]
"""


class Direct(loops.System):
    """The framework called directly; run(x) is one inference's output."""

    def __init__(self, framework: str, model: str, folder: str):
        self.name = f"{framework}-direct/{model}"
        source = path(folder, model, framework)
        if framework == "onnxruntime":
            session, name = open_session(source), NAMES[framework][0]
            self.run = lambda x: session.run(None, {name: x})[0]
        elif framework == "pytorch":
            import torch

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                module = torch.jit.load(source, map_location="cpu")
            inference_mode, from_numpy = torch.inference_mode, torch.from_numpy

            def run(x: np.ndarray) -> np.ndarray:
                with inference_mode():
                    return module(from_numpy(x)).numpy()

            self.run = run
        else:
            import openvino

            core = openvino.Core()
            compiled = core.compile_model(core.read_model(source), "CPU",
                                          {"ALLOW_AUTO_BATCHING": False})
            request = compiled.create_infer_request()
            (name, output), tensor = NAMES[framework], openvino.Tensor

            def infer(x: np.ndarray) -> np.ndarray:
                request.set_tensor(name, tensor(x))
                request.infer()
                return request.get_tensor(output).data

            self.run = infer

    def sync_call(self, x: np.ndarray) -> loops.Call:
        run = self.run
        return lambda: run(x)

    def verify(self, x: np.ndarray) -> None:
        check(self.name, self.run(x), x.shape[0])


class Served(loops.System):
    def __init__(self, server, framework: str, kind: str, model: str, folder: str):
        self.name = f"{framework}-{kind}/{model}"
        self.model = server.model(model)
        self.names = NAMES[framework]
        self.direct = lambda: Direct(framework, model, folder)

    def sync_call(self, x: np.ndarray) -> loops.Call:
        return api_calls.infer_call(self.model, x, *self.names)

    def verify(self, x: np.ndarray) -> None:
        y = api_calls.output(self.model, x, *self.names)
        check(self.name, y, x.shape[0])
        expected = self.direct().run(x)
        if not np.allclose(y, expected, rtol=1e-4, atol=1e-5):
            raise SystemExit(f"{self.name}: the output differs from the direct framework's "
                             f"(max difference {np.abs(y - expected).max():g})")


def repository(repo: str, framework: str, folder: str, python: bool = False) -> None:
    """Every model of `folder` served by `framework`'s backend, or (`python`)
    by a PythonModel calling the framework as F-direct does."""
    for model in onnx_models.MODELS:
        os.makedirs(os.path.join(repo, model, "1"))
        dims, width = onnx_models.SHAPES[model]
        (input_name, output_name) = NAMES[framework]
        with open(os.path.join(repo, model, "config.pbtxt"), "w") as f:
            f.write(CONFIG.format(name=model, engine='backend: "inprocess"' if python
                                  else ENGINES[framework], input=input_name,
                                  output=output_name, dims=", ".join(map(str, dims)),
                                  width=width))
        if python:
            with open(os.path.join(repo, model, "1", "model.py"), "w") as f:
                f.write(PYTHON_MODEL.format(
                    benchmarks=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    framework=framework, model=model, folder=folder, input=input_name,
                    output=output_name))
            continue
        for name in FILES[framework]:  # <model>.xml -> model.xml, <model>.bin -> model.bin
            shutil.copyfile(os.path.join(folder, model + os.path.splitext(name)[1]),
                            os.path.join(repo, model, "1", name))


def measure(system: str, folder: str, settings: loops.Settings, repo: str) -> dict:
    """{"models": {model: [{workload: figures} per round]}, "startup_s": s}."""
    framework, kind = system.rsplit("-", 1)
    server = None
    t0 = time.perf_counter()
    if kind in ("server", "python"):
        import tritonserver

        repository(repo, framework, folder, python=kind == "python")
        server = tritonserver.Server(model_repository=repo)
        server.start(wait_until_ready=True, timeout=120)
    startup_s = time.perf_counter() - t0
    figures = {}
    try:
        for model in onnx_models.MODELS:
            bench = (Direct(framework, model, folder) if server is None
                     else Served(server, framework, kind, model, folder))
            figures[model] = loops.run_rounds(bench, settings,
                                              small=onnx_models.sample(model))["rounds"]
    finally:
        if server is not None:
            server.stop()
    return {"models": figures, "startup_s": startup_s}


def main() -> None:
    parser = loops.argument_parser(__doc__)
    parser.add_argument("--system", required=True, choices=SYSTEMS)
    parser.add_argument("--model-dir", help="where the model files are (default: build them)")
    args = parser.parse_args()
    settings = loops.Settings(args)
    with tempfile.TemporaryDirectory(prefix="tsbench-frameworks-") as folder:
        if args.model_dir:
            models = args.model_dir
        else:
            from tsbench import framework_models

            models = os.path.join(folder, "models")
            os.makedirs(models)
            framework_models.build(models)
        repo = os.path.join(folder, "repository")
        os.makedirs(repo)
        document = measure(args.system, models, settings, repo)
    loops.emit({"system": args.system, **document})


if __name__ == "__main__":
    main()
