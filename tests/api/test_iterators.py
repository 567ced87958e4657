"""ResponseIterator and AsyncResponseIterator built directly with the
reference's signatures: (model, request, user_queue, raise_on_error[, loop])."""

from __future__ import annotations

import asyncio
import queue

import numpy as np
import pytest

import tritonserver


def repeat_request(server, values):
    model = server.model("repeat_int32")
    return model, tritonserver.InferenceRequest(
        model, inputs={"IN": np.array(values, np.int32)}, request_id="direct")


def values_of(responses):
    return [int(np.from_dlpack(r.outputs["OUT"])[0]) for r in responses if r.outputs]


def test_sync_iterator_built_directly_sends_the_request(server):
    model, request = repeat_request(server, [3, 1, 4])
    it = tritonserver.ResponseIterator(model, request)
    responses = list(it)
    assert values_of(responses) == [3, 1, 4]
    assert all(r.request_id == "direct" and r.model.name == "repeat_int32" for r in responses)
    assert responses[-1].final


def test_sync_iterator_user_queue_and_raise_on_error(server):
    model = server.model("add_sub_fp32")
    q: queue.SimpleQueue = queue.SimpleQueue()
    # Shapes the backend refuses while executing (the core accepts them).
    bad = tritonserver.InferenceRequest(model, inputs={"INPUT0": np.ones(4, np.float32),
                                                       "INPUT1": np.ones(3, np.float32)})
    it = tritonserver.ResponseIterator(model, bad, q, raise_on_error=False)
    (response,) = list(it)  # the error is in the response, not raised
    assert isinstance(response.error, tritonserver.InvalidArgumentError)
    assert isinstance(q.get(timeout=10).error, tritonserver.InvalidArgumentError)
    with pytest.raises(tritonserver.InvalidArgumentError):
        list(tritonserver.ResponseIterator(model, bad, raise_on_error=True))


def test_async_iterator_built_directly(server):
    async def run():
        model, request = repeat_request(server, [5, 6])
        q: asyncio.Queue = asyncio.Queue()
        it = tritonserver.AsyncResponseIterator(model, request, q)
        got = [r async for r in it]
        queued = [q.get_nowait() for _ in range(q.qsize())]
        return values_of(got), values_of(queued)

    assert asyncio.run(run()) == ([5, 6], [5, 6])


def test_async_iterator_with_an_explicit_loop(server):
    loop = asyncio.new_event_loop()
    try:
        model, request = repeat_request(server, [7])
        it = tritonserver.AsyncResponseIterator(model, request, loop=loop)

        async def drain():
            return [r async for r in it]

        assert values_of(loop.run_until_complete(drain())) == [7]
    finally:
        loop.close()


@pytest.mark.parametrize("request_value", [None, {"inputs": {}}, "repeat_int32"])
def test_an_iterator_needs_an_inference_request(server, request_value):
    with pytest.raises(tritonserver.InvalidArgumentError, match="InferenceRequest"):
        tritonserver.ResponseIterator(server.model("repeat_int32"), request_value)
    assert server.live()
