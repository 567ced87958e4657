"""ONNX's own backend test models, each loaded, inferred once and unloaded,
one after another on one server in one process.

Why this exists: core 2.51 can crash (SIGSEGV in the model-deleter thread,
``TritonBackendThread::StopBackendThread``) while it tears down a model with
two CPU instances, and config-less ONNX models get two by default
(docs/reliability.md). A user hit it exactly
this way: the test models of the ``onnx`` wheel, each alone in a repository
without config.pbtxt, served with ``strict_model_config=False``. The package
now loads such models as one core instance with two workers in the backend;
this script replays that user's loop so tests/reliability/test_onnx_teardown.py
can run it in fresh processes and count crashes.

Run: ``python tests/reliability/onnx_zoo.py``. It prints one line
``onnx_zoo: <correct>/<tried> correct`` (and one line per wrong case) and
exits 0, or 1 when fewer than 90% of the cases are correct. Importable:
``cases()`` is the selection (the cases ONNX Runtime itself answers
correctly), deterministic and cached per process.
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
import tempfile
from functools import lru_cache
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import numpy as np

SUITES = ("pytorch-converted", "pytorch-operator", "simple")
MIN_CORRECT = 0.9
RTOL = 1e-3
ATOL = 1e-4
# Tensor types the onnxruntime backend serves (tritonserver/_onnx/_config.py):
# cases with sequences, maps, optionals or bfloat16 are left out.
SERVED_TYPES = frozenset(
    f"tensor({t})" for t in ("bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16",
                             "int32", "int64", "float16", "float", "double", "string"))
# Unbatched: the cases' data sets carry whole tensors, not batches of at
# most 4 (docs/onnx.md: the backend setting "default-max-batch-size").
BACKEND_CONFIGURATION = {"onnxruntime": {"default-max-batch-size": "0"}}

Named = List[Tuple[str, np.ndarray]]


class Case(NamedTuple):
    """One backend test case: its model and its first data set."""

    name: str  # the model's name in the repository (the case's folder name)
    model_path: str
    inputs: Named  # in the graph's input order
    outputs: Named  # in the graph's output order


# ---- Selection --------------------------------------------------------------------


def data_root() -> str:
    import onnx

    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")


def case_dirs() -> List[str]:
    """Every case folder of the three suites, sorted (suite, then name)."""
    dirs = []
    for suite in SUITES:
        root = os.path.join(data_root(), suite)
        if os.path.isdir(root):
            dirs += [os.path.join(root, n) for n in sorted(os.listdir(root))]
    return [d for d in dirs if os.path.isfile(os.path.join(d, "model.onnx"))]


def read_tensors(data_set: str, prefix: str) -> List[np.ndarray]:
    """input_0.pb, input_1.pb... (or output_N.pb) of a data set, in order."""
    import onnx
    from onnx import numpy_helper

    arrays = []
    for index in range(len(glob.glob(os.path.join(data_set, f"{prefix}_*.pb")))):
        tensor = onnx.TensorProto()
        with open(os.path.join(data_set, f"{prefix}_{index}.pb"), "rb") as f:
            tensor.ParseFromString(f.read())
        arrays.append(numpy_helper.to_array(tensor))
    return arrays


def graph_io(model_path: str) -> Optional[Tuple[List[str], List[str]]]:
    """The names of the graph's inputs (initializers excluded) and outputs,
    or None when one of them is not a plain tensor."""
    import onnx

    graph = onnx.load(model_path, load_external_data=False).graph
    initializers = {i.name for i in graph.initializer}
    inputs = [i for i in graph.input if i.name not in initializers]
    if any(v.type.WhichOneof("value") != "tensor_type" for v in list(inputs) + list(graph.output)):
        return None
    return [i.name for i in inputs], [o.name for o in graph.output]


def read_case(case_dir: str) -> Optional[Case]:
    """The case with its first data set, or None when it is out of scope."""
    model_path = os.path.join(case_dir, "model.onnx")
    data_set = os.path.join(case_dir, "test_data_set_0")
    names = graph_io(model_path) if os.path.isdir(data_set) else None
    if names is None:
        return None
    input_names, output_names = names
    inputs = read_tensors(data_set, "input")
    outputs = read_tensors(data_set, "output")
    if len(inputs) != len(input_names) or len(outputs) != len(output_names):
        return None
    return Case(os.path.basename(case_dir), model_path,
                list(zip(input_names, inputs)), list(zip(output_names, outputs)))


def same(actual: Any, expected: np.ndarray) -> bool:
    """Same shape and dtype, and equal (numbers: within RTOL/ATOL, NaN = NaN)."""
    actual = np.asarray(actual)
    if expected.dtype == object or actual.dtype == object:
        return actual.shape == expected.shape and \
            [_text(a) for a in actual.reshape(-1)] == [_text(e) for e in expected.reshape(-1)]
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return False
    if expected.dtype == np.bool_:
        return bool(np.array_equal(actual, expected))
    return bool(np.allclose(actual, expected, rtol=RTOL, atol=ATOL, equal_nan=True))


def _text(item: Any) -> str:
    return item.decode("utf-8") if isinstance(item, bytes) else str(item)


def onnxruntime_agrees(case: Case) -> bool:
    """Whether ONNX Runtime, run directly on the CPU, answers the case's
    data set correctly with inputs and outputs the backend serves."""
    import onnxruntime

    try:
        session = onnxruntime.InferenceSession(case.model_path,
                                               providers=["CPUExecutionProvider"])
        args = list(session.get_inputs()) + list(session.get_outputs())
        if any(a.type not in SERVED_TYPES for a in args):
            return False
        if [i.name for i in session.get_inputs()] != [n for n, _ in case.inputs]:
            return False
        got = session.run([n for n, _ in case.outputs], dict(case.inputs))
    except Exception:  # a model ONNX Runtime cannot load or run
        return False
    return all(same(g, e) for g, (_, e) in zip(got, case.outputs))


@lru_cache(maxsize=None)
def cases() -> Tuple[Case, ...]:
    """The cases ONNX Runtime answers correctly, sorted as case_dirs();
    a name seen in an earlier suite is not taken twice."""
    import onnxruntime

    kept: Dict[str, Case] = {}
    onnxruntime.set_default_logger_severity(4)  # fatal only: old opsets warn by the dozen
    try:
        for case_dir in case_dirs():
            case = read_case(case_dir)
            if case is not None and case.name not in kept and onnxruntime_agrees(case):
                kept[case.name] = case
    finally:
        onnxruntime.set_default_logger_severity(2)  # ONNX Runtime's default: warnings
    return tuple(kept.values())


# ---- The loop on the server ---------------------------------------------------------


def make_repository(selected: Tuple[Case, ...]) -> str:
    """A temporary repository: <case>/1/model.onnx for each case, no config.pbtxt."""
    repository = tempfile.mkdtemp(prefix="onnx-zoo-")
    for case in selected:
        version = os.path.join(repository, case.name, "1")
        os.makedirs(version)
        shutil.copyfile(case.model_path, os.path.join(version, "model.onnx"))
    return repository


def read_output(tensor: Any) -> np.ndarray:
    import tritonserver

    if tensor.data_type == tritonserver.DataType.BYTES:
        return tensor.to_bytes_array()
    return np.from_dlpack(tensor)


def serve_once(server: Any, case: Case) -> Optional[str]:
    """Load, infer once, compare, unload. None when correct, else why not."""
    server.load(case.name)
    try:
        response = next(iter(server.model(case.name).infer(inputs=dict(case.inputs))))
        for name, expected in case.outputs:
            tensor = response.outputs.get(name)
            if tensor is None:
                return f"output '{name}' missing"
            actual = read_output(tensor)
            if not same(actual, expected):
                return (f"output '{name}': got {actual.dtype}{list(actual.shape)}, "
                        f"expected {expected.dtype}{list(expected.shape)} (or values differ)")
        return None
    finally:
        server.unload(case.name, wait_until_unloaded=True)


def run_cases(repository: str, selected: Tuple[Case, ...]) -> int:
    """Every case in turn on one server; the count of correct ones."""
    import tritonserver

    server = tritonserver.Server(
        model_repository=repository, model_control_mode=tritonserver.ModelControlMode.EXPLICIT,
        strict_model_config=False, backend_configuration=BACKEND_CONFIGURATION)
    server.start(wait_until_ready=True)
    correct = 0
    try:
        for case in selected:
            try:
                problem = serve_once(server, case)
            except Exception as e:  # a refused load or request: a wrong case, not a crash
                problem = f"{type(e).__name__}: {e}"
            if problem is None:
                correct += 1
            else:
                print(f"onnx_zoo: {case.name}: {problem}", flush=True)
    finally:
        server.stop()
    return correct


def main() -> int:
    selected = cases()
    if not selected:
        print("onnx_zoo: no case selected (onnx backend test data missing?)", flush=True)
        return 1
    repository = make_repository(selected)
    try:
        correct = run_cases(repository, selected)
    finally:
        shutil.rmtree(repository, ignore_errors=True)
    print(f"onnx_zoo: {correct}/{len(selected)} correct", flush=True)
    return 0 if correct >= MIN_CORRECT * len(selected) else 1


if __name__ == "__main__":
    sys.exit(main())
