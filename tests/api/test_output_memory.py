"""Where outputs go: output_memory_type and a user MemoryAllocator."""

from __future__ import annotations

import numpy as np
import pytest

import tritonserver
from tritonserver import MemoryBuffer, MemoryType


class NumpyAllocator(tritonserver.MemoryAllocator):
    """Outputs land in numpy arrays this allocator makes and remembers."""

    def __init__(self):
        self.calls = []
        self.arrays = []

    def allocate(self, size, memory_type, memory_type_id):
        self.calls.append((size, MemoryType(memory_type), memory_type_id))
        array = np.empty(size, dtype=np.uint8)
        self.arrays.append(array)
        return MemoryBuffer(array.ctypes.data, MemoryType.CPU, 0, size, array)


def test_outputs_land_in_user_memory(server):
    allocator = NumpyAllocator()
    a = np.arange(6, dtype=np.float32)
    b = np.full(6, 2, np.float32)
    out = next(server.model("add_sub_fp32").infer(
        inputs={"INPUT0": a, "INPUT1": b}, output_memory_allocator=allocator)).outputs
    assert [c[0] for c in allocator.calls] == [24, 24]
    pointers = {arr.ctypes.data for arr in allocator.arrays}
    assert {out["OUTPUT0"].data_ptr, out["OUTPUT1"].data_ptr} == pointers
    np.testing.assert_array_equal(np.from_dlpack(out["OUTPUT0"]), a + b)
    np.testing.assert_array_equal(np.from_dlpack(out["OUTPUT1"]), a - b)


def test_user_memory_outlives_the_allocator_reference(server):
    allocator = NumpyAllocator()
    out = next(server.model("identity_fp32").infer(
        inputs={"INPUT0": np.arange(1000, dtype=np.float32)}, output_memory_allocator=allocator))
    del allocator  # the output keeps its MemoryBuffer (and array) alive
    np.testing.assert_array_equal(np.from_dlpack(out.outputs["OUTPUT0"]),
                                  np.arange(1000, dtype=np.float32))


def test_requested_memory_type_is_passed_to_the_allocator(server):
    allocator = NumpyAllocator()
    next(server.model("identity_fp32").infer(inputs={"INPUT0": np.ones(4, np.float32)},
                                             output_memory_allocator=allocator,
                                             output_memory_type=(MemoryType.CPU_PINNED, 0)))
    assert allocator.calls == [(16, MemoryType.CPU_PINNED, 0)]


@pytest.mark.parametrize("spelling", ["cpu", MemoryType.CPU, (MemoryType.CPU, 0), (1, 0)])
def test_host_output_memory_type_spellings(server, spelling):
    out = next(server.model("identity_fp32").infer(inputs={"INPUT0": np.ones(3, np.float32)},
                                                   output_memory_type=spelling))
    assert out.outputs["OUTPUT0"].memory_type == MemoryType.CPU


@pytest.mark.skipif(MemoryType.GPU in tritonserver.default_memory_allocators,
                    reason="a default GPU allocator is present")
def test_gpu_output_without_a_gpu_allocator_is_invalid(server):
    with pytest.raises(tritonserver.InvalidArgumentError, match="default_memory_allocators"):
        server.model("identity_fp32").infer(inputs={"INPUT0": np.ones(3, np.float32)},
                                            output_memory_type="gpu:0")


class Failing(tritonserver.MemoryAllocator):
    def allocate(self, size, memory_type, memory_type_id):
        raise MemoryError("no memory for you")


class TooSmall(tritonserver.MemoryAllocator):
    def allocate(self, size, memory_type, memory_type_id):
        self.array = np.empty(1, np.uint8)
        return MemoryBuffer(self.array.ctypes.data, MemoryType.CPU, 0, 1, self.array)


class NotABuffer(tritonserver.MemoryAllocator):
    def allocate(self, size, memory_type, memory_type_id):
        return "not a MemoryBuffer"


@pytest.mark.parametrize("allocator,message", [
    (Failing(), "no memory for you"), (TooSmall(), "returned 1 bytes"), (NotABuffer(), "allocator"),
], ids=["raises", "too-small", "not-a-buffer"])
def test_failing_allocator_fails_the_request_not_the_server(server, allocator, message):
    with pytest.raises(tritonserver.TritonError, match=message):
        list(server.model("identity_fp32").infer(inputs={"INPUT0": np.ones(64, np.float32)},
                                                 output_memory_allocator=allocator))
    assert server.live()
    out = next(server.model("identity_fp32").infer(inputs={"INPUT0": np.ones(2, np.float32)}))
    assert np.from_dlpack(out.outputs["OUTPUT0"]).tolist() == [1.0, 1.0]


def test_allocator_must_have_allocate(server):
    with pytest.raises(tritonserver.InvalidArgumentError):
        server.model("identity_fp32").infer(inputs={"INPUT0": np.ones(2, np.float32)},
                                            output_memory_allocator=object())


def test_default_outputs_are_aligned_and_keep_their_values(server):
    """The default allocator's outputs start at multiples of 64 bytes, small
    ones (which share one allocation with their bookkeeping), pooled ones (1
    MiB and up) and huge-page ones (4 MiB and up), and none overlaps
    another: every output is read after all of them were made."""
    model = server.model("identity_fp32")
    sizes = [1, 3, 16, 17, 255, 1000, (1 << 18) + 5, (1 << 20) + 3, 5 << 18]
    kept = []
    for n in sizes * 3:
        x = np.arange(n, dtype=np.float32) + n
        out = next(model.infer(inputs={"INPUT0": x})).outputs["OUTPUT0"]
        assert out.data_ptr % 64 == 0, (n, hex(out.data_ptr))
        kept.append((x, out))
    strings = np.array([b"s" * k for k in range(0, 70, 7)], dtype=object)
    texts = [next(server.model("identity_bytes").infer(inputs={"INPUT0": strings[:k]}))
             .outputs["OUTPUT0"] for k in range(1, len(strings) + 1)]
    for x, out in kept:
        np.testing.assert_array_equal(np.from_dlpack(out), x)
    for k, out in enumerate(texts, start=1):
        assert out.data_ptr % 64 == 0
        assert list(out.to_bytes_array()) == list(strings[:k])
