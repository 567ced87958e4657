"""One inference through our Python API, as the workers measure it: what a
user writes, ``next(model.infer(inputs=...))`` or ``async for ... in
model.async_infer(...)``, the output read through ``np.from_dlpack``."""

from __future__ import annotations

import numpy as np

from tsbench import loops

INPUT = "INPUT0"
OUTPUT = "OUTPUT0"


def infer_call(model, x: np.ndarray) -> loops.Call:
    """One synchronous inference of `model` (a tritonserver Model) on x."""
    inputs, name, from_dlpack = {INPUT: x}, OUTPUT, np.from_dlpack

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


def output(model, x: np.ndarray) -> np.ndarray:
    """The output of one inference, for verify()."""
    return np.from_dlpack(next(model.infer(inputs={INPUT: x})).outputs[OUTPUT])
