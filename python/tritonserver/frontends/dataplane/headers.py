"""Request headers forwarded as request parameters, protocol-free: Triton's
``--http-header-forward-pattern`` and ``--grpc-header-forward-pattern``.

Triton puts ``(?i)`` before the pattern (header names are case-insensitive)
and forwards a header whose name the pattern finds anywhere in it (RE2's
PartialMatch); a pattern that starts with ``(?-i)`` is case-sensitive again
(qa/L0_parameters test_grpc_header_forward_pattern_case_sensitive). Headers
named like a parameter Triton reads itself are refused (server PR #8763).
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Optional

from tritonserver import InvalidArgumentError

# Triton's kReservedParameterKeys: the parameters it reads itself.
RESERVED_PARAMETERS = frozenset({"sequence_id", "sequence_start", "sequence_end", "priority",
                                 "timeout", "headers", "binary_data_output"})

# RE2's global flag groups at the start of a pattern: (?i), (?-i), (?is-m)...
_LEADING_FLAGS = re.compile(r"\(\?([imsU]*)(?:-([imsU]*))?\)")
_FLAG = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL}


def forward_regex(pattern: str, what: str) -> Optional["re.Pattern[str]"]:
    """The compiled header forward pattern (None when empty), as Triton reads
    it: case-insensitive unless the pattern's leading flags say otherwise.
    ``what``: the option's name, for the error."""
    if not isinstance(pattern, str):
        raise InvalidArgumentError(f"{what}: expected a str (a regex)")
    if not pattern:
        return None
    flags, rest = re.IGNORECASE, pattern
    while True:
        group = _LEADING_FLAGS.match(rest)
        if group is None or not (group.group(1) or group.group(2)):
            break
        for letter in group.group(1):
            flags |= _FLAG.get(letter, 0)
        for letter in group.group(2) or "":
            flags &= ~_FLAG.get(letter, 0)
        rest = rest[group.end():]
    try:
        return re.compile(rest, flags)
    except re.error as e:
        raise InvalidArgumentError(f"{what}: not a regex: {e}") from None


def check_forwarded_header(name: str) -> None:
    """A header the pattern matched must not pose as a parameter Triton reads."""
    if name in RESERVED_PARAMETERS or name.startswith("triton_"):
        raise InvalidArgumentError(
            f"Header '{name}' is reserved for Triton usage and cannot be forwarded.")


def forward_headers(regex: Optional["re.Pattern[str]"], headers: Iterable[tuple[str, Any]],
                    parameters: dict[str, Any]) -> None:
    """Each header whose name ``regex`` finds goes into ``parameters`` as a
    string (binary gRPC metadata, ``-bin``, as its bytes decoded)."""
    if regex is None:
        return
    for name, value in headers:
        if regex.search(name):
            check_forwarded_header(name)
            if isinstance(value, bytes):
                value = value.decode("utf-8", "replace")
            parameters[name] = value
