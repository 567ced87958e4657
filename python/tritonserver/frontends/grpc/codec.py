"""The gRPC inference codec: a ModelInferRequest decoded into a WireRequest (raw
contents in place, typed contents converted, the parameters Triton reads
itself checked for their protobuf types), and a response encoded as a
ModelInferResponse with raw output contents.
"""

from __future__ import annotations

import ctypes
from typing import Any, Optional

import numpy as np

from tritonserver import (AlreadyExistsError, CancelledError, InternalError, InvalidArgumentError,
                          NotFoundError, TritonError, UnavailableError, UnsupportedError)
from tritonserver.frontends.dataplane import state as c
from tritonserver.frontends.dataplane import shared_memory as _shm
from tritonserver.frontends.dataplane.classification import Classification, grpc_count
from tritonserver.frontends.dataplane.state import parse_version
from tritonserver.frontends.dataplane.inference import WireRequest, set_request_parameter, unsigned
from tritonserver.frontends.grpc.protos import Messages
from tritonserver.frontends.dataplane.tensors import (
    DATATYPE_NAME,
    HOST_MEMORY,
    NUMPY_DTYPE,
    check_datatype,
    element_count,
    shape_list,
    tensor_from_buffer,
)

# InferTensorContents field per datatype (FP16 and BF16 travel raw only).
CONTENTS_FIELD = {
    "BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents",
    "INT32": "int_contents", "INT64": "int64_contents", "UINT8": "uint_contents",
    "UINT16": "uint_contents", "UINT32": "uint_contents", "UINT64": "uint64_contents",
    "FP32": "fp32_contents", "FP64": "fp64_contents", "BYTES": "bytes_contents",
}


# Triton's gRPC status code (its name) per error class.
_GRPC_CODE: list[tuple[type, str]] = [
    (NotFoundError, "NOT_FOUND"), (InvalidArgumentError, "INVALID_ARGUMENT"),
    (UnavailableError, "UNAVAILABLE"), (UnsupportedError, "UNIMPLEMENTED"),
    (InternalError, "INTERNAL"), (AlreadyExistsError, "ALREADY_EXISTS"),
    (CancelledError, "CANCELLED"),
]


def grpc_code_name(error: BaseException) -> str:
    """The grpc.StatusCode name for an error (Triton's mapping)."""
    if isinstance(error, c.Forbidden):
        return "UNAVAILABLE"  # what Triton answers for a restricted protocol
    if isinstance(error, c.PayloadTooLarge):
        return "RESOURCE_EXHAUSTED"
    for cls, code in _GRPC_CODE:
        if isinstance(error, cls):
            return code
    if not isinstance(error, TritonError):
        return "INTERNAL"
    return "UNKNOWN"


def parameter_value(p: Any) -> Any:
    which = p.WhichOneof("parameter_choice")
    if which is None:
        raise InvalidArgumentError("a parameter has no value")
    return getattr(p, which)


def _set_infer_parameter(target: Any, value: Any) -> None:
    if isinstance(value, bool):
        target.bool_param = value
    elif isinstance(value, int):
        target.int64_param = value
    elif isinstance(value, float):
        target.double_param = value
    else:
        target.string_param = str(value)


# Parameters Triton reads itself: the value types it takes, and those its refusal names.
_BOOL = ({"bool_param"}, "bool_param")
_TYPED_PARAMETERS = {
    "sequence_id": ({"int64_param", "uint64_param", "string_param"},
                    "int64_param or string_param"),
    "sequence_start": _BOOL, "sequence_end": _BOOL, "triton_enable_empty_final_response": _BOOL,
    "priority": ({"int64_param", "uint64_param"}, "int64_param or uint64_param"),
    "timeout": ({"int64_param"}, "int64_param"),
}


