"""Whether this process can see an NVIDIA GPU, without initialising CUDA.

Read from the device files the NVIDIA driver creates (``/dev/nvidia0``...)
and from ``CUDA_VISIBLE_DEVICES`` (empty or ``-1`` hides every GPU). Used to
leave GPU-only features (GPU metrics, the pinned memory pool, the default
GPU allocator) off where they could only fail.
"""

from __future__ import annotations

import functools
import os
import re

_DEVICE_FILE = re.compile(r"nvidia\d+$")


@functools.lru_cache(maxsize=None)
def present() -> bool:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1", "NoDevFiles"):
        return False
    try:
        return any(_DEVICE_FILE.match(name) for name in os.listdir("/dev"))
    except OSError:
        return False
