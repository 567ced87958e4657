"""tritonserver: the Triton Inference Server, embedded in your Python process.

Start a server on a model repository, then infer::

    import numpy as np
    import tritonserver

    with tritonserver.Server(model_repository="/path/to/models") as server:
        model = server.model("identity_fp32")
        for response in model.infer(inputs={"INPUT0": np.arange(4, dtype=np.float32)}):
            print(np.from_dlpack(response.outputs["OUTPUT0"]))

The core (libtritonserver) is found at start; ``python -m tritonserver
install-core`` installs one from PyPI without touching your environment.
"""

import os as _os

# grpcio (the gRPC frontend, tritonclient, Ray) turns its fork handlers on by
# default, and they abort the process when two threads fork at once (grpcio
# 1.85: "is_forking != was_forking"). The core's python backend forks a stub
# per model instance, from several loading threads at once. Off unless the
# user set it; read when grpc is first imported, so an import of grpc before
# this one keeps grpc's default (docs/reliability.md).
_os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from tritonserver import _distribution  # noqa: E402

from tritonserver._enums import (
    DataType,
    InstanceGroupKind,
    LogFormat,
    MemoryType,
    MetricFormat,
    ModelBatchFlag,
    ModelControlMode,
    ModelTxnPropertyFlag,
    RateLimitMode,
)
from tritonserver._errors import (
    AlreadyExistsError,
    CancelledError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    TritonError,
    UnavailableError,
    UnknownError,
    UnsupportedError,
)
from tritonserver._inprocess import (
    ModelInstance,
    ModelRequest,
    ModelResponse,
    PythonModel,
    ResponseSender,
)
from tritonserver._memory import MemoryAllocator, default_memory_allocators
from tritonserver._model import Model
from tritonserver._options import ModelLoadDeviceLimit, Options, RateLimiterResource
from tritonserver._request import InferenceRequest
from tritonserver._iterators import AsyncResponseIterator, ResponseIterator
from tritonserver._response import InferenceResponse
from tritonserver._server import Server
from tritonserver._tensor import DLDeviceType, MemoryBuffer, Tensor

# NVIDIA's package imports its tritonserver._api modules when it is imported,
# so its programs name them without importing them
# (``tritonserver._api._response.InferenceResponse`` in annotations).
from tritonserver import _api  # noqa: E402,F401

__version__ = _distribution.version()
if _distribution.other_distribution() is not None:
    import warnings as _warnings

    _warnings.warn(_distribution.conflict_message() or "", RuntimeWarning, stacklevel=2)


def example_model_repository() -> str:
    """Path of the example model repository shipped with the package."""
    from tritonserver._package_files import package_file

    return package_file("example_models")


__all__ = [
    "__version__",
    "AlreadyExistsError",
    "AsyncResponseIterator",
    "CancelledError",
    "DLDeviceType",
    "DataType",
    "InferenceRequest",
    "InferenceResponse",
    "InstanceGroupKind",
    "InternalError",
    "InvalidArgumentError",
    "LogFormat",
    "MemoryAllocator",
    "MemoryBuffer",
    "MemoryType",
    "MetricFormat",
    "Model",
    "ModelBatchFlag",
    "ModelControlMode",
    "ModelInstance",
    "ModelLoadDeviceLimit",
    "ModelRequest",
    "ModelResponse",
    "ModelTxnPropertyFlag",
    "NotFoundError",
    "Options",
    "PythonModel",
    "RateLimitMode",
    "RateLimiterResource",
    "ResponseIterator",
    "ResponseSender",
    "Server",
    "Tensor",
    "TritonError",
    "UnavailableError",
    "UnknownError",
    "UnsupportedError",
    "default_memory_allocators",
    "example_model_repository",
]