def call_from_request(request: Any) -> tuple[WireRequest, bool]:
    """(call, triton_enable_empty_final_response) from a ModelInferRequest."""
    call = WireRequest(model_name=request.model_name,
                       model_version=parse_version(request.model_version))
    call.request_id = request.id
    empty_final = False
    for key, p in request.parameters.items():
        which = p.WhichOneof("parameter_choice")
        typed = _TYPED_PARAMETERS.get(key)
        if typed is not None and which not in typed[0]:
            raise InvalidArgumentError(
                f"invalid value type for '{key}' parameter, expected {typed[1]}.")
        if key == "triton_enable_empty_final_response":
            empty_final = p.bool_param
        elif key.startswith("triton_"):
            raise InvalidArgumentError(  # Triton's gRPC text (its HTTP one differs)
                "parameter keys starting with 'triton_' are reserved for Triton usage. Only "
                "the following keys starting with 'triton_' are allowed: "
                "triton_enable_empty_final_response")
        elif key in ("binary_data_output", "headers"):
            continue  # HTTP notions; nothing to do over gRPC
        elif which == "uint64_param" and typed is None:
            set_request_parameter(call, key, unsigned(key, p.uint64_param, 63))
        else:
            set_request_parameter(call, key, parameter_value(p))
    raw = request.raw_input_contents
    if raw:
        # As Triton: an input that also has contents is named first (clients
        # match that text), then a count that does not match.
        for tensor in request.inputs:
            if tensor.HasField("contents") and "shared_memory_region" not in tensor.parameters:
                raise InvalidArgumentError(
                    f"contents field must not be specified when using raw_input_contents for "
                    f"'{tensor.name}' for model '{call.model_name}'")
        # One raw_input_contents per input not in shared memory, in order.
        expected = sum("shared_memory_region" not in t.parameters for t in request.inputs)
        if len(raw) != expected:
            raise InvalidArgumentError(f"expected {expected} raw_input_contents "
                                       f"(one per input), got {len(raw)}")
    index = 0
    for tensor in request.inputs:
        name = tensor.name
        if name in call.inputs:
            raise InvalidArgumentError(f"input '{name}' is given twice")
        ref = _shm_place(tensor)
        datatype = check_datatype(name, tensor.datatype)
        shape = list(tensor.shape)
        if ref is not None:
            if tensor.HasField("contents"):
                raise InvalidArgumentError(
                    f"unexpected 'content' provided when using shared memory for input tensor "
                    f"'{name}' for model '{call.model_name}'")
            call.shm_inputs[name] = _shm.shaped(name, ref, datatype, shape)
            call.inputs[name] = None  # a view of the region, when the request is made
        elif raw:
            data = raw[index]
            index += 1
            call.inputs[name] = tensor_from_buffer(name, datatype, shape, data, 0, len(data))
        elif tensor.HasField("contents"):
            call.inputs[name] = _tensor_from_contents(name, datatype, shape, tensor.contents)
        else:
            raise InvalidArgumentError(f"input '{name}' has neither contents nor "
                                       "raw_input_contents")
    if request.outputs:
        names = []
        for output in request.outputs:
            ref = _shm_place(output)
            if ref is not None:
                if "classification" in output.parameters:
                    raise InvalidArgumentError("output can't set both 'shared_memory_region' "
                                               "and 'classification'")
                call.shm_outputs[output.name] = ref
            count = grpc_count(output.parameters)
            if count is not None:
                call.classification = Classification.including(
                    call.classification, output.name, count)
            names.append(output.name)
        call.requested_outputs = names
    return call, empty_final


