"""Reads memcheck logs; counts definite leaks and error records, and fails
when one is in our code (the binding or our backends): an error whose
faulting frame is ours, or a leak whose allocating frame (the first one
past malloc/new) is ours. Our code on the stack below a core or CPython
frame does not count: every core call from Python passes through the
binding."""

from __future__ import annotations

import re
import sys

OURS = re.compile(r"triton_bindings|libtriton_(identity|add_sub|repeat|accumulate|sleep)\.so"
                  r"|tritonpy::")


ALLOCATORS = re.compile(r"\b(malloc|calloc|realloc|memalign|posix_memalign|aligned_alloc|strdup|"
                        r"operator new|operator new\[\])\b")


def deciding_frame(block: str) -> str:
    """The frame that makes a record someone's: the first one past the
    allocator functions."""
    frames = [line.strip() for line in block.splitlines()
              if line.strip().startswith(("at 0x", "by 0x"))]
    for frame in frames:
        if not ALLOCATORS.search(frame):
            return frame
    return frames[0] if frames else ""


def records(text: str) -> list[str]:
    """Blocks of lines between blank '==pid==' lines."""
    blocks, current = [], []
    for line in text.splitlines():
        body = re.sub(r"^==\d+== ?", "", line)
        if body.strip():
            current.append(body)
        elif current:
            blocks.append("\n".join(current))
            current = []
    if current:
        blocks.append("\n".join(current))
    return blocks


def main(paths: list[str]) -> int:
    ours, definite, errors = [], 0, 0
    for path in paths:
        with open(path, errors="replace") as f:
            for block in records(f.read()):
                first = block.splitlines()[0]
                is_leak = "definitely lost" in first
                is_error = first.startswith(("Invalid ", "Conditional jump", "Use of uninit",
                                             "Mismatched free", "Syscall param"))
                if not (is_leak or is_error):
                    continue
                definite += is_leak
                errors += is_error
                if OURS.search(deciding_frame(block)):
                    ours.append(block)
    print(f"valgrind: {definite} definite-leak record(s), {errors} error record(s) in all; "
          f"{len(ours)} in our code")
    for block in ours:
        print("----\n" + block)
    return 1 if ours else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
