"""The model repository that NVIDIA's client example programs expect, as
python-backend models (densenet_onnx included, as a tiny stand-in).

Models and configs follow the server repository's
docs/examples/model_repository and what qa/L0_http / qa/L0_grpc add to it:

  simple                       INT32 [16] x2 -> sum, difference (max_batch_size 8)
  simple_int8                  the same in INT8 (gRPC repository only)
  simple_string                BYTES [16] of integers as text -> sum, difference as text
  simple_identity              BYTES [-1] identity
  simple_sequence              OUTPUT = READY * (INPUT + START)       (direct sequence batcher)
  simple_dyna_sequence         OUTPUT = READY * (INPUT + START + END * CORRID), CORRID UINT64, oldest
  simple_string_dyna_sequence  as QA makes it (CORRID TYPE_STRING), with the semantics of
                               Triton's dyna_sequence test backend: a per-sequence
                               accumulator reset at START; END adds the correlation id.
  densenet_onnx                a stand-in, NOT DenseNet, also a python model (the pip
                               core's executable has no ONNX Runtime backend): input
                               data_0 FP32 [3,224,224] NCHW, output fc6_1 [1000] with the
                               real label file; its bias makes class 23 (VULTURE) the top
                               class for any image.

Usable alone:  python make_repo.py <folder> [--http] [--no-densenet]
(--http: the L0_http repository, which has no simple_int8: 7 models, as
simple_http_model_control.py counts; the gRPC one has 8.)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from typing import Optional

# A git clone (bare is fine) of github.com/triton-inference-server/server.
SERVER_MIRROR = os.environ.get("TRITON_SERVER_GIT", "")
LABELS_PATH = "docs/examples/model_repository/densenet_onnx/densenet_labels.txt"
VULTURE_INDEX = 23  # line 24 of densenet_labels.txt

ADD_SUB = '''import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1, in the inputs' type."""

    def initialize(self, args):
        self.config = json.loads(args["model_config"])

    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            with np.errstate(over="ignore"):
                total = (a + b).astype(a.dtype)
                diff = (a - b).astype(a.dtype)
            responses.append(pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUTPUT0", total), pb_utils.Tensor("OUTPUT1", diff)]))
        return responses
'''

STRING_ADD_SUB = '''import numpy as np
import triton_python_backend_utils as pb_utils


def _ints(tensor):
    flat = tensor.as_numpy()
    return np.array([int(v) for v in flat.reshape(-1)], dtype=np.int64).reshape(flat.shape)


def _text(values):
    return np.array([str(int(v)).encode("utf-8") for v in values.reshape(-1)],
                    dtype=np.object_).reshape(values.shape)


class TritonPythonModel:
    """BYTES integers as text: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1, as text."""

    def execute(self, requests):
        responses = []
        for request in requests:
            a = _ints(pb_utils.get_input_tensor_by_name(request, "INPUT0"))
            b = _ints(pb_utils.get_input_tensor_by_name(request, "INPUT1"))
            responses.append(pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUTPUT0", _text(a + b)), pb_utils.Tensor("OUTPUT1", _text(a - b))]))
        return responses
'''

IDENTITY = '''import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """OUTPUT0 = INPUT0."""

    def execute(self, requests):
        responses = []
        for request in requests:
            in_0 = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", in_0.as_numpy())]))
        return responses
'''

SEQUENCE = '''import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """OUTPUT = READY * (INPUT + START)."""

    def execute(self, requests):
        responses = []
        for request in requests:
            value = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy().astype(np.int64)
            start = pb_utils.get_input_tensor_by_name(request, "START").as_numpy().astype(np.int64)
            ready = pb_utils.get_input_tensor_by_name(request, "READY").as_numpy().astype(np.int64)
            out = (ready * (value + start)).astype(np.int32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", out)]))
        return responses
'''

DYNA_SEQUENCE = '''import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


def _get(request, name):
    return pb_utils.get_input_tensor_by_name(request, name).as_numpy()


class TritonPythonModel:
    """OUTPUT = READY * (INPUT + START + END * CORRID) (CORRID UINT64)."""

    def initialize(self, args):
        config = json.loads(args["model_config"])
        delay = config.get("parameters", {}).get("execute_delay_ms", {}).get("string_value", "0")
        self.delay_s = int(delay) / 1000.0

    def execute(self, requests):
        if self.delay_s:
            time.sleep(self.delay_s)
        responses = []
        for request in requests:
            value = _get(request, "INPUT").astype(np.int64)
            start = _get(request, "START").astype(np.int64)
            end = _get(request, "END").astype(np.int64)
            ready = _get(request, "READY").astype(np.int64)
            corrid = _get(request, "CORRID").astype(np.int64)
            out = (ready * (value + start + end * corrid)).astype(np.int32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", out)]))
        return responses
'''

STRING_DYNA_SEQUENCE = '''import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


def _get(request, name):
    return pb_utils.get_input_tensor_by_name(request, name).as_numpy()


def _scalar(array):
    return array.reshape(-1)[0]


class TritonPythonModel:
    """As Triton's dyna_sequence test backend: per sequence (string CORRID) an
    accumulator, reset at START; OUTPUT = accumulator after adding INPUT, plus
    the correlation id (as an integer) on the END request; 0 when not READY."""

    def initialize(self, args):
        config = json.loads(args["model_config"])
        delay = config.get("parameters", {}).get("execute_delay_ms", {}).get("string_value", "0")
        self.delay_s = int(delay) / 1000.0
        self.accumulators = {}

    def execute(self, requests):
        if self.delay_s:
            time.sleep(self.delay_s)
        responses = []
        for request in requests:
            value = int(_scalar(_get(request, "INPUT")))
            start = int(_scalar(_get(request, "START")))
            end = int(_scalar(_get(request, "END")))
            ready = int(_scalar(_get(request, "READY")))
            corrid = _scalar(_get(request, "CORRID"))
            key = corrid.decode("utf-8") if isinstance(corrid, bytes) else str(corrid)
            if not ready:
                result = 0
            else:
                if start:
                    self.accumulators[key] = 0
                self.accumulators[key] = self.accumulators.get(key, 0) + value
                result = self.accumulators[key]
                if end:
                    result += int(key)
                    self.accumulators.pop(key, None)
            out = np.full(_get(request, "INPUT").shape, result, dtype=np.int32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", out)]))
        return responses
'''


def _tensor(name: str, dtype: str, dims: str) -> str:
    return f'  {{\n    name: "{name}"\n    data_type: {dtype}\n    dims: [ {dims} ]\n  }}'


def add_sub_config(name: str, dtype: str) -> str:
    ins = ",\n".join(_tensor(n, dtype, "16") for n in ("INPUT0", "INPUT1"))
    outs = ",\n".join(_tensor(n, dtype, "16") for n in ("OUTPUT0", "OUTPUT1"))
    return (f'name: "{name}"\nbackend: "python"\nmax_batch_size: 8\n'
            f'input [\n{ins}\n]\noutput [\n{outs}\n]\n')


def _control(name: str, kind: str, body: str) -> str:
    return (f'    {{\n      name: "{name}"\n      control [\n        {{\n'
            f'          kind: {kind}\n          {body}\n        }}\n      ]\n    }}')


SEQUENCE_CONFIG = (
    'name: "simple_sequence"\nbackend: "python"\nmax_batch_size: 8\n'
    'sequence_batching {\n  control_input [\n'
    + _control("START", "CONTROL_SEQUENCE_START", "int32_false_true: [ 0, 1 ]") + ",\n"
    + _control("READY", "CONTROL_SEQUENCE_READY", "int32_false_true: [ 0, 1 ]") + "\n"
    '  ]\n}\n'
    'input [\n' + _tensor("INPUT", "TYPE_INT32", "1") + '\n]\n'
    'output [\n' + _tensor("OUTPUT", "TYPE_INT32", "1") + '\n]\n'
    'instance_group [\n  {\n    kind: KIND_CPU\n  }\n]\n')


def _dyna_config(name: str, corrid_type: str) -> str:
    controls = ",\n".join([
        _control("START", "CONTROL_SEQUENCE_START", "int32_false_true: [ 0, 1 ]"),
        _control("END", "CONTROL_SEQUENCE_END", "int32_false_true: [ 0, 1 ]"),
        _control("READY", "CONTROL_SEQUENCE_READY", "int32_false_true: [ 0, 1 ]"),
        _control("CORRID", "CONTROL_SEQUENCE_CORRID", f"data_type: {corrid_type}"),
    ])
    return (
        f'name: "{name}"\nbackend: "python"\nmax_batch_size: 8\n'
        'sequence_batching {\n  max_sequence_idle_microseconds: 10000000\n'
        '  oldest {\n    max_candidate_sequences: 1024\n    max_queue_delay_microseconds: 10000\n  }\n'
        f'  control_input [\n{controls}\n  ]\n}}\n'
        'input [\n' + _tensor("INPUT", "TYPE_INT32", "1") + '\n]\n'
        'output [\n' + _tensor("OUTPUT", "TYPE_INT32", "1") + '\n]\n'
        'parameters [\n  {\n    key: "execute_delay_ms"\n    value: { string_value: "3" }\n  }\n]\n'
        'instance_group [\n  {\n    count: 2\n    kind: KIND_CPU\n  }\n]\n')


STRING_CONFIG = add_sub_config("simple_string", "TYPE_STRING")
IDENTITY_CONFIG = (
    'name: "simple_identity"\nbackend: "python"\nmax_batch_size: 8\n'
    'input [\n' + _tensor("INPUT0", "TYPE_STRING", "-1") + '\n]\n'
    'output [\n' + _tensor("OUTPUT0", "TYPE_STRING", "-1") + '\n]\n')

DENSENET = '''import numpy as np
import triton_python_backend_utils as pb_utils

VULTURE_INDEX = %d


class TritonPythonModel:
    \"\"\"Not DenseNet: data_0 [1,3,224,224] -> mean per channel -> linear ->
    softmax -> fc6_1 [1,1000,1,1]; the bias makes VULTURE the top class.\"\"\"

    def initialize(self, args):
        rng = np.random.default_rng(0)
        self.weight = rng.normal(0.0, 0.01, (3, 1000))
        self.bias = np.zeros(1000)
        self.bias[VULTURE_INDEX] = 8.0

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "data_0").as_numpy().astype(np.float64)
            pooled = np.nan_to_num(x.reshape(x.shape[0], 3, -1).mean(axis=2))
            logits = pooled @ self.weight + self.bias
            logits -= logits.max(axis=1, keepdims=True)
            prob = np.exp(logits)
            prob /= prob.sum(axis=1, keepdims=True)
            out = prob.astype(np.float32).reshape(x.shape[0], 1000, 1, 1)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("fc6_1", out)]))
        return responses
''' % VULTURE_INDEX

DENSENET_CONFIG = '''name: "densenet_onnx"
backend: "python"
max_batch_size : 0
input [
  {
    name: "data_0"
    data_type: TYPE_FP32
    format: FORMAT_NCHW
    dims: [ 3, 224, 224 ]
    reshape { shape: [ 1, 3, 224, 224 ] }
  }
]
output [
  {
    name: "fc6_1"
    data_type: TYPE_FP32
    dims: [ 1000 ]
    reshape { shape: [ 1, 1000, 1, 1 ] }
    label_filename: "densenet_labels.txt"
  }
]
'''


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def python_model(root: str, name: str, config: str, code: str) -> None:
    _write(os.path.join(root, name, "config.pbtxt"), config)
    _write(os.path.join(root, name, "1", "model.py"), code)


def git_extract(mirror: str, ref: str, paths: "list[str]", dest: str) -> str:
    """The files under ``paths`` of a bare mirror at ``ref``, unchanged,
    under ``dest``; returns the commit."""
    os.makedirs(dest, exist_ok=True)
    archive = subprocess.run(["git", "-C", mirror, "archive", ref, *paths],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", dest], input=archive, check=True)
    return subprocess.run(["git", "-C", mirror, "rev-parse", ref], check=True,
                          capture_output=True, text=True).stdout.strip()


def densenet_labels(server_mirror: str = SERVER_MIRROR) -> str:
    """The real label file from the server repository mirror, else 1000
    made-up labels with VULTURE at the same index."""
    try:
        text = subprocess.run(["git", "-C", server_mirror, "show", f"HEAD:{LABELS_PATH}"],
                              check=True, capture_output=True, text=True).stdout
        if text.splitlines()[VULTURE_INDEX] == "VULTURE":
            return text
    except (OSError, subprocess.CalledProcessError, IndexError):
        pass
    labels = [f"CLASS_{i}" for i in range(1000)]
    labels[VULTURE_INDEX] = "VULTURE"
    return "\n".join(labels) + "\n"


def build_densenet_standin(root: str, server_mirror: str = SERVER_MIRROR) -> None:
    """densenet_onnx's interface (name, tensors, reshapes, label file) on a
    python-backend model: global average pool -> linear (1000 classes, bias
    favouring VULTURE) -> softmax. A python model so that both servers run it:
    the executable has no ONNX Runtime backend in the pip core."""
    folder = os.path.join(root, "densenet_onnx")
    python_model(root, "densenet_onnx", DENSENET_CONFIG, DENSENET)
    _write(os.path.join(folder, "densenet_labels.txt"), densenet_labels(server_mirror))


def build(root: str, http: bool = False, densenet: bool = True,
          server_mirror: str = SERVER_MIRROR, placeholder: bool = False) -> Optional[str]:
    """Write the repository into `root`; returns why densenet_onnx could not
    be built, or None. `placeholder`: when it could not, still write its
    config (no model file), so that a repository index counts as QA's: only
    for explicit model control, where it is never loaded."""
    os.makedirs(root, exist_ok=True)
    python_model(root, "simple", add_sub_config("simple", "TYPE_INT32"), ADD_SUB)
    if not http:
        python_model(root, "simple_int8", add_sub_config("simple_int8", "TYPE_INT8"), ADD_SUB)
    python_model(root, "simple_string", STRING_CONFIG, STRING_ADD_SUB)
    python_model(root, "simple_identity", IDENTITY_CONFIG, IDENTITY)
    python_model(root, "simple_sequence", SEQUENCE_CONFIG, SEQUENCE)
    python_model(root, "simple_dyna_sequence",
                  _dyna_config("simple_dyna_sequence", "TYPE_UINT64"), DYNA_SEQUENCE)
    python_model(root, "simple_string_dyna_sequence",
                  _dyna_config("simple_string_dyna_sequence", "TYPE_STRING"), STRING_DYNA_SEQUENCE)
    problem = None
    if densenet:
        try:
            build_densenet_standin(root, server_mirror)
        except Exception as e:  # noqa: BLE001 - reported, the image programs are skipped
            problem = f"could not build the densenet_onnx stand-in: {type(e).__name__}: {e}"
    else:
        problem = "densenet_onnx stand-in not built (--no-densenet)"
    if problem and placeholder:
        _write(os.path.join(root, "densenet_onnx", "config.pbtxt"), DENSENET_CONFIG)
    return problem


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder")
    p.add_argument("--http", action="store_true", help="the L0_http repository (no simple_int8)")
    p.add_argument("--no-densenet", action="store_true")
    p.add_argument("--placeholder", action="store_true",
                   help="without the stand-in, still write densenet_onnx/config.pbtxt")
    p.add_argument("--server-mirror", default=SERVER_MIRROR)
    args = p.parse_args()
    if not args.server_mirror:
        p.error("name the git clone of Triton's server repository: --server-mirror or "
                "TRITON_SERVER_GIT")
    problem = build(args.folder, args.http, not args.no_densenet, args.server_mirror,
                    args.placeholder)
    if problem:
        print(problem, file=sys.stderr)
    print(args.folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
