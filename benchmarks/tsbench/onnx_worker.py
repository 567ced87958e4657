"""Worker: the ONNX models of tsbench/onnx_models.py, one system per process.

Run by benchmarks/onnx_backend.py:

    python benchmarks/tsbench/onnx_worker.py --system NAME [--model-dir DIR] [loop options]

Systems (every model: one FP32 input INPUT0, batch 1, one FP32 output OUTPUT0):

* ``direct``: ``onnxruntime.InferenceSession(path, SessionOptions(),
  providers=["CPUExecutionProvider"]).run(None, feed)`` from Python, one
  request at a time: the ceiling (default session options, as our backend's);
* ``server``: our tritonserver.Server, ``platform: "onnxruntime_onnx"``,
  max_batch_size 64, one CPU instance; ``sync`` on the model without dynamic
  batching, ``async64`` on a copy with ``dynamic_batching { }``;
* ``python-backend``: a python-backend model.py opening the same
  InferenceSession in initialize and running it per request with pb_utils
  (what pip users write today), on Triton's python backend, served by our
  Server;
* ``server-x2``: as ``server`` with ``instance_group`` count 2, which the
  package runs as one core instance with two workers (docs/reliability.md);
* ``server-x2-core``: the same model as two core instances, as the package
  loaded it before (TRITONSERVER_ONE_CORE_INSTANCE=0): the throughput the
  two workers must keep.

Runs `sync` for every model, and `async64` for the MLP on ``server`` and
for both models on the two-instance systems. The
models come from --model-dir (<model>.onnx, as onnx_models.build writes
them), else they are built here. Prints one JSON line on stdout.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import time

if not __package__:  # run as a script: the benchmarks folder holds tsbench
    sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from tsbench import api_calls, loops, onnx_models  # noqa: E402

SYSTEMS = ("direct", "server", "python-backend", "server-x2", "server-x2-core")
# system -> the models it runs async64 on
ASYNC_MODELS = {"server": ("mlp",), "server-x2": ("mlp", "resnet"),
                "server-x2-core": ("mlp", "resnet")}
INSTANCES = {"server-x2": 2, "server-x2-core": 2}  # instance count (default 1)
DYNAMIC = "_dynamic"  # the suffix of the dynamic-batching copy's name
CONFIG = """
name: "{name}"
{engine}
max_batch_size: 64
{batching}
input [ {{ name: "INPUT0", data_type: TYPE_FP32, dims: [ {dims} ] }} ]
output [ {{ name: "OUTPUT0", data_type: TYPE_FP32, dims: [ {width} ] }} ]
instance_group [ {{ kind: KIND_CPU, count: {count} }} ]
"""
ONNX = 'platform: "onnxruntime_onnx"'
ENGINES = {"server": ONNX, "python-backend": 'backend: "python"', "server-x2": ONNX,
           "server-x2-core": ONNX}
MODEL_PY = """
import os

import onnxruntime
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        path = os.path.join(args["model_repository"], args["model_version"], "model.onnx")
        self.session = onnxruntime.InferenceSession(path, onnxruntime.SessionOptions(),
                                                    providers=["CPUExecutionProvider"])

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            y = self.session.run(["OUTPUT0"], {"INPUT0": x})[0]
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", y)]))
        return responses
