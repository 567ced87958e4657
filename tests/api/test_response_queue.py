"""response_queue: responses reach the caller's queue on arrival, as well as
the iterator; sync infer takes a queue.SimpleQueue, async_infer an
asyncio.Queue."""

from __future__ import annotations

import asyncio
import queue

import numpy as np

import tritonserver


def drain(q: "queue.SimpleQueue", timeout: float = 30.0) -> list:
    out = []
    while True:
        response = q.get(timeout=timeout)
        out.append(response)
        if response.final:
            return out


def values(responses) -> list:
    return [int(np.from_dlpack(r.outputs["OUT"])[0]) for r in responses if r.outputs]


def test_sync_queue_and_iterator_see_the_same_responses(server):
    q = queue.SimpleQueue()
    it = server.model("repeat_int32").infer(inputs={"IN": np.array([5, 6, 7], np.int32)},
                                            response_queue=q)
    from_iterator = list(it)
    from_queue = drain(q)
    assert values(from_iterator) == values(from_queue) == [5, 6, 7]
    assert [a is b for a, b in zip(from_iterator, from_queue)] == [True] * len(from_queue)


def test_sync_queue_without_iterating(server):
    # The iterator is dropped at once: the request is not cancelled and every
    # response still reaches the queue, in order.
    q = queue.SimpleQueue()
    server.model("repeat_int32").infer(inputs={"IN": np.arange(50, dtype=np.int32)},
                                       response_queue=q)
    assert values(drain(q)) == list(range(50))


def test_sync_queue_gets_errors_too(server):
    q = queue.SimpleQueue()
    it = server.model("add_sub_fp32").infer(
        inputs={"INPUT0": np.zeros(2, np.float32), "INPUT1": np.zeros(3, np.float32)},
        response_queue=q, raise_on_error=False)
    (response,) = drain(q)
    assert isinstance(response.error, tritonserver.InvalidArgumentError)
    assert next(it) is response


def test_async_queue(server):
    async def run():
        q = asyncio.Queue()
        it = server.model("repeat_int32").async_infer(
            inputs={"IN": np.array([9, 8, 7, 6], np.int32)}, response_queue=q)
        from_iterator = [r async for r in it]
        from_queue = []
        while not q.empty():
            from_queue.append(q.get_nowait())
        return from_iterator, from_queue

    from_iterator, from_queue = asyncio.run(run())
    assert values(from_iterator) == values(from_queue) == [9, 8, 7, 6]
    assert from_queue[-1].final


def test_async_queue_without_iterating(server):
    async def run():
        q = asyncio.Queue()
        server.model("repeat_int32").async_infer(inputs={"IN": np.arange(20, dtype=np.int32)},
                                                 response_queue=q)
        out = []
        while True:
            response = await asyncio.wait_for(q.get(), 30)
            out.append(response)
            if response.final:
                return out

    assert values(asyncio.run(run())) == list(range(20))
