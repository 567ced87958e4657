"""The system and CUDA shared memory extensions, protocol-free: register,
unregister and status of regions (the Server's registry), the places of
tensors in them that requests give (Triton's texts), and putting a call's
inputs and outputs there (a CUDA region's as GPU memory of its device, in
place). The regions themselves: tritonserver._shared_memory.
"""

from __future__ import annotations

import base64
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from tritonserver import DataType, InvalidArgumentError, MemoryType, Server, UnsupportedError
from tritonserver._server import shared_memory_of
from tritonserver._shared_memory import SharedMemoryOutputs
from tritonserver.frontends.dataplane.tensors import (
    ELEMENT_SIZE,
    element_count,
    tensor_from_buffer,
)

if TYPE_CHECKING:
    from tritonserver.frontends.dataplane.inference import WireRequest

_OFFSET_SIZE = ("shared_memory_offset", "shared_memory_byte_size")
_CUDA_IPC_HANDLE_SIZE = 64  # sizeof(cudaIpcMemHandle_t)
_BASE64_ALPHABET = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")

# Triton's text (2.69 and later) when a frontend's clients may not use shared memory.
CLIENT_SHM_DISABLED = ("Client shared memory is disabled. Start the server with "
                       "'--allow-client-shm=true' to enable.")


def check_client_shm(allowed: bool) -> None:
    """Clients of a frontend register, unregister and use regions only when
    it allows them (KServeHttp/KServeGrpc ``allow_client_shm``, serve's
    ``--allow-client-shm``): a region names any POSIX shared memory object
    the server's user can open, so a client could read and write another
    process's memory through it. Status stays readable, as in Triton."""
    if not allowed:
        raise UnsupportedError(CLIENT_SHM_DISABLED)


@dataclass
class ShmRef:
    """A tensor's place in a shared memory region (system or CUDA), as a request gives it."""

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


def register(server: Server, allowed: bool, name: str, key: str, byte_size: int,
             offset: int) -> None:
    """A client's register request (``allowed``: the frontend lets clients use
    shared memory)."""
    check_client_shm(allowed)
    server.register_system_shared_memory(name, key, byte_size, offset)


def unregister(server: Server, allowed: bool, name: Optional[str]) -> None:
    """Region ``name``, or every region when None (or empty)."""
    check_client_shm(allowed)
    server.unregister_system_shared_memory(name or None)


def cuda_status(server: Server, name: Optional[str]) -> list[dict[str, Any]]:
    """``[{"name", "device_id", "byte_size"}]`` of CUDA region ``name``, or of all."""
    return server.cuda_shared_memory_status(name or None)


def cuda_register_fields(request: dict[str, Any]) -> tuple[bytes, int, int]:
    """(raw_handle, device_id, byte_size) of a CUDA register request's body:
    ``{"raw_handle": {"b64": "<base64>"}, "device_id", "byte_size"}``, read
    as Triton reads it (its texts; the handle decoded as its base64 decoder
    does, skipping what is not base64)."""
    if "raw_handle" not in request:
        raise InvalidArgumentError("Shared memory register request has no 'raw_handle' field")
    encoded = _json_member(request["raw_handle"], "b64")
    if not isinstance(encoded, str):
        raise InvalidArgumentError("attempt to access JSON non-string as string")
    numbers = []
    for field_name in ("byte_size", "device_id"):
        value = _json_member(request, field_name)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 64:
            raise InvalidArgumentError(
                "attempt to access JSON non-unsigned-integer as unsigned-integer")
        numbers.append(value)
    raw_handle = _lenient_base64(encoded)
    if len(raw_handle) != _CUDA_IPC_HANDLE_SIZE:
        raise InvalidArgumentError(
            "'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t")
    return raw_handle, numbers[1], numbers[0]


def _json_member(document: Any, name: str) -> Any:
    if not isinstance(document, dict) or name not in document:
        raise InvalidArgumentError(f"attempt to access non-existing object member '{name}'")
    return document[name]


