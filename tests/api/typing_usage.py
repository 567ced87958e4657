"""Typed code written against the reference page, for mypy (tests/api/test_typing.py).
Never run: only type-checked."""

from __future__ import annotations

import asyncio
import queue
from typing import Any

import numpy as np

import tritonserver
from tritonserver import (DataType, InferenceRequest, InferenceResponse, MemoryAllocator,
                          MemoryBuffer, MemoryType, Model, ModelControlMode, Options, Server,
                          Tensor)


class NumpyAllocator(MemoryAllocator):
    def allocate(self, size: int, memory_type: MemoryType, memory_type_id: int) -> MemoryBuffer:
        return MemoryBuffer.from_dlpack(np.zeros(size, dtype=np.uint8))


def serve(repository: str) -> list[float]:
    options = Options(model_repository=repository, model_control_mode=ModelControlMode.EXPLICIT,
                      log_info=False, exit_timeout=10)
    server: Server = Server(options).start(wait_until_ready=True, timeout=30.0)
    server = Server(model_repository=repository, log_error=True)
    assert server.live() and server.ready()
    metadata: dict[str, Any] = server.metadata()
    text: str = server.metrics(tritonserver.MetricFormat.PROMETHEUS)
    model: Model = server.load("identity_fp32")
    models: dict[tuple[str, int], Model] = server.models(exclude_not_ready=True)
    request: InferenceRequest = model.create_request(inputs={"INPUT0": np.ones(4, np.float32)})
    request.request_id = "typed"
    request.parameters["scale"] = 2
    request.output_memory_type = MemoryType.CPU
    request.output_memory_allocator = NumpyAllocator()
    request.response_queue = queue.SimpleQueue()
    values: list[float] = []
    for response in model.infer(request):
        assert isinstance(response, InferenceResponse)
        tensor: Tensor = response.outputs["OUTPUT0"]
        assert tensor.data_type == DataType.FP32 and tensor.memory_type == MemoryType.CPU
        values.extend(float(v) for v in np.from_dlpack(tensor))
        host: Tensor = tensor.to_host()
        shape = list(host.shape)
        assert shape and host.size > 0 and host.data_ptr != 0
    strings = Tensor.from_string_array(["a", "b"]).to_string_array()
    assert strings.tolist() == ["a", "b"] and Tensor.from_bytes_array([b"x"]).memory_buffer.size
    config: dict[str, Any] = model.config()
    stats: dict[str, Any] = model.statistics()
    flags = model.batch_properties() | model.transaction_properties()
    server.unload(model, wait_until_unloaded=True)
    server.stop()
    assert metadata and text and models and config and stats and flags is not None
    return values


async def serve_async(model: Model) -> int:
    count = 0
    responses = model.async_infer(inputs={"INPUT0": np.ones(4, np.float32)},
                                  response_queue=asyncio.Queue())
    async for response in responses:
        count += len(response.outputs)
        if response.error is not None:
            responses.cancel()
    return count
