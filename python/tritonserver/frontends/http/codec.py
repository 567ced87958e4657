"""The KServe v2 HTTP inference codec: a JSON request, with its binary
tensors after the JSON (or a body that is the only input's bytes), decoded
into a WireRequest in place; the response encoded as JSON with binary outputs after.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from tritonserver import InferenceResponse, InvalidArgumentError, Server
from tritonserver.frontends.httpbase import json_codec as _json
from tritonserver.frontends.dataplane import shared_memory as _shm
from tritonserver.frontends.dataplane.classification import Classification, http_count
from tritonserver.frontends.dataplane.state import ModelEntry
from tritonserver.frontends.httpbase.wire import (
    BINARY_TYPE,
    HEADER_LENGTH,
    JSON_TYPE,
    Reply,
    Scope,
    choose_encoding,
    compress,
    json_bytes,
)
from tritonserver.frontends.dataplane.headers import forward_headers
from tritonserver.frontends.dataplane.inference import (WireRequest, model_version,
                                                        set_request_parameter)
from tritonserver.frontends.dataplane.tensors import (
    DATATYPE_NAME,
    check_datatype,
    nbytes_of,
    shape_list,
    tensor_bytes,
    tensor_from_buffer,
    tensor_from_list,
    tensor_to_list,
)


def parse_infer(scope: Scope, body: bytes, json_end: int, model_name: str,
                version: int, forward: Optional["re.Pattern[str]"]
                ) -> tuple[WireRequest, Optional[dict[str, bool]], bool]:
    """A JSON (and binary) inference request to a call: (call, whether each
    requested output is sent as binary data (None: none named), the default).
    ``json_end``: the JSON's length, the binary inputs after it (the
    protocol says where: KServe's Inference-Header-Content-Length,
    SageMaker's json-header-size)."""
    size = len(body)
    try:
        request = _json.loads(body if json_end == size else body[:json_end])
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        # RecursionError: the standard library's parser (no orjson) on deep nesting
        raise InvalidArgumentError(f"failed to parse the request JSON buffer: {e}") from None
    if not isinstance(request, dict):
        raise InvalidArgumentError("the inference request must be a JSON object")
    call = WireRequest(model_name=model_name, model_version=version)
    default_binary = parse_parameters(call, request.get("parameters"))
    if forward is not None:
        forward_headers(forward, ((key.decode("latin-1"), value.decode("latin-1"))
                                  for key, value in scope["headers"]), call.parameters)
    request_id = request.get("id")
    if request_id is not None:
        if not isinstance(request_id, str):
            raise InvalidArgumentError("Unable to parse 'id': expected a string")
        call.request_id = request_id
    inputs = request.get("inputs")
    if not isinstance(inputs, list):
        raise InvalidArgumentError("Unable to parse 'inputs': expected a list of tensors")
    offset = json_end
    for entry in inputs:
        offset = parse_input(call, entry, body, offset)
    if offset != size:
        if offset == json_end:
            raise InvalidArgumentError(
                f"{size - json_end} bytes follow the inference header but no input is "
                "binary ('binary_data_size')")
        raise InvalidArgumentError(
            f"{size - offset} bytes follow the last binary input: 'binary_data_size' "
            "values and the body disagree")
    kinds = None
    outputs = request.get("outputs")
    if outputs is not None:
        if not isinstance(outputs, list):
            raise InvalidArgumentError("Unable to parse 'outputs': expected a list")
        kinds = {}
        names = []
        for entry in outputs:
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                raise InvalidArgumentError("each requested output needs a 'name' string")
            name = entry["name"]
            binary = default_binary
            params = entry.get("parameters")
            if params is not None:
                if not isinstance(params, dict):
                    raise InvalidArgumentError(
                        f"output '{name}': 'parameters' must be an object")
                if "binary_data" in params:
                    binary = params["binary_data"]
                    if not isinstance(binary, bool):
                        raise InvalidArgumentError(
                            f"output '{name}': 'binary_data' must be a boolean")
                if "shared_memory_region" in params:
                    call.shm_outputs[name] = _shm.output_place(params)
                count = http_count(params)
                if count:
                    call.classification = Classification.including(
                        call.classification, name, count)
            names.append(name)
            kinds[name] = binary
        call.requested_outputs = names
    return call, kinds, default_binary


_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_DECIMAL = re.compile(rb"[ \t]*[+-]?[0-9]+[ \t]*")


def inference_header_length(value: bytes, size: int) -> int:
    """Inference-Header-Content-Length of a body of ``size`` bytes, with
    Triton's texts (server PR #8925: a value past int32 crashed it)."""
    text = value.decode("latin-1")
    if _DECIMAL.fullmatch(value) is None:
        raise InvalidArgumentError(f"Unable to parse Inference-Header-Content-Length, got: {text}")
    length = int(value)
    if not _INT32_MIN <= length <= _INT32_MAX:
        raise InvalidArgumentError(
            f"Unable to parse Inference-Header-Content-Length, value is out of range "
            f"[ {_INT32_MIN}, {_INT32_MAX} ], got: {text}")
    if not 0 < length <= size:
        raise InvalidArgumentError(
            f"inference header size should be in range (0, {size}), got: {text}")
    return length


def parse_parameters(call: WireRequest, params: Any) -> bool:
    """Request parameters into the call; returns binary_data_output."""
    binary = False
    if params is None:
        return binary
    if not isinstance(params, dict):
        raise InvalidArgumentError("Unable to parse 'parameters': expected an object")
    for key, value in params.items():
        if key == "binary_data_output":
            if not isinstance(value, bool):
                raise InvalidArgumentError("Unable to parse 'binary_data_output'")
            binary = value
        else:
            set_request_parameter(call, key, value)
    return binary