"""


def open_session(path: str):
    import onnxruntime

    return onnxruntime.InferenceSession(path, onnxruntime.SessionOptions(),
                                        providers=["CPUExecutionProvider"])


def _write_model(repo: str, system: str, name: str, model: str, path: str,
                 batching: str = "") -> None:
    dims, width = onnx_models.SHAPES[model]
    os.makedirs(os.path.join(repo, name, "1"))
    with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
        f.write(CONFIG.format(name=name, engine=ENGINES[system], batching=batching,
                              dims=", ".join(map(str, dims)), width=width,
                              count=INSTANCES.get(system, 1)))
    shutil.copyfile(path, os.path.join(repo, name, "1", "model.onnx"))
    if system == "python-backend":
        with open(os.path.join(repo, name, "1", "model.py"), "w") as f:
            f.write(MODEL_PY)


def repository(repo: str, system: str, paths: dict) -> None:
    """Every model under its own name, and a dynamic-batching copy of those
    run with async64."""
    for model, path in paths.items():
        _write_model(repo, system, model, model, path)
        if model in ASYNC_MODELS.get(system, ()):
            _write_model(repo, system, model + DYNAMIC, model, path, "dynamic_batching { }")


class Direct(loops.System):
    def __init__(self, model: str, path: str):
        self.name = f"direct/{model}"
        self.session = open_session(path)

    def sync_call(self, x: np.ndarray) -> loops.Call:
        run, feed = self.session.run, {api_calls.INPUT: x}
        return lambda: run(None, feed)

    def verify(self, x: np.ndarray) -> None:
        check(self.name, self.session.run(None, {api_calls.INPUT: x})[0], x.shape[0])


class Served(loops.System):
    """A model of our Server; async64 goes to its dynamic-batching copy."""

    def __init__(self, server, system: str, model: str, path: str):
        self.name = f"{system}/{model}"
        self.model = server.model(model)
        self.batched = (server.model(model + DYNAMIC)
                        if model in ASYNC_MODELS.get(system, ()) else None)
        self.path = path

    def sync_call(self, x: np.ndarray) -> loops.Call:
        return api_calls.infer_call(self.model, x)

    @contextlib.asynccontextmanager
    async def async_session(self, x: np.ndarray):
        yield api_calls.async_infer_call(self.batched, x)

    def verify(self, x: np.ndarray) -> None:
        y = api_calls.output(self.model, x)
        check(self.name, y, x.shape[0])
        expected = open_session(self.path).run(None, {api_calls.INPUT: x})[0]
        if not np.allclose(y, expected, rtol=1e-4, atol=1e-5):
            raise SystemExit(f"{self.name}: the output differs from onnxruntime's")


def check(name: str, y: np.ndarray, batch: int) -> None:
    if y.dtype != np.float32 or y.shape[0] != batch or not np.isfinite(y).all():
        raise SystemExit(f"{name}: unexpected output {y.dtype} {y.shape}")


def measure(system: str, paths: dict, settings: loops.Settings, folder: str) -> dict:
    """{"models": {model: [{workload: figures} per round]}, "startup_s": s}."""
    server = None
    t0 = time.perf_counter()
    if system != "direct":
        import tritonserver

        repository(folder, system, paths)
        if system == "server-x2-core":
            os.environ["TRITONSERVER_ONE_CORE_INSTANCE"] = "0"
        server = tritonserver.Server(model_repository=folder)
        server.start(wait_until_ready=True, timeout=120)
    startup_s = time.perf_counter() - t0
    requested = list(settings.workloads)
    figures = {}
    try:
        for model, path in paths.items():
            settings.workloads = [w for w in requested if w == "sync" or (
                w == "async64" and model in ASYNC_MODELS.get(system, ()))]
            bench = (Direct(model, path) if server is None
                     else Served(server, system, model, path))
            figures[model] = loops.run_rounds(bench, settings,
                                              small=onnx_models.sample(model))["rounds"]
    finally:
        if server is not None:
            server.stop()
    return {"models": figures, "startup_s": startup_s}


def main() -> None:
    import onnxruntime

    parser = loops.argument_parser(__doc__)
    parser.add_argument("--system", required=True, choices=SYSTEMS)
    parser.add_argument("--model-dir", help="where <model>.onnx are (default: build them)")
    args = parser.parse_args()
    settings = loops.Settings(args)
    with tempfile.TemporaryDirectory(prefix="tsbench-onnx-") as folder:
        paths = ({m: os.path.join(args.model_dir, m + ".onnx") for m in onnx_models.MODELS}
                 if args.model_dir else onnx_models.build(folder))
        repo = os.path.join(folder, "repository")
        os.makedirs(repo)
        document = measure(args.system, paths, settings, repo)
    loops.emit({"system": args.system, **document, "onnxruntime": onnxruntime.__version__})


if __name__ == "__main__":
    main()
