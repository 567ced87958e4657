"""Loads, loads down and unloads two-instance models in a loop, in one
process: the pattern that made core 2.51 crash at model teardown
(docs/reliability.md). Run as a script (the crash is a signal, so the tests
run it in a child process):

    python teardown_cycles.py CYCLES [--python-backend]

Each cycle loads the models, sends 8 concurrent requests to each and checks
the answers, then unloads them and waits until they are gone. The default
models are a PythonModel (inprocess backend) and the package's C++ identity
backend, each with ``instance_group`` count 2; --python-backend adds Triton's
python backend (a model.py in a stub process, count 2), which the package
cannot give one core instance. Prints "cycles: N" at the end.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading

import numpy as np

import tritonserver

VEC = (np.float32, [-1])
IDENTITY = """backend: "identity"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU count: 2 } ]
"""
PYTHON_BACKEND = """backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU count: 2 } ]
"""
MODEL_PY = """import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())])
            for r in requests]
"""


class Echo(tritonserver.PythonModel):
    def execute(self, requests):
        return [{"OUTPUT0": r.inputs["INPUT0"]} for r in requests]


def write(repo: str, name: str, config: str, model_py: str = "") -> None:
    os.makedirs(os.path.join(repo, name, "1"))
    with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
        f.write(config)
    if model_py:
        with open(os.path.join(repo, name, "1", "model.py"), "w") as f:
            f.write(model_py)


def load_down(server: tritonserver.Server, name: str) -> None:
    """8 requests at once, from 8 threads; each answer checked."""
    failures: list[str] = []

    def one(i: int) -> None:
        x = np.arange(4, dtype=np.float32) + i
        try:
            for response in server.model(name).infer(inputs={"INPUT0": x}):
                if not np.array_equal(np.from_dlpack(response.outputs["OUTPUT0"]), x):
                    failures.append(f"{name}: wrong answer")
        except tritonserver.TritonError as e:
            failures.append(f"{name}: {e}")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise SystemExit("; ".join(failures))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("cycles", type=int)
    parser.add_argument("--python-backend", action="store_true")
    args = parser.parse_args()
    repo = tempfile.mkdtemp(prefix="teardown-cycles-")
    write(repo, "identity2", IDENTITY)
    names = ["identity2", "echo2"]
    if args.python_backend:
        write(repo, "pyback2", PYTHON_BACKEND, MODEL_PY)
        names.append("pyback2")
    server = tritonserver.Server(model_repository=repo,
                                 model_control_mode=tritonserver.ModelControlMode.EXPLICIT)
    server.register_model("echo2", Echo, inputs={"INPUT0": VEC}, outputs={"OUTPUT0": VEC},
                          max_batch_size=0, instance_count=2)
    server.start(wait_until_ready=True)
    for cycle in range(args.cycles):
        for name in names:
            if cycle > 0 or name != "echo2":  # registered models load at start
                server.load(name)
        for name in names:
            load_down(server, name)
        for name in names:
            server.unload(name, wait_until_unloaded=True, timeout=60)
    server.stop()
    print(f"cycles: {args.cycles}", flush=True)


if __name__ == "__main__":
    main()
