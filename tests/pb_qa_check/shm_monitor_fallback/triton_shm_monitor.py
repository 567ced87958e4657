"""Stand-in for python_backend's `triton_shm_monitor` (a pybind11 module Triton's
QA builds from python_backend/src/shm_monitor), which qa/common/shm_util.py's
ShmLeakDetector imports: `SharedMemoryManager(region).free_memory()`.

The python backend's shared memory region is a boost::interprocess
managed_external_buffer at the start of the region; its rbtree_best_fit
header holds `m_allocated` followed by `m_size` (the region's size). The real
module returns `m_size - m_allocated - <size of the header>`; this returns
`m_size - m_allocated`, the same number less a constant, which is all the
leak probe compares (free memory before and after a test).
"""

import os
import struct

_HEAD_WORDS = 64


class SharedMemoryManager:
    def __init__(self, name: str) -> None:
        self._path = name if name.startswith("/") else os.path.join("/dev/shm", name)
        size = os.path.getsize(self._path)
        words = self._words()
        try:
            # m_size: the header's word equal to the region's size; m_allocated before it
            self._index = words.index(size, 1)
        except ValueError:
            raise RuntimeError(f"{self._path}: no boost rbtree_best_fit header found "
                               f"(no word equal to the region size {size})") from None

    def _words(self):
        with open(self._path, "rb") as f:
            head = f.read(8 * _HEAD_WORDS)
        return list(struct.unpack_from(f"<{len(head) // 8}Q", head))

    def free_memory(self) -> int:
        words = self._words()
        return words[self._index] - words[self._index - 1]
