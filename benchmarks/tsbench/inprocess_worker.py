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
  process per instance, shared memory);
* ``bls-inprocess`` / ``bls-stub``: a model.py that calls the identity
  model.py through BLS (``pb_utils.InferenceRequest(...).exec()``) and
  returns its output, both ``backend: "python"``, with the server's
  ``python_backend`` in-process or on the stub;
* ``serve-http-inprocess`` / ``serve-http-stub``: the identity model.py
  behind ``python -m tritonserver serve --python-backend inprocess|stub``,
  called with tritonclient over HTTP (tsbench/client_worker.py's client);
* ``gil-inprocess`` / ``gil-stub``: a pure-Python CPU-bound model.py (a
  loop of GIL_LOOP additions per request) with two CPU instances:
  in-process the instances take turns on the GIL, on the stub each has
  its own process.

Prints one JSON line on stdout.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

if not __package__:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from tsbench import loops  # noqa: E402
from tsbench.local_or_served import LocalOrServed, served  # noqa: E402

SYSTEMS = ("inprocess", "inprocess-pb-utils", "python-backend", "bls-inprocess", "bls-stub",
           "serve-http-inprocess", "serve-http-stub", "gil-inprocess", "gil-stub")
GIL_LOOP = 20000
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


BLS_PY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            called = pb_utils.InferenceRequest(
                model_name="identity_fp32", requested_output_names=["OUTPUT0"],
                inputs=[pb_utils.get_input_tensor_by_name(r, "INPUT0")]).exec()
            if called.has_error():
                raise pb_utils.TritonModelException(called.error().message())
            out.append(pb_utils.InferenceResponse(
                [pb_utils.get_output_tensor_by_name(called, "OUTPUT0")]))
        return out
"""
GIL_PY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            total = 0
            for i in range(%d):
                total += i
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor(
                "OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())]))
        return out
""" % GIL_LOOP


def _write_model(repo: str, name: str, source: str, backend: str = "python",
                 instances: int = 1) -> None:
    os.makedirs(os.path.join(repo, name, "1"))
    config = CONFIG.format(backend=backend).replace(f'name: "{MODEL}"', f'name: "{name}"')
    with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
        f.write(config.replace("count: 1", f"count: {instances}"))
    with open(os.path.join(repo, name, "1", "model.py"), "w") as f:
        f.write(source)


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


class PythonModels(LocalOrServed):
    def __init__(self, system: str):
        import tritonserver

        self.name = system
        t0 = time.perf_counter()
        self.serving = None
        model = MODEL
        mode = "inprocess" if system.endswith("-inprocess") else "stub"
        if system.startswith("bls-"):
            repo, model = tempfile.mkdtemp(prefix="tsbench-bls-"), "bls"
            _write_model(repo, "identity_fp32", MODEL_PY)
            _write_model(repo, "bls", BLS_PY)
            self.server = tritonserver.Server(model_repository=repo, python_backend=mode)
        elif system.startswith("gil-"):
            repo, model = tempfile.mkdtemp(prefix="tsbench-gil-"), "gil"
            _write_model(repo, "gil", GIL_PY, instances=2)
            self.server = tritonserver.Server(model_repository=repo, python_backend=mode)
        elif system.startswith("serve-http-"):
            self.server = None
            self.serving = _served_client(mode)
        elif system == "inprocess":
            self.server = tritonserver.Server(model_repository=tempfile.mkdtemp())
            spec = (np.float32, [-1])
            self.server.register_model(MODEL, _identity_class(), inputs={"INPUT0": spec},
                                       outputs={"OUTPUT0": spec})
        else:
            backend = "inprocess" if system == "inprocess-pb-utils" else "python"
            self.server = tritonserver.Server(model_repository=_repository(backend))
        if self.server is not None:
            self.server.start(wait_until_ready=True, timeout=120)
            self.model = self.server.model(model)
        self.startup_s = time.perf_counter() - t0


def _served_client(mode: str) -> tuple:
    """(the serve process, a tritonclient HTTP client of it) for the
    identity model.py behind ``serve --python-backend <mode>``."""
    repo = tempfile.mkdtemp(prefix="tsbench-serve-py-")
    _write_model(repo, "identity_fp32", MODEL_PY)
    log = os.path.join(tempfile.gettempdir(), f"tsbench-serve-python-{mode}.log")
    return served(repo, log, ["--python-backend", mode])


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
