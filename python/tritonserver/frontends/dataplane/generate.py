"""The generate extension, protocol-free: a generate request's JSON object
made into a call (keys naming model inputs become tensors shaped by the
model's metadata, the rest parameters), sent, and each response made into
a generate response's JSON object.
"""

from __future__ import annotations

from typing import Any

from tritonserver import (
    InferenceResponse,
    InternalError,
    InvalidArgumentError,
    Server,
)
from tritonserver.frontends.dataplane.state import ModelEntry, state_of
from tritonserver.frontends.dataplane.inference import (WireRequest, model_version, send_request,
                                                        set_parameter)
from tritonserver.frontends.dataplane.tensors import tensor_from_list, tensor_to_list


def start(server: Server, model_name: str, version: int,
          request: dict[str, Any]) -> tuple[Any, WireRequest, ModelEntry]:
    """Sends a generate request: (the responses' async iterator, which
    yields errors rather than raising them, the call, the model's entry)."""
    entry = state_of(server).entry(server, model_name, version)
    model = entry.model
    call = make_call(model, model_name, version, request)
    return send_request(call, server, entry, raise_on_error=False), call, entry


def make_call(model: Any, model_name: str, version: int, request: dict[str, Any]) -> WireRequest:
    """Generate-request JSON to a call: keys naming model inputs become
    tensors (scalar or 1-D list, shaped by the model's metadata), "parameters"
    and every other key become request parameters; "id" is the request id."""
    specs = {spec["name"]: spec for spec in model.metadata().get("inputs", [])}
    call = WireRequest(model_name=model_name, model_version=version)
    for key, value in request.items():
        if key in specs:
            spec = specs[key]
            shape = shape_for(key, [int(d) for d in spec["shape"]],
                                    len(value) if isinstance(value, list) else 1)
            call.inputs[key] = tensor_from_list(key, spec["datatype"], shape, value)
        elif key == "id":
            if not isinstance(value, str):
                raise InvalidArgumentError("Unable to parse 'id': expected a string")
            call.request_id = value
        elif key == "parameters":
            if not isinstance(value, dict):
                raise InvalidArgumentError("Expected JSON object for keyword: 'parameters'")
            for name, item in value.items():
                set_parameter(call.parameters, name, item)
        else:
            set_parameter(call.parameters, key, value)
    return call


def shape_for(name: str, shape: list[int], count: int) -> list[int]:
    """A model input's shape filled for ``count`` elements: fixed dimensions
    take their share, the innermost variable one the rest, others 1."""
    remaining = count
    for d in shape:
        if d > 0:
            if remaining % d:
                raise InvalidArgumentError(
                    f"The schema can not convert input '{name}' to tensor with proper shape")
            remaining //= d
        elif d == 0 and count:
            raise InvalidArgumentError(
                f"The schema can not convert input '{name}' to tensor with proper shape")
    out = list(shape)
    for i in range(len(out) - 1, -1, -1):
        if out[i] == -1:
            out[i] = remaining
            remaining = 1
    if remaining != 1 and count:
        raise InvalidArgumentError(
            f"The schema can not convert input '{name}' to tensor with proper shape")
    return out


def response_document(response: InferenceResponse, call: WireRequest,
                      entry: ModelEntry) -> dict[str, Any]:
    document: dict[str, Any] = {}
    if response.request_id:
        document["id"] = response.request_id
    document["model_name"] = call.model_name
    document["model_version"] = model_version(entry, call.model_version)
    for key, value in response.parameters.items():
        document[key] = value
    for name, tensor in response.outputs.items():
        values = tensor_to_list(name, tensor)
        document[name] = values[0] if len(values) == 1 else values
    return document


async def only_document(iterator: Any, call: WireRequest, entry: ModelEntry) -> dict[str, Any]:
    """The document of the one response a (non-streaming) generate request expects."""
    responses = []
    async for response in iterator:
        if response.error is not None:
            raise response.error
        if response.outputs or response.parameters or not response.final:
            responses.append(response)
    if len(responses) != 1:
        raise InternalError("generate expects model to produce exactly 1 response, use "
                            "generate stream for model that generates various number of "
                            "responses")
    return response_document(responses[0], call, entry)

