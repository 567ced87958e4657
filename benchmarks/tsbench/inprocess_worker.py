"""Worker: an identity model written in Python, through our Python API.

Run by benchmarks/inprocess.py, one process per system:

    python benchmarks/tsbench/inprocess_worker.py --system NAME [loop options]

Systems (the same identity, one FP32 input copied to one output, dims [-1],
max_batch_size 0, one CPU instance):

* ``inprocess``: a tritonserver.PythonModel registered with
  Server.register_model, run by the inprocess backend in this process;
* ``inprocess-pb-utils``: a python-backend model.py (TritonPythonModel,
  pb_utils) run by the inprocess backend (config line ``backend: "inprocess"``);
* ``python-backend``: the same model.py on Triton's python backend (a stub
  process per instance, shared memory).

Prints one JSON line on stdout.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time

if not __package__:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from tsbench import api_calls, loops  # noqa: E402

SYSTEMS = ("inprocess", "inprocess-pb-utils", "python-backend")
MODEL = "identity_py"
CONFIG = """
name: "identity_py"
backend: "{backend}"
max_batch_size: 0
input [ {{ name: "INPUT0", data_type: TYPE_FP32, dims: [ -1 ] }} ]
output [ {{ name: "OUTPUT0", data_type: TYPE_FP32, dims: [ -1 ] }} ]
instance_group [ {{ kind: KIND_CPU, count: 1 }} ]
"""
MODEL_PY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
                    "OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())])
                for r in requests]
"""


def _identity_class():
    import tritonserver

    class Identity(tritonserver.PythonModel):
        def execute(self, requests):
            return [{"OUTPUT0": r.inputs["INPUT0"]} for r in requests]

    return Identity


def _repository(backend: str) -> str:
    repo = tempfile.mkdtemp(prefix="tsbench-pymodel-")
    os.makedirs(os.path.join(repo, MODEL, "1"))
    with open(os.path.join(repo, MODEL, "config.pbtxt"), "w") as f:
        f.write(CONFIG.format(backend=backend))
    with open(os.path.join(repo, MODEL, "1", "model.py"), "w") as f:
        f.write(MODEL_PY)
    return repo


class PythonModels(loops.System):
    def __init__(self, system: str):
        import tritonserver

        self.name = system
        t0 = time.perf_counter()
        if system == "inprocess":
            self.server = tritonserver.Server(model_repository=tempfile.mkdtemp())
            spec = (np.float32, [-1])
            self.server.register_model(MODEL, _identity_class(), inputs={"INPUT0": spec},
                                       outputs={"OUTPUT0": spec})
        else:
            backend = "inprocess" if system == "inprocess-pb-utils" else "python"
            self.server = tritonserver.Server(model_repository=_repository(backend))
        self.server.start(wait_until_ready=True, timeout=120)
        self.startup_s = time.perf_counter() - t0
        self.model = self.server.model(MODEL)

    def sync_call(self, x: np.ndarray) -> loops.Call:
        return api_calls.infer_call(self.model, x)

    def thread_call_factories(self, x: np.ndarray, n: int) -> list:
        return [lambda: self.sync_call(x)] * n

    @contextlib.asynccontextmanager
    async def async_session(self, x: np.ndarray):
        yield api_calls.async_infer_call(self.model, x)

    def verify(self, x: np.ndarray) -> None:
        y = api_calls.output(self.model, x)
        if y.dtype != np.float32 or not np.array_equal(y, x):
            raise SystemExit(f"{self.name}: the output differs from the input")

    def close(self) -> None:
        self.server.stop()


def main() -> None:
    parser = loops.argument_parser(__doc__)
    parser.add_argument("--system", required=True, choices=SYSTEMS)
    args = parser.parse_args()
    settings = loops.Settings(args)
    system = PythonModels(args.system)
    try:
        document = loops.run_rounds(system, settings, {"startup_s": system.startup_s,
                                                       "numpy": np.__version__})
    finally:
        system.close()
    loops.emit(document)


if __name__ == "__main__":
    main()
