"""The system and CUDA shared memory extensions, protocol-free: register,
unregister and status of regions (the Server's registry), the places of
tensors in them that requests give (Triton's texts), and putting a call's
inputs and outputs there. The regions themselves: tritonserver._shared_memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn, Optional

from tritonserver import InvalidArgumentError, Server
from tritonserver._server import shared_memory_of
from tritonserver._shared_memory import (
    SystemSharedMemoryOutputs,
    cuda_register_refusal,
    cuda_status,
)
from tritonserver.frontends.dataplane.tensors import element_count, tensor_from_buffer

if TYPE_CHECKING:
    from tritonserver.frontends.dataplane.inference import WireRequest

_OFFSET_SIZE = ("shared_memory_offset", "shared_memory_byte_size")


@dataclass
class ShmRef:
    """A tensor's place in a system shared memory region, as a request gives it."""

    region: str
    offset: int
    byte_size: int
    datatype: str = ""
    shape: list[int] = field(default_factory=list)


# ---- The endpoints ---------------------------------------------------------------------


def status(server: Server, name: Optional[str]) -> list[dict[str, Any]]:
    """``[{"name", "key", "offset", "byte_size"}]`` of region ``name``, or of all."""
    return server.system_shared_memory_status(name)


def register_fields(request: dict[str, Any]) -> tuple[str, int, int]:
    """(key, byte_size, offset) of a register request's body (Triton's texts)."""
    if "key" not in request:
        raise InvalidArgumentError("Shared memory register request has no 'key' field")
    key = request["key"]
    if not isinstance(key, str):
        raise InvalidArgumentError("Unable to parse 'key': expected a string")
    numbers = {}
    for field_name in ("offset", "byte_size"):
        if field_name not in request:
            if field_name == "offset":
                numbers[field_name] = 0
                continue
            raise InvalidArgumentError("Shared memory register request has no 'byte_size' field")
        value = request[field_name]
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 63:
            raise InvalidArgumentError(
                f"Unable to parse '{field_name}': expected an unsigned integer")
        numbers[field_name] = value
    return key, numbers["byte_size"], numbers["offset"]


def register(server: Server, name: str, key: str, byte_size: int, offset: int) -> None:
    server.register_system_shared_memory(name, key, byte_size, offset)


def unregister(server: Server, name: Optional[str]) -> None:
    """Region ``name``, or every region when None (or empty)."""
    server.unregister_system_shared_memory(name or None)


def cuda_regions(server: Server, name: Optional[str]) -> list[dict[str, Any]]:
    """CUDA shared memory status: there are none (NotFoundError for a name)."""
    return cuda_status(shared_memory_of(server), name or None)


def cuda_register(name: str) -> NoReturn:
    raise cuda_register_refusal(name)


def cuda_unregister(name: Optional[str]) -> None:
    """There are no CUDA regions: nothing to do, as Triton."""


# ---- Tensors in regions ------------------------------------------------------------------


def place(params: dict[str, Any]) -> ShmRef:
    """A tensor's shared_memory_* parameters as plain values (Triton's texts)."""
    region = params["shared_memory_region"]
    if not isinstance(region, str):
        raise InvalidArgumentError("Unable to parse 'shared_memory_region'")
    numbers = []
    for key in _OFFSET_SIZE:
        value = params.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 63:
            raise InvalidArgumentError(f"Unable to parse '{key}'")
        numbers.append(value)
    return ShmRef(region, numbers[0], numbers[1])


def input_place(name: str, entry: dict[str, Any], params: dict[str, Any], datatype: str,
                shape: list[Any]) -> ShmRef:
    """An input's place (``entry``: the input, ``params`` its parameters):
    neither data nor binary data beside it."""
    given = [what for what, present in (("'data'", "data" in entry),
                                         ("'binary_data_size'", "binary_data_size" in params))
             if present]
    if given:
        raise InvalidArgumentError(
            "Input must set only one of the following fields: 'data', 'binary_data_size' in "
            "'parameters', 'shared_memory_region' in 'parameters'. But set "
            + " ".join(given) + " 'shared_memory_region'")
    return shaped(name, place(params), datatype, shape)


def output_place(params: dict[str, Any]) -> ShmRef:
    """A requested output's place: not also classified nor binary data."""
    if params.get("classification"):
        raise InvalidArgumentError(
            "Output can't set both 'shared_memory_region' and 'classification'")
    if params.get("binary_data") is True:
        raise InvalidArgumentError(
            "Output can't set both 'shared_memory_region' and 'binary_data'")
    return place(params)


def shaped(name: str, ref: ShmRef, datatype: str, shape: list[Any]) -> ShmRef:
    """An input's place with its (checked) shape and datatype."""
    element_count(name, shape)
    ref.datatype, ref.shape = datatype, shape
    return ref


def place_in_shared_memory(call: "WireRequest", server: Server) -> Any:
    """A call's inputs in regions become views of them (in place); returns
    the allocator writing outputs into theirs (None if none is)."""
    registry = shared_memory_of(server)
    for name, ref in call.shm_inputs.items():
        where = registry.slice(ref.region, ref.offset, ref.byte_size)
        call.inputs[name] = tensor_from_buffer(name, ref.datatype, ref.shape, where.view, 0,
                                               ref.byte_size)
    call.shm_inputs = {}
    if not call.shm_outputs:
        return None
    return SystemSharedMemoryOutputs(registry, {
        name: (ref.region, ref.offset, ref.byte_size)
        for name, ref in call.shm_outputs.items()})
