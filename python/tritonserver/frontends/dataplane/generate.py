"""The generate extension, protocol-free: a generate request's JSON object
made into a call (keys naming model inputs become tensors shaped by the
model's metadata, the rest parameters), sent, and each response made into
a generate response's JSON object.
"""

from __future__ import annotations

from typing import Any, Optional

from tritonserver import (
    InferenceResponse,
    InternalError,
    InvalidArgumentError,
    Server,
    TritonError,
)
from tritonserver._errors import raise_taken
from tritonserver.frontends.dataplane.state import ModelEntry, state_of
from tritonserver.frontends.dataplane.inference import (WireRequest, model_version, send_request,
                                                        set_parameter)
from tritonserver.frontends.dataplane.tensors import (JSON_MAX_NESTING_DEPTH, tensor_from_list,
                                                      tensor_to_list)


def start(server: Server, model_name: str, version: int, request: dict[str, Any],
          trace_context: Optional[dict[str, str]] = None) -> tuple[Any, WireRequest, ModelEntry]:
    """Sends a generate request: (the responses' async iterator, which
    yields errors rather than raising them, the call, the model's entry).
    ``trace_context``: the W3C trace context headers it came with."""
    entry = state_of(server).entry(server, model_name, version)
    model = entry.model
    call = make_call(model, model_name, version, request)
    call.trace_context = trace_context
    return send_request(call, server, entry, raise_on_error=False), call, entry


class JsonObject(dict[str, Any]):
    """A generate request's JSON object as Triton reads one: each key's first
    value (what its lookups find) and ``names``, every member's key in order,
    a repeated key as often as it appears (the HTTP frontend parses into it;
    a plain dict serves where keys cannot repeat)."""

    __slots__ = ("names",)
    names: list[str]

    @classmethod
    def from_pairs(cls, pairs: list[tuple[str, Any]]) -> JsonObject:
        obj = cls()
        for key, value in pairs:
            obj.setdefault(key, value)
        obj.names = [key for key, _ in pairs]
        return obj


def member_names(obj: dict[str, Any]) -> list[str]:
    """An object's keys in order, repeated ones as often as they appear."""
    names = getattr(obj, "names", None)
    return list(obj) if names is None else names


# Triton's texts (its JSON reader's, for values of the wrong JSON type; the
# core's, for an input given twice).
NOT_A_STRING = "Unable to parse JSON bytes array: attempt to access JSON non-string as string"
NOT_A_BOOLEAN = "Unable to parse 'data': attempt to access JSON non-boolean as boolean"
PARAMETERS = "parameters"


def make_call(model: Any, model_name: str, version: int, request: dict[str, Any]) -> WireRequest:
    """Generate-request JSON to a call, member by member in order, as Triton
    converts one: keys naming model inputs become tensors (scalar or 1-D
    list, shaped by the model's metadata), every other key a request
    parameter; "parameters" holds more of them (or inputs); "id" is the
    request id. A key given twice is read with its first value (an input
    given twice is refused)."""
    specs = {spec["name"]: spec for spec in model.metadata().get("inputs", [])}
    call = WireRequest(model_name=model_name, model_version=version)
    if "id" in request:  # Triton reads the id first
        if not isinstance(request["id"], str):
            raise InvalidArgumentError("Unable to parse 'id': expected a string")
        call.request_id = request["id"]
    for key in member_names(request):
        if key == PARAMETERS:
            add_parameters(call, specs, request[key])
        elif key != "id":
            add_member(call, specs, request, key)
    return call


def add_parameters(call: WireRequest, specs: dict[str, Any], nested: Any) -> None:
    """The "parameters" object's members, converted as the top level's are."""
    if PARAMETERS in specs:
        raise InvalidArgumentError(
            f"Keyword '{PARAMETERS}' for nested schema also given as input tensor name")
    if not isinstance(nested, dict):
        raise InvalidArgumentError(f"Expected JSON object for keyword: '{PARAMETERS}'")
    try:
        for key in member_names(nested):
            add_member(call, specs, nested, key)
    except TritonError as e:
        raise type(e)(f"Converting keyword: '{PARAMETERS}': {e}") from None


def add_member(call: WireRequest, specs: dict[str, Any], obj: dict[str, Any], key: str) -> None:
    """One member of the request: a model input's tensor, else a parameter."""
    value = obj[key]
    spec = specs.get(key)
    if spec is None:
        if not isinstance(value, (str, int, float)):  # bool is an int
            raise InvalidArgumentError(
                f"parameter '{key}' has invalid type. It should be either 'int', 'bool', "
                "or 'string'.")
        set_parameter(call.parameters, key, value)
        return
    if key in call.inputs:
        request_id = call.request_id or "<id_unknown>"
        raise InvalidArgumentError(
            f"[request id: {request_id}] input '{key}' already exists in request")
    check_json_type(spec["datatype"], value)
    shape = shape_for(key, [int(d) for d in spec["shape"]],
                      len(value) if isinstance(value, list) else 1)
    call.inputs[key] = tensor_from_list(key, spec["datatype"], shape, value)


def check_json_type(datatype: str, value: Any) -> None:
    """Triton's texts for a BYTES input whose elements are not all strings
    and a BOOL one whose are not all booleans (lists within lists are read
    to their elements; past the depth limit, tensor_from_list refuses)."""
    wanted = {"BYTES": (str, NOT_A_STRING), "BOOL": (bool, NOT_A_BOOLEAN)}.get(datatype)
    if wanted is None:
        return
    kind, text = wanted
    pending = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, list):
            if depth < JSON_MAX_NESTING_DEPTH:
                pending.extend((x, depth + 1) for x in item)
        elif not isinstance(item, kind):
            raise InternalError(text)


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
            raise_taken(response, "error")  # no cycle through this frame
        if response.outputs or response.parameters or not response.final:
            responses.append(response)
    if len(responses) != 1:
        raise InternalError("generate expects model to produce exactly 1 response, use "
                            "generate stream for model that generates various number of "
                            "responses")
    return response_document(responses[0], call, entry)