def parse_input(call: WireRequest, entry: Any, body: bytes, offset: int) -> int:
    if not isinstance(entry, dict):
        raise InvalidArgumentError("each input must be a JSON object")
    name = entry.get("name")
    if not isinstance(name, str):
        raise InvalidArgumentError("Unable to parse 'name' of an input")
    if name in call.inputs:
        raise InvalidArgumentError(f"input '{name}' is given twice")
    datatype = check_datatype(name, entry.get("datatype"))
    shape = entry.get("shape")
    if not isinstance(shape, list):
        raise InvalidArgumentError(f"input '{name}': Unable to parse 'shape'")
    params = entry.get("parameters")
    size = None
    if params is not None:
        if not isinstance(params, dict):
            raise InvalidArgumentError(f"input '{name}': 'parameters' must be an object")
        if "shared_memory_region" in params:
            call.shm_inputs[name] = _shm.input_place(name, entry, params, datatype, shape)
            call.inputs[name] = None  # a view of the region, when the request is made
            return offset
        if "binary_data_size" in params:
            size = params["binary_data_size"]
            if isinstance(size, bool) or not isinstance(size, int) or size < 0:
                raise InvalidArgumentError(
                    f"input '{name}': 'binary_data_size' must be a non-negative integer")
    if size is not None:
        if "data" in entry:
            raise InvalidArgumentError(
                f"input '{name}': give either 'data' or 'binary_data_size', not both")
        if offset + size > len(body):
            raise InvalidArgumentError(
                f"unexpected size for input '{name}', expecting {offset + size - len(body)} "
                f"additional bytes for model '{call.model_name}'")
        call.inputs[name] = tensor_from_buffer(name, datatype, shape, body, offset, size)
        end: int = offset + size
        return end
    if "data" not in entry:
        raise InvalidArgumentError(
            f"input '{name}': expected 'data' or a 'binary_data_size' parameter")
    call.inputs[name] = tensor_from_list(name, datatype, shape, entry["data"])
    return offset


def raw_binary_call(server: Server, model_name: str, version: int, body: bytes
                    ) -> tuple[WireRequest, Optional[dict[str, bool]], bool]:
    """Inference-Header-Content-Length 0: the body is the only input's data."""
    model = server.model(model_name, version)
    metadata = model.metadata()
    inputs = metadata.get("inputs", [])
    if len(inputs) != 1:
        raise InvalidArgumentError(
            f"a raw binary request needs a model with exactly 1 input; '{model_name}' "
            f"has {len(inputs)}")
    spec = inputs[0]
    datatype = spec["datatype"]
    shape = [int(d) for d in spec["shape"]]
    if model.config().get("max_batch_size", 0) > 0 and shape:
        shape[0] = 1
    if datatype == "BYTES":
        if [d for d in shape if d != 1 and d != -1] or shape.count(-1) > 1:
            raise InvalidArgumentError(
                "a raw binary request of BYTES needs an input of shape [1]")
        shape = [1 for _ in shape] or [1]
    else:
        variable = [i for i, d in enumerate(shape) if d == -1]
        if len(variable) > 1:
            raise InvalidArgumentError(
                "a raw binary request needs an input with at most one variable dimension")
        if variable:
            fixed = nbytes_of([d for d in shape if d != -1], datatype)
            if fixed == 0 or len(body) % fixed:
                raise InvalidArgumentError(
                    f"{len(body)} bytes cannot be a whole {datatype} tensor of shape {shape}")
            shape[variable[0]] = len(body) // fixed
    call = WireRequest(model_name=model_name, model_version=version)
    call.inputs[spec["name"]] = tensor_from_buffer(
        spec["name"], datatype, shape, body, 0, len(body))
    return call, None, True


def infer_reply(headers: dict[bytes, bytes], entry: ModelEntry, response: InferenceResponse,
                call: WireRequest, kinds: Optional[dict[str, bool]], default_binary: bool) -> Reply:
    """The response: JSON, binary outputs after it, compressed as the client accepts."""
    document: dict[str, Any] = {"model_name": call.model_name,
                                "model_version": model_version(entry, call.model_version)}
    if response.request_id:
        document["id"] = response.request_id
    if response.parameters:
        document["parameters"] = response.parameters
    outputs = []
    buffers: list[Any] = []
    for name, tensor in response.outputs.items():
        datatype = DATATYPE_NAME[int(tensor.data_type)]
        out: dict[str, Any] = {"name": name, "datatype": datatype,
                               "shape": shape_list(tensor)}
        binary = default_binary if kinds is None else kinds[name]
        if name in call.shm_outputs:
            pass  # written into its region: neither data nor parameters, as Triton
        elif binary:
            view = tensor_bytes(tensor)
            out["parameters"] = {"binary_data_size": len(view)}
            if len(view):
                buffers.append(view)
        else:
            out["data"] = tensor_to_list(name, tensor)
        outputs.append(out)
    document["outputs"] = outputs
    header = json_bytes(document)
    extra: list[tuple[bytes, bytes]] = []
    if buffers:
        body = b"".join([header, *buffers])
        content_type = BINARY_TYPE
        extra.append((HEADER_LENGTH, str(len(header)).encode()))
    else:
        body = header
        content_type = JSON_TYPE
    encoding = choose_encoding(headers.get(b"accept-encoding"), len(body))
    if encoding is not None:
        body = compress(body, encoding)
        extra.append((b"content-encoding", encoding.encode()))
    return 200, content_type, body, extra
