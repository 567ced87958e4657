"""Our C++ backends through the in-process API: identity, add_sub, repeat."""

from __future__ import annotations

import asyncio
import os

import numpy as np
import pytest

import tritonserver
from conftest import start_server, stats_when, stop_within


def infer_one(model, **inputs):
    responses = list(model.infer(inputs=inputs))
    assert len(responses) == 1 and responses[0].final
    return responses[0]


def test_identity_fp32_is_zero_copy_on_output(server):
    x = np.linspace(-1, 1, 17, dtype=np.float32)
    response = infer_one(server.model("identity_fp32"), INPUT0=x)
    tensor = response.outputs["OUTPUT0"]
    y = np.from_dlpack(tensor)
    np.testing.assert_array_equal(y, x)
    assert y.ctypes.data == tensor.data_ptr  # a view of the response buffer


def test_identity_accepts_lists_scalars_and_tensors(server):
    model = server.model("identity_fp32")
    out = infer_one(model, INPUT0=[1, 2, 3]).outputs["OUTPUT0"]  # takes the model's FP32
    assert out.data_type == tritonserver.DataType.FP32
    assert np.from_dlpack(out).tolist() == [1.0, 2.0, 3.0]
    t = tritonserver.Tensor.from_dlpack(np.array([5.5], np.float32))
    assert np.from_dlpack(infer_one(model, INPUT0=t).outputs["OUTPUT0"]).tolist() == [5.5]


def test_identity_non_contiguous_input(server):
    base = np.arange(20, dtype=np.float32)
    view = base[::2]
    out = infer_one(server.model("identity_fp32"), INPUT0=view).outputs["OUTPUT0"]
    np.testing.assert_array_equal(np.from_dlpack(out), view)


def test_identity_empty_input(server):
    out = infer_one(server.model("identity_fp32"), INPUT0=np.zeros(0, np.float32)).outputs["OUTPUT0"]
    assert out.shape == (0,) and np.from_dlpack(out).size == 0


def test_bytes_round_trip(server):
    values = np.array([b"", b"abc", "h\u00e9llo".encode(), b"\x00\xff\x01"], dtype=object)
    out = infer_one(server.model("identity_bytes"), INPUT0=values).outputs["OUTPUT0"]
    assert out.data_type == tritonserver.DataType.BYTES
    assert out.to_bytes_array().tolist() == values.tolist()
    text = np.array(["one", "\u4e8c", "three"])
    out = infer_one(server.model("identity_bytes"), INPUT0=text).outputs["OUTPUT0"]
    assert out.to_string_array().tolist() == ["one", "\u4e8c", "three"]
    with pytest.raises(tritonserver.UnsupportedError):
        np.from_dlpack(out)


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_add_sub(server, dtype):
    name = "add_sub_fp32" if dtype == np.float32 else "add_sub_int32"
    a = np.array([1, 2, 3, -4], dtype=dtype)
    b = np.array([10, 20, 30, 40], dtype=dtype)
    out = infer_one(server.model(name), INPUT0=a, INPUT1=b).outputs
    np.testing.assert_array_equal(np.from_dlpack(out["OUTPUT0"]), a + b)
    np.testing.assert_array_equal(np.from_dlpack(out["OUTPUT1"]), a - b)


@pytest.mark.parametrize("values", [[7], [3, 1, 4, 1, 5], []])
def test_repeat_is_decoupled(server, values):
    responses = list(server.model("repeat_int32").infer(inputs={"IN": np.array(values, np.int32)}))
    data = [r for r in responses if r.outputs]
    assert [int(np.from_dlpack(r.outputs["OUT"])[0]) for r in data] == values
    assert all(r.outputs["OUT"].shape == (1,) for r in data)
    assert responses[-1].final and all(not r.final for r in responses[:-1])


def test_async_infer(server):
    async def run():
        model = server.model("identity_fp32")
        iterators = [model.async_infer(inputs={"INPUT0": np.full(4, i, np.float32)})
                     for i in range(32)]
        results = []
        for it in iterators:
            async for response in it:
                results.append(np.from_dlpack(response.outputs["OUTPUT0"])[0])
        return results

    assert asyncio.run(run()) == list(range(32))


def test_async_decoupled(server):
    async def run():
        values = []
        async for r in server.model("repeat_int32").async_infer(inputs={"IN": np.arange(6, dtype=np.int32)}):
            if r.outputs:
                values.append(int(np.from_dlpack(r.outputs["OUT"])[0]))
        return values

    assert asyncio.run(run()) == list(range(6))


