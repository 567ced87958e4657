"""Tensor and MemoryBuffer without a server: DLPack both ways, BYTES."""

from __future__ import annotations

import numpy as np
import pytest

import tritonserver
from tritonserver import DataType, MemoryType, Tensor


def test_from_dlpack_references_in_place():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = Tensor.from_dlpack(a)
    assert t.data_type == DataType.FP32 and tuple(t.shape) == (3, 4)
    assert t.data_ptr == a.ctypes.data and t.size == a.nbytes
    assert t.memory_type == MemoryType.CPU
    b = np.from_dlpack(t)
    assert b.ctypes.data == a.ctypes.data
    a[0, 0] = 42
    assert b[0, 0] == 42


def test_dlpack_keeps_the_owner_alive():
    t = Tensor.from_dlpack(np.arange(1000, dtype=np.int64))  # the array has no other owner
    view = np.from_dlpack(t)
    del t
    np.arange(1000, dtype=np.int64) * 0  # churn the allocator
    assert view[999] == 999 and view.sum() == sum(range(1000))


def test_non_contiguous_dlpack_is_refused():
    a = np.arange(10, dtype=np.float32)[::2]
    with pytest.raises(tritonserver.InvalidArgumentError):
        Tensor.from_dlpack(a)


def test_every_numeric_dtype_round_trips():
    for dtype in (np.bool_, np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16,
                  np.int32, np.int64, np.float16, np.float32, np.float64):
        a = np.ones((2, 3), dtype=dtype)
        t = Tensor.from_dlpack(a)
        np.testing.assert_array_equal(np.from_dlpack(t), a)


def test_bytes_tensor_round_trip():
    t = Tensor.from_bytes_array([b"a", b"", "z\u00fc".encode()])
    assert t.data_type == DataType.BYTES and tuple(t.shape) == (3,)
    assert t.to_bytes_array().tolist() == [b"a", b"", "z\u00fc".encode()]
    s = Tensor.from_string_array(np.array([["x", "yy"], ["", "\u00e9"]]))
    assert s.to_string_array().tolist() == [["x", "yy"], ["", "\u00e9"]]


def test_bytes_tensor_rejects_other_objects():
    with pytest.raises(tritonserver.InvalidArgumentError):
        Tensor.from_bytes_array(np.array([1, 2], dtype=object))


def test_truncated_bytes_are_an_error():
    raw = np.array([9, 0, 0, 0, 65], dtype=np.uint8)  # claims 9 bytes, has 1
    t = Tensor(DataType.BYTES, (1,), tritonserver.MemoryBuffer(raw.ctypes.data, MemoryType.CPU, 0, 5, raw))
    with pytest.raises(tritonserver.InvalidArgumentError):
        t.to_bytes_array()


@pytest.mark.parametrize("spec,expected", [
    ("cpu", (MemoryType.CPU, 0)), ("gpu:1", (MemoryType.GPU, 1)), ("cuda", (MemoryType.GPU, 0)),
    (MemoryType.CPU_PINNED, (MemoryType.CPU_PINNED, 0)), ((MemoryType.GPU, 2), (MemoryType.GPU, 2)),
    ((2, 3), (MemoryType.GPU, 3)),
])
def test_device_spellings(spec, expected):
    from tritonserver._tensor import parse_device

    assert parse_device(spec) == expected


def test_bad_device_spelling():
    from tritonserver._tensor import parse_device

    with pytest.raises(tritonserver.InvalidArgumentError):
        parse_device("tpu:0")


def test_to_host_on_cpu_is_identity():
    t = Tensor.from_dlpack(np.zeros(3, np.float32))
    assert t.to_host() is t and t.to_device("cpu") is t


def test_memory_buffer_owner_is_what_keeps_the_memory():
    a = np.arange(16, dtype=np.uint8)
    buffer = tritonserver.MemoryBuffer.from_dlpack(a)
    assert buffer.data_ptr == a.ctypes.data and buffer.size == 16
    address, owner = buffer.data_ptr, buffer.owner
    del a, buffer
    np.zeros(1 << 16, np.uint8)  # churn the allocator
    # The owner alone keeps the bytes readable at the buffer's address.
    assert owner is not None
    assert list((np.ctypeslib.ctypes.c_uint8 * 16).from_address(address)) == list(range(16))