def _lenient_base64(text: str) -> bytes:
    """Base64 as Triton's decoder (libb64) reads it: characters outside the
    alphabet (padding included) are skipped, a trailing partial group gives
    the whole bytes it holds."""
    kept = bytes(c for c in text.encode("utf-8", "surrogatepass") if c in _BASE64_ALPHABET)
    kept = kept[:len(kept) - len(kept) % 4] if len(kept) % 4 == 1 else kept
    return base64.b64decode(kept + b"=" * (-len(kept) % 4))


def cuda_register(server: Server, allowed: bool, name: str, raw_handle: bytes,
                  device_id: int, byte_size: int) -> None:
    """A client's CUDA register request (``allowed``: the frontend lets
    clients use shared memory)."""
    check_client_shm(allowed)
    server.register_cuda_shared_memory(name, raw_handle, device_id, byte_size)


def cuda_unregister(server: Server, allowed: bool, name: Optional[str]) -> None:
    """CUDA region ``name``, or every CUDA region when None (or empty)."""
    check_client_shm(allowed)
    server.unregister_cuda_shared_memory(name or None)


# ---- Tensors in regions ------------------------------------------------------------------


def place(params: dict[str, Any]) -> ShmRef:
    """A tensor's shared_memory_* parameters as plain values (Triton's texts)."""
    region = params["shared_memory_region"]
    if not isinstance(region, str):
        raise InvalidArgumentError("Unable to parse 'shared_memory_region'")
    numbers = []
    for key in _OFFSET_SIZE:
        value = params.get(key, 0)
        # Unsigned 64-bit, as Triton parses them; what does not fit the region is
        # the registry's error (Invalid offset..., Integer overflow detected...).
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 64:
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


def place_in_shared_memory(call: "WireRequest", server: Server, allowed: bool) -> Any:
    """A call's inputs in regions become views of them (in place); returns
    the allocator writing outputs into theirs (None if none is). ``allowed``:
    the frontend lets its clients use shared memory (else refused, even for
    regions the program registered in-process)."""
    check_client_shm(allowed)
    registry = shared_memory_of(server)
    # The call holds its regions until release_shared_memory (its end): one
    # unregistered meanwhile stays until then, as in Triton.
    use = call.shm_use = registry.use()
    weakref.finalize(call, use.release)  # a path that forgets still lets go
    try:
        for name, ref in call.shm_inputs.items():
            where = registry.slice(ref.region, ref.offset, ref.byte_size, use)
            check_input_byte_size(call.model_name, name, ref)
            if where.memory_type == MemoryType.GPU:
                # A CUDA region: the core reads the device memory where it is.
                call.inputs[name] = where.tensor(DataType[ref.datatype], tuple(ref.shape))
            else:
                call.inputs[name] = tensor_from_buffer(name, ref.datatype, ref.shape,
                                                       where.view, 0, ref.byte_size)
        call.shm_inputs = {}
        if not call.shm_outputs:
            return None
        return SharedMemoryOutputs(registry, {
            name: (ref.region, ref.offset, ref.byte_size)
            for name, ref in call.shm_outputs.items()}, use)
    except BaseException:
        release_shared_memory(call)
        raise


def release_shared_memory(call: "WireRequest") -> None:
    """The end of a call (its last response, or its failure): the regions it
    used are no longer held; those unregistered meanwhile go now."""
    use = call.shm_use
    if use is not None:
        call.shm_use = None
        use.release()


def check_input_byte_size(model: str, name: str, ref: ShmRef) -> None:
    """A fixed-size input's region span must be what its shape takes: the
    core's check, in the words of Triton's later cores, which clients read
    (qa/L0_shared_memory test_too_big_shm)."""
    if ref.datatype == "BYTES":
        return  # its elements' lengths say (tensor_from_buffer checks a system region's)
    expected = element_count(name, ref.shape) * ELEMENT_SIZE[ref.datatype]
    if expected != ref.byte_size:
        raise InvalidArgumentError(
            f"input byte size mismatch for input '{name}' for model '{model}'. "
            f"Expected {expected}, got {ref.byte_size}")