def _shm_place(tensor: Any) -> Optional[_shm.ShmRef]:
    """A tensor's shared_memory_* parameters, None without them (Triton's texts)."""
    params = tensor.parameters
    region = params.get("shared_memory_region")
    if region is None:
        for key in ("shared_memory_offset", "shared_memory_byte_size"):
            if key in params:
                raise InvalidArgumentError(
                    f"'{key}' can not be specified without 'shared_memory_region' parameter "
                    f"for tensor '{tensor.name}'")
        return None
    if region.WhichOneof("parameter_choice") != "string_param":
        raise InvalidArgumentError(
            f"invalid value type for 'shared_memory_region' parameter for tensor "
            f"'{tensor.name}', expected string_param.")
    numbers = []
    for key in ("shared_memory_offset", "shared_memory_byte_size"):
        p = params.get(key)
        if p is None:
            if key == "shared_memory_byte_size":
                raise InvalidArgumentError(
                    f"'shared_memory_byte_size' must be specified along with "
                    f"'shared_memory_region' parameter for tensor '{tensor.name}'")
            numbers.append(0)
            continue
        if p.WhichOneof("parameter_choice") != "int64_param":
            raise InvalidArgumentError(
                f"invalid value type for '{key}' parameter for tensor '{tensor.name}', "
                f"expected int64_param.")
        if p.int64_param < 0:
            raise InvalidArgumentError(f"'{key}' of tensor '{tensor.name}' is negative")
        numbers.append(p.int64_param)
    return _shm.ShmRef(region.string_param, numbers[0], numbers[1])


def _tensor_from_contents(name: str, datatype: str, shape: list[int], contents: Any) -> Any:
    field = CONTENTS_FIELD.get(datatype)
    if field is None:
        raise InvalidArgumentError(
            f"input '{name}': {datatype} data must be sent in raw_input_contents")
    for other in CONTENTS_FIELD.values():
        if other != field and len(getattr(contents, other)):
            raise InvalidArgumentError(
                f"input '{name}': {datatype} data must be in {field}, not {other}")
    values = getattr(contents, field)
    count = element_count(name, shape)
    if len(values) != count:
        raise InvalidArgumentError(
            f"input '{name}': {len(values)} elements in {field} for shape {shape}")
    if datatype == "BYTES":
        parts = []
        for item in values:
            parts.append(len(item).to_bytes(4, "little"))
            parts.append(item)
        blob = b"".join(parts)
        return tensor_from_buffer(name, "BYTES", shape, blob, 0, len(blob))
    dtype = NUMPY_DTYPE[datatype]
    assert dtype is not None
    array = np.asarray(values)
    if array.size and array.dtype.kind in "iu" and dtype.kind in "iu":
        info = np.iinfo(dtype)
        if array.min() < info.min or array.max() > info.max:
            raise InvalidArgumentError(f"input '{name}': a value does not fit in {datatype}")
    return np.ascontiguousarray(array.astype(dtype)).reshape(shape)


def _tensor_raw(tensor: Any) -> bytes:
    size = tensor.size
    return ctypes.string_at(tensor.data_ptr, size) if size else b""


def infer_response(m: Messages, response: Any, call: WireRequest, version: str) -> Any:
    out = m.ModelInferResponse(model_name=call.model_name, model_version=version,
                               id=response.request_id or call.request_id)
    for key, value in response.parameters.items():
        _set_infer_parameter(out.parameters[key], value)
    raw = out.raw_output_contents
    for name, tensor in response.outputs.items():
        # An output written into its region (a CUDA one's is in GPU memory)
        # gets empty contents, as in Triton.
        in_region = name in call.shm_outputs
        if not in_region and tensor.memory_type not in HOST_MEMORY:
            raise UnsupportedError(f"output '{name}' in {tensor.memory_type.name} memory "
                                   "cannot be sent")
        o = out.outputs.add()
        o.name = name
        o.datatype = DATATYPE_NAME[int(tensor.data_type)]
        o.shape.extend(shape_list(tensor))
        raw.append(b"" if in_region else _tensor_raw(tensor))
    return out


def parse_message(message_type: Any, data: bytes) -> Any:
    try:
        return message_type.FromString(data)
    except Exception as e:  # google.protobuf.message.DecodeError and kin
        raise InvalidArgumentError(f"malformed {message_type.DESCRIPTOR.name} message: {e}") \
            from None