def test_bytes_of_ever_new_sizes_keep_no_memory():
    """Reading BYTES tensors of 2,000 distinct sizes leaves nothing behind
    (a view made as a ctypes array type per size did: ctypes keeps each)."""
    import gc
    import tracemalloc

    def read(n: int) -> None:
        t = Tensor.from_bytes_array(np.array([b"x" * n], dtype=object))
        assert t.to_bytes_array()[0] == b"x" * n

    tracemalloc.start()
    try:
        # Warm-up, traced too: what the interpreter or numpy allocate once
        # on the way (about 2.4 KB on Python 3.9 with numpy 1.26, whatever
        # the number of sizes) is not what this test looks for.
        for n in range(1, 2001):
            read(n)
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for n in range(2001, 4001):
            read(n)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 1024, f"{grown} B stayed after reading 2,000 tensors"


# ---- Tensor.__dlpack__: the binding's method and the Python one behind it ------------------


def test_dlpack_is_the_bindings_method_with_the_documented_signature():
    import inspect

    assert type(Tensor.__dlpack__).__name__ == "method_descriptor"
    params = inspect.signature(Tensor.__dlpack__).parameters
    assert list(params) == ["self", "stream", "max_version", "dl_device", "copy"]
    assert all(params[p].kind is inspect.Parameter.KEYWORD_ONLY and params[p].default is None
               for p in ("stream", "max_version", "dl_device", "copy"))


def test_dlpack_exports_in_place_with_every_keyword_numpy_and_others_pass():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = Tensor.from_dlpack(a)
    for kwargs in ({}, {"stream": None}, {"stream": 5}, {"max_version": (1, 0)}, {"copy": None},
                   {"copy": False}, {"dl_device": None, "copy": None, "max_version": (1, 0)},
                   {"dl_device": (1, 0)}):  # the tensor's own device
        b = np.from_dlpack(_Producer(t, kwargs))
        assert b.ctypes.data == a.ctypes.data and b.shape == (2, 3), kwargs
    bound = t.__dlpack__  # a bound method calls the same way
    assert type(bound()).__name__ == "PyCapsule"


class _Producer:
    """Calls `tensor.__dlpack__` with `kwargs` added to what numpy passes."""

    def __init__(self, tensor, kwargs):
        self.tensor, self.kwargs = tensor, kwargs

    def __dlpack__(self, **given):
        return self.tensor.__dlpack__(**{**given, **self.kwargs})

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()


def test_dlpack_answers_what_it_cannot_export_as_the_python_method_does():
    t = Tensor.from_dlpack(np.arange(4, dtype=np.float32))
    with pytest.raises(tritonserver.UnsupportedError, match="copy=True"):
        t.__dlpack__(copy=True)
    with pytest.raises(tritonserver.UnsupportedError, match="another device"):
        t.__dlpack__(dl_device=(2, 0))
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        t.__dlpack__(bogus=1)
    with pytest.raises(TypeError, match="positional"):
        t.__dlpack__(None)
    with pytest.raises(tritonserver.UnsupportedError, match="BYTES"):
        np.from_dlpack(Tensor.from_bytes_array([b"ab", b"c"]))
    with pytest.raises(ValueError, match="not a valid DataType"):
        Tensor(99, (4,), t.memory_buffer).__dlpack__()
    with pytest.raises(AttributeError, match="memory_type"):
        Tensor(DataType.FP32, (4,), "not a buffer").__dlpack__()
    with pytest.raises(TypeError):
        Tensor.__dlpack__(object())  # not a Tensor


def test_dlpack_of_tensors_built_by_hand():
    a = np.arange(6, dtype=np.int32)
    buffer = Tensor.from_dlpack(a).memory_buffer

    class Sub(Tensor):
        pass

    for tensor in (Tensor(DataType.INT32, [2, 3], buffer),  # a list shape
                   Tensor(int(DataType.INT32), (6,), buffer),  # a plain int type
                   Sub(DataType.INT32, (3, 2), buffer)):
        b = np.from_dlpack(tensor)
        assert b.ctypes.data == a.ctypes.data and b.size == 6
        assert tuple(b.shape) == tuple(tensor.shape)
    assert type(Tensor(DataType.BF16, (3,), buffer).__dlpack__()).__name__ == "PyCapsule"
    with pytest.raises(ValueError):  # a negative dimension: numpy's refusal, as before
        np.from_dlpack(Tensor(DataType.INT32, (2, -3), buffer))