def test_batched_identity_keeps_requests_apart(server):
    model = server.model("identity_batched")
    iterators = [model.infer(inputs={"INPUT0": np.full((1, 3), i, np.float32)}) for i in range(16)]
    for i, it in enumerate(iterators):
        out = np.from_dlpack(next(it).outputs["OUTPUT0"])
        assert out.shape == (1, 3) and (out == i).all()
    stats = stats_when(model, lambda st: st["inference_count"] >= 16)
    assert stats["inference_count"] >= 16


ALL_TYPES = {
    "BOOL": np.bool_, "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32,
    "UINT64": np.uint64, "INT8": np.int8, "INT16": np.int16, "INT32": np.int32,
    "INT64": np.int64, "FP16": np.float16, "FP32": np.float32, "FP64": np.float64,
}


def test_identity_every_dtype_and_rank(tmp_path):
    names = list(ALL_TYPES) + ["STRING"]
    inputs = ",\n".join(
        f'{{ name: "INPUT{i}" data_type: TYPE_{t} dims: [ -1, -1 ] }}' for i, t in enumerate(names))
    outputs = ",\n".join(
        f'{{ name: "OUTPUT{i}" data_type: TYPE_{t} dims: [ -1, -1 ] }}' for i, t in enumerate(names))
    model_dir = tmp_path / "identity_all"
    os.makedirs(model_dir / "1")
    (model_dir / "config.pbtxt").write_text(
        f'backend: "identity"\nmax_batch_size: 0\ninput [\n{inputs}\n]\noutput [\n{outputs}\n]\n')
    s = start_server(model_repository=str(tmp_path))
    try:
        rng = np.random.default_rng(0)
        feed = {f"INPUT{i}": (rng.random((2, 3)) * 100).astype(t) for i, t in enumerate(ALL_TYPES.values())}
        feed[f"INPUT{len(ALL_TYPES)}"] = np.array([[b"a", b"bc", b""], [b"d", b"e", b"f"]], dtype=object)
        out = next(s.model("identity_all").infer(inputs=feed)).outputs
        for i in range(len(ALL_TYPES)):
            np.testing.assert_array_equal(np.from_dlpack(out[f"OUTPUT{i}"]), feed[f"INPUT{i}"])
        last = len(ALL_TYPES)
        assert out[f"OUTPUT{last}"].to_bytes_array().tolist() == feed[f"INPUT{last}"].tolist()
        del out
    finally:
        stop_within(s)


@pytest.mark.parametrize("make", [
    lambda a: np.asfortranarray(a.reshape(4, 4)).reshape(-1, order="F"),  # not C-contiguous
    lambda a: a.astype(">f4"),                                           # big-endian
    lambda a: np.frombuffer(a.tobytes(), dtype=np.float32),               # read-only buffer
    lambda a: np.broadcast_to(a[:1], (16,)),                              # stride 0
], ids=["fortran", "big-endian", "read-only", "broadcast"])
def test_identity_unusual_numpy_inputs(server, make):
    a = np.arange(16, dtype=np.float32)
    x = make(a)
    out = infer_one(server.model("identity_fp32"), INPUT0=x).outputs["OUTPUT0"]
    np.testing.assert_array_equal(np.from_dlpack(out), np.asarray(x, dtype=np.float32))


def test_input_memory_is_read_in_place_and_kept_alive(server):
    # The request references the caller's array; dropping every other
    # reference right after sending must not free it under the core.
    model = server.model("identity_fp32")
    iterators = [model.infer(inputs={"INPUT0": np.full(1 << 16, i, np.float32)}) for i in range(8)]
    for i, it in enumerate(iterators):
        out = np.from_dlpack(next(it).outputs["OUTPUT0"])
        assert out.shape == (1 << 16,) and (out == i).all()


def test_async_on_a_loop_without_add_reader(server):
    # Loops that cannot watch a file descriptor are woken under the GIL
    # instead of through the eventfd; both deliver every response in order.
    class NoReaderLoop(asyncio.SelectorEventLoop):
        refused = 0

        def add_reader(self, *args, **kwargs):
            NoReaderLoop.refused += 1
            raise NotImplementedError

    async def run():
        # The sleeping request makes the loop wait (a waiter needs a waker).
        slow = server.model("sleep_us").async_infer(inputs={"DELAY_US": np.array([20_000])})
        waited = [int(np.from_dlpack(r.outputs["WAITED_US"])[0]) async for r in slow]
        model = server.model("repeat_int32")
        out = []
        async for r in model.async_infer(inputs={"IN": np.arange(10, dtype=np.int32)}):
            if r.outputs:
                out.append(int(np.from_dlpack(r.outputs["OUT"])[0]))
        return waited, out

    loop = NoReaderLoop()
    try:
        waited, out = loop.run_until_complete(run())
    finally:
        loop.close()
    assert waited[0] >= 20_000 and out == list(range(10)) and NoReaderLoop.refused == 1
