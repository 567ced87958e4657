"""What SageMaker's wire adds to KServe's inference body: where the JSON
ends when binary tensors follow it (a parameter of the Content-Type, not
Triton's Inference-Header-Content-Length header), the Content-Type of a
response, and the statuses of the multi-model endpoints (400 for any
error, 507 when the error says memory ran out: what SageMaker's
multi-model contract reads to evict models and retry).
"""

from __future__ import annotations

import re
from typing import Optional

from tritonserver import AlreadyExistsError, InvalidArgumentError
from tritonserver.frontends.dataplane import state as c
from tritonserver.frontends.httpbase.endpoint import MethodNotAllowed, triton_error_reply
from tritonserver.frontends.httpbase.wire import error_body

# The Content-Type of a body whose JSON is followed by binary tensors; the
# JSON's length in bytes follows the "=".
BINARY_MIME = "application/vnd.sagemaker-triton.binary+json;json-header-size="

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
# What C++'s std::stoi reads: leading white space, a sign, digits; the rest is ignored.
_STOI = re.compile(r"[ \t\n\v\f\r]*([+-]?[0-9]+)")


def json_header_size(content_type: Optional[bytes], content_length: int) -> int:
    """The length of the JSON at the start of a body of ``content_length``
    bytes: the Content-Type's json-header-size when it is the binary MIME
    type, else the whole body. 0 means the body is the only input's bytes
    (as a KServe header length of 0). InvalidArgumentError, with Triton's
    texts, for a value that is not a number, past int32, or past the body."""
    if content_type is None:
        return content_length
    text = content_type.decode("latin-1")
    at = text.find(BINARY_MIME)
    if at < 0:
        return content_length
    if at != 0:
        raise InvalidArgumentError(
            f"expect MIME type for binary data starts with '{BINARY_MIME}', got: {text}")
    rest = text[len(BINARY_MIME):]
    number = _STOI.match(rest)
    if number is None:
        raise InvalidArgumentError(f"Unable to parse inference header size, got: {rest}")
    value = int(number.group(1))
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise InvalidArgumentError(
            f"Unable to parse inference header size, value is out of range, got: {rest}")
    if value < 0 or value > content_length:
        raise InvalidArgumentError(
            f"inference header size should be in range (0, {content_length}), got: {rest}")
    return value


def binary_content_type(json_length: int) -> bytes:
    """The Content-Type of a response whose JSON (``json_length`` bytes) is
    followed by binary outputs."""
    return f"{BINARY_MIME}{json_length}".encode("latin-1")


# Texts that mark an error as memory running out (Triton's list: PyTorch's,
# TensorFlow's, CUDA libraries', the allocator's, a full disk).
OUT_OF_MEMORY_TEXTS = (
    "CUDA out of memory", "CUDA_OUT_OF_MEMORY", "Out of memory", "Out Of Memory",
    "out of memory", "MemoryError", "OutOfMemory", "OOM", "Dst tensor is not initialized",
    "Src tensor is not initialized", "CNMEM_STATUS_OUT_OF_MEMORY",
    "CUDNN_STATUS_NOT_INITIALIZED", "CUBLAS_STATUS_ALLOC_FAILED",
    "CUBLAS_STATUS_NOT_INITIALIZED", "Failed to allocate memory", "failed to allocate memory",
    "No space left on device",
)


def out_of_memory(message: str) -> bool:
    """Whether an error's text says memory (or disk) ran out: anywhere in
    the text, as Triton matches (not whole words: "ROOM" matches "OOM")."""
    return any(text in message for text in OUT_OF_MEMORY_TEXTS)


def multi_model_status(error: BaseException) -> int:
    """The status of a multi-model endpoint's error: 409 when the name or
    repository is taken, 507 when memory ran out, else 400 (not Triton's
    per-code statuses: SageMaker's contract reads these)."""
    if isinstance(error, AlreadyExistsError):
        return 409
    return 507 if out_of_memory(c.error_message(error)) else 400


def multi_model_error_reply(error: BaseException) -> tuple[int, bytes]:
    """A multi-model endpoint's status and ``{"error": ...}`` body; a
    restricted API (403) and a wrong method (405) answer as Triton's HTTP does."""
    if isinstance(error, (c.Forbidden, MethodNotAllowed)):
        return triton_error_reply(error)
    return multi_model_status(error), error_body(c.error_message(error))
