"""One inference through our Python API, as the workers measure it: what a
user writes, ``next(model.infer(inputs=...))`` or ``async for ... in
model.async_infer(...)``, the output read through ``np.from_dlpack``; and
the same through system shared memory regions registered with the Server."""

from __future__ import annotations

from multiprocessing import shared_memory

import numpy as np

from tsbench import loops

INPUT = "INPUT0"
OUTPUT = "OUTPUT0"


def infer_call(model, x: np.ndarray, input_name: str = INPUT,
               output_name: str = OUTPUT) -> loops.Call:
    """One synchronous inference of `model` (a tritonserver Model) on x."""
    inputs, name, from_dlpack = {input_name: x}, output_name, np.from_dlpack

    def call() -> None:
        response = next(model.infer(inputs=inputs))
        from_dlpack(response.outputs[name])

    return call


def async_infer_call(model, x: np.ndarray) -> loops.AsyncCall:
    """One inference of `model` on x, awaited on the running event loop."""
    inputs, name, from_dlpack = {INPUT: x}, OUTPUT, np.from_dlpack

    async def acall() -> None:
        async for response in model.async_infer(inputs=inputs):
            from_dlpack(response.outputs[name])

    return acall


def output(model, x: np.ndarray, input_name: str = INPUT,
           output_name: str = OUTPUT) -> np.ndarray:
    """The output of one inference, for verify()."""
    return np.from_dlpack(next(model.infer(inputs={input_name: x})).outputs[output_name])


class ShmCall:
    """One inference of `model` with its input and output in two POSIX shared
    memory regions this process made and registered with `server`. x is
    written into the input region once, as a producer would have put it
    there; each call infers from the region and returns the output as a
    view of the output region (the C API's large16MiB copies no input
    either: it hands the core its buffer)."""

    def __init__(self, server, model, x: np.ndarray):
        self.server = server
        self.blocks = [shared_memory.SharedMemory(create=True, size=x.nbytes) for _ in "io"]
        self.names = ["tsbench_input", "tsbench_output"]
        for name, block in zip(self.names, self.blocks):
            server.register_system_shared_memory(name, "/" + block.name, x.nbytes)
        self.model = model
        staged = np.ndarray(x.shape, x.dtype, buffer=self.blocks[0].buf)
        np.copyto(staged, x)
        del staged  # no view may outlive the block's close()
        self.inputs = {INPUT: server.system_shared_memory_tensor(self.names[0], "FP32",
                                                                 x.shape)}
        self.allocator = server.system_shared_memory_outputs({OUTPUT: self.names[1]})

    def __call__(self) -> np.ndarray:
        response = next(self.model.infer(inputs=self.inputs,
                                         output_memory_allocator=self.allocator))
        return np.from_dlpack(response.outputs[OUTPUT])

    def close(self) -> None:
        for name in self.names:
            self.server.unregister_system_shared_memory(name)
        for block in self.blocks:
            block.close()
            block.unlink()
