"""A small scenario for valgrind (tests/reliability/valgrind.sh): start a
server, infer sync, async, BYTES, decoupled, with a user allocator, a
failing request and a response queue, then stop. Small on purpose: under
memcheck the core starts in about a minute."""

from __future__ import annotations

import asyncio
import queue

import numpy as np

import tritonserver
from tritonserver import MemoryBuffer, MemoryType


class Allocator(tritonserver.MemoryAllocator):
    def allocate(self, size, memory_type, memory_type_id):
        array = np.empty(size, np.uint8)
        return MemoryBuffer(array.ctypes.data, MemoryType.CPU, 0, size, array)


def main() -> None:
    s = tritonserver.Server(model_repository=tritonserver.example_model_repository(),
                            exit_timeout=30, log_error=False).start(wait_until_ready=True)
    x = np.arange(8, dtype=np.float32)
    for _ in range(3):
        out = next(s.model("identity_fp32").infer(inputs={"INPUT0": x}))
        assert np.from_dlpack(out.outputs["OUTPUT0"]).tolist() == x.tolist()
    out = next(s.model("identity_bytes").infer(inputs={"INPUT0": np.array(["a", b"bc"], object)}))
    assert out.outputs["OUTPUT0"].to_bytes_array().tolist() == [b"a", b"bc"]
    q: queue.SimpleQueue = queue.SimpleQueue()
    values = [int(np.from_dlpack(r.outputs["OUT"])[0])
              for r in s.model("repeat_int32").infer(inputs={"IN": np.arange(3, dtype=np.int32)},
                                                     response_queue=q) if r.outputs]
    assert values == [0, 1, 2]
    out = next(s.model("identity_fp32").infer(inputs={"INPUT0": x},
                                              output_memory_allocator=Allocator()))
    assert np.from_dlpack(out.outputs["OUTPUT0"]).tolist() == x.tolist()
    try:
        next(s.model("identity_fp32").infer(inputs={"INPUT0": np.zeros(2, np.int32)}))
    except tritonserver.InvalidArgumentError:
        pass

    async def run_async():
        return [r async for r in s.model("identity_fp32").async_infer(inputs={"INPUT0": x})]

    assert len(asyncio.run(run_async())) == 1
    del out
    s.stop()
    print("SCENARIO DONE")


if __name__ == "__main__":
    main()
