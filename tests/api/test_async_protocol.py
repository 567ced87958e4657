"""AsyncResponseIterator.__anext__ as asyncio programs use it: awaited in
``async for``, run as a task of its own, bounded by wait_for, cancelled
while it waits, driven by hand, and on many event loops in turn. What it
returns is the binding's awaitable (csrc/bindings/async_stream.cc); these
are the promises the coroutine it replaced kept."""

from __future__ import annotations

import asyncio
import collections.abc
import os
import time

import numpy as np
import pytest

import tritonserver

DELAY_US = 300_000  # long enough to be waiting when the test acts


def sleep_inputs(us: int = DELAY_US) -> dict:
    return {"DELAY_US": np.array([us], np.int64)}


def waited_us(response) -> int:
    return int(np.from_dlpack(response.outputs["WAITED_US"])[0])


def test_anext_runs_as_a_task_of_its_own(server):
    model = server.model("identity_fp32")
    x = np.arange(16, dtype=np.float32)

    async def run():
        it = model.async_infer(inputs={"INPUT0": x})
        step = it.__anext__()
        assert isinstance(step, collections.abc.Coroutine)  # what create_task requires
        response = await asyncio.create_task(step)
        with pytest.raises(StopAsyncIteration):
            await it.__anext__()
        return response

    response = asyncio.run(run())
    assert response.final and response.error is None
    np.testing.assert_array_equal(np.from_dlpack(response.outputs["OUTPUT0"]), x)


def test_an_awaited_anext_is_not_awaited_again(server):
    model = server.model("identity_fp32")

    async def run():
        it = model.async_infer(inputs={"INPUT0": np.ones(16, np.float32)})
        step = it.__anext__()
        first = await step
        with pytest.raises(RuntimeError, match="already awaited"):
            await step
        return first

    assert asyncio.run(run()).final


def test_a_task_cancelled_while_waiting_leaves_the_iterator_usable(server):
    model = server.model("sleep_us")

    async def run():
        it = model.async_infer(inputs=sleep_inputs())
        task = asyncio.create_task(it.__anext__())
        await asyncio.sleep(0.05)  # the task waits on its future now
        assert it._waiter is not None
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert it._waiter is None  # the wait ended with the task
        # The request was not cancelled (only the wait was): its response still comes.
        return [r async for r in it]

    (response,) = asyncio.run(run())
    assert response.error is None and waited_us(response) >= DELAY_US


def test_wait_for_times_out_and_the_response_comes_later(server):
    model = server.model("sleep_us")

    async def run():
        it = model.async_infer(inputs=sleep_inputs())
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(it.__anext__(), 0.02)
        return await asyncio.wait_for(it.__anext__(), 30)

    response = asyncio.run(run())
    assert response.final and waited_us(response) >= DELAY_US


def test_cancelling_the_request_ends_a_waiting_async_for(server):
    model = server.model("sleep_us")

    async def run():
        it = model.async_infer(inputs=sleep_inputs(5_000_000), raise_on_error=False)
        asyncio.get_running_loop().call_later(0.05, it.cancel)
        return [r async for r in it]

    (response,) = asyncio.run(run())
    assert isinstance(response.error, tritonserver.CancelledError)


def test_throw_and_close_end_the_wait(server):
    model = server.model("sleep_us")

    async def run():
        it = model.async_infer(inputs=sleep_inputs())
        step = it.__anext__()
        future = step.send(None)  # no response yet: the future a task would wait on
        assert isinstance(future, asyncio.Future) and future._asyncio_future_blocking
        assert it._waiter is future
        with pytest.raises(ValueError, match="from the caller"):
            step.throw(ValueError("from the caller"))
        assert it._waiter is None
        with pytest.raises(RuntimeError, match="already awaited"):
            step.send(None)
        other = it.__anext__()
        other.send(None)
        assert other.close() is None and it._waiter is None
        with pytest.raises(TypeError):
            it.__anext__().throw(42)
        return await it.__anext__()

    assert asyncio.run(run()).final


def test_responses_of_a_decoupled_model_in_order(server):
    model = server.model("repeat_int32")
    values = list(range(40))

    async def run():
        return [r async for r in model.async_infer(inputs={"IN": np.array(values, np.int32)})]

    responses = asyncio.run(run())
    got = [int(np.from_dlpack(r.outputs["OUT"])[0]) for r in responses if r.outputs]
    assert got == values and responses[-1].final


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_event_loops_in_turn_keep_no_descriptor(server):
    model = server.model("identity_fp32")
    x = np.ones(16, np.float32)

    async def one():
        return [r async for r in model.async_infer(inputs={"INPUT0": x})]

    asyncio.run(one())  # the first loop's descriptors
    before = open_fds()
    for _ in range(20):
        assert len(asyncio.run(one())) == 1
    assert open_fds() <= before + 1


def test_async_infer_outside_a_running_loop_sends_nothing(server):
    model = server.model("identity_fp32")
    x = np.ones(16, np.float32)

    def count() -> int:
        return model.statistics()["model_stats"][0]["inference_count"]

    def settled() -> int:
        # The core counts a request a moment after its response.
        last = count()
        while True:
            time.sleep(0.1)
            now = count()
            if now == last:
                return now
            last = now

    next(model.infer(inputs={"INPUT0": x}))
    before = settled()
    with pytest.raises(RuntimeError, match="no running event loop"):
        model.async_infer(inputs={"INPUT0": x})
    assert settled() == before


@pytest.mark.parametrize("inputs, error", [
    ({"NOT_AN_INPUT": np.ones(16, np.float32)}, tritonserver.InvalidArgumentError),
    ({"INPUT0": np.ones(16, np.int64)}, tritonserver.InvalidArgumentError),
    ({"INPUT0": np.ones((2, 16), np.float32)}, tritonserver.InvalidArgumentError),
])
def test_bad_inputs_raise_from_async_infer_and_the_server_serves_on(server, inputs, error):
    model = server.model("identity_fp32")
    x = np.arange(16, dtype=np.float32)

    async def run():
        with pytest.raises(error):
            model.async_infer(inputs=inputs)
        return [r async for r in model.async_infer(inputs={"INPUT0": x})]

    (response,) = asyncio.run(run())
    np.testing.assert_array_equal(np.from_dlpack(response.outputs["OUTPUT0"]), x)
    assert server.ready()
