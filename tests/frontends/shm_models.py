"""The models NVIDIA's shared-memory client programs use, made with this
package's own backends: ``simple`` (INT32 [16], batched up to 8: OUTPUT0 =
INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1, the add_sub backend) and
``simple_string`` (the same on BYTES holding decimal integers, a Python
model run in this process)."""

from __future__ import annotations

import os

SIMPLE = """name: "simple"
backend: "add_sub"
max_batch_size: 8
input [
  { name: "INPUT0", data_type: TYPE_INT32, dims: [ 16 ] },
  { name: "INPUT1", data_type: TYPE_INT32, dims: [ 16 ] }
]
output [
  { name: "OUTPUT0", data_type: TYPE_INT32, dims: [ 16 ] },
  { name: "OUTPUT1", data_type: TYPE_INT32, dims: [ 16 ] }
]
instance_group [ { kind: KIND_CPU, count: 1 } ]
"""

SIMPLE_STRING = SIMPLE.replace('"simple"', '"simple_string"').replace(
    'backend: "add_sub"', 'backend: "inprocess"').replace("TYPE_INT32", "TYPE_STRING")

SIMPLE_STRING_MODEL = '''import numpy as np
import triton_python_backend_utils as pb_utils


def _numbers(request, name):
    tensor = pb_utils.get_input_tensor_by_name(request, name).as_numpy()
    return np.array([int(x) for x in tensor.reshape(-1)], np.int64).reshape(tensor.shape)


def _text(values):
    return np.array([str(v).encode() for v in values.reshape(-1)],
                    dtype=object).reshape(values.shape)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a, b = _numbers(request, "INPUT0"), _numbers(request, "INPUT1")
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUTPUT0", _text(a + b)),
                pb_utils.Tensor("OUTPUT1", _text(a - b))]))
        return responses
'''


def write_repository(folder: str) -> str:
    """``simple`` and ``simple_string`` in ``folder``; returns it."""
    for name, config, model in (("simple", SIMPLE, None),
                                ("simple_string", SIMPLE_STRING, SIMPLE_STRING_MODEL)):
        os.makedirs(os.path.join(folder, name, "1"), exist_ok=True)
        with open(os.path.join(folder, name, "config.pbtxt"), "w", encoding="utf-8") as f:
            f.write(config)
        if model is not None:
            with open(os.path.join(folder, name, "1", "model.py"), "w", encoding="utf-8") as f:
                f.write(model)
    return folder


# (datatype, numpy dtype of its bytes) for identity_all: INPUT<i> -> OUTPUT<i>.
ALL_TYPES = [("BOOL", "bool"), ("UINT8", "uint8"), ("UINT16", "uint16"), ("UINT32", "uint32"),
             ("UINT64", "uint64"), ("INT8", "int8"), ("INT16", "int16"), ("INT32", "int32"),
             ("INT64", "int64"), ("FP16", "float16"), ("FP32", "float32"),
             ("FP64", "float64"), ("BF16", "uint16"), ("BYTES", "object")]


def _identity_all() -> str:
    kind = {"BYTES": "STRING"}
    lines = ['name: "identity_all"', 'backend: "identity"', "max_batch_size: 0"]
    for io in ("input", "output"):
        entries = [f'  {{ name: "{io.upper()}{i}", data_type: TYPE_{kind.get(t, t)}, '
                   f'dims: [ -1 ] }}' for i, (t, _) in enumerate(ALL_TYPES)]
        lines.append(f"{io} [\n" + ",\n".join(entries) + "\n]")
    lines.append("instance_group [ { kind: KIND_CPU, count: 1 } ]")
    return "\n".join(lines) + "\n"


def write_all_types(folder: str) -> str:
    os.makedirs(os.path.join(folder, "identity_all", "1"), exist_ok=True)
    with open(os.path.join(folder, "identity_all", "config.pbtxt"), "w", encoding="utf-8") as f:
        f.write(_identity_all())
    return folder
