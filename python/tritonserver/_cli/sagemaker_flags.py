"""``serve``'s SageMaker flags, with the executable's names, formats and
error texts (``command_line_parser.cc``): ``--allow-sagemaker``,
``--sagemaker-port``, ``--sagemaker-safe-port-range``,
``--sagemaker-thread-count``, and the executable's check of the SageMaker
port against the other endpoints' (the same address and port, or a port
outside the safe range, refuses to start).

The SageMaker service listens on ``--http-address`` (the executable's
listens on all interfaces; serve keeps its loopback default).
"""

from __future__ import annotations

import argparse
import re
from typing import Any, NamedTuple, Optional

SAGEMAKER = "SageMaker"
_STOI = re.compile(r"[ \t\n\v\f\r]*[+-]?[0-9]+")
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1


def add_arguments(p: argparse.ArgumentParser, boolean: Any, port: Any, uint: Any) -> None:
    """The flags; ``boolean``, ``port``, ``uint``: serve_flags' value types."""
    g = p.add_argument_group(
        "SageMaker (docs/serving.md, SageMaker)",
        "Triton's SageMaker service (/ping, /invocations, /models) on a port of its own, "
        "at --http-address; the SAGEMAKER_TRITON_* environment variables configure it.")
    g.add_argument("--allow-sagemaker", type=boolean, nargs="?", const=True, default=False,
                   metavar="BOOL", help="serve SageMaker's routes (default false)")
    g.add_argument("--sagemaker-port", type=port, default=8080,
                   help="the SageMaker port (default 8080)")
    g.add_argument("--sagemaker-safe-port-range", default=None, metavar="<integer>-<integer>",
                   help="the ports the other endpoints at the same address must use")
    g.add_argument("--sagemaker-thread-count", type=uint, default=1, metavar="N",
                   help="event loops serving SageMaker (default 1; the executable's 8 are "
                        "threads of a C++ server)")


def _int(text: str) -> int:
    """The executable's ParseOption<int>: what std::stoi reads, its texts."""
    number = _STOI.match(text)
    if number is None:
        raise ValueError(f"Invalid option value. Got {text}")
    value = int(number.group(0))
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ValueError(f"Provided option value is out of bound. Got {text}")
    return value


def safe_port_range(text: str) -> tuple[int, int]:
    """``<lo>-<hi>``, split at the first "-" as the executable splits it."""
    at = text.find("-")
    if at < 0:
        raise ValueError("Cannot parse pair option due to incorrect number of inputs."
                         "--<pair option> argument requires format <first>-<second>. "
                         f"Found: {text}")
    return _int(text[:at]), _int(text[at + 1:])


class _Endpoint(NamedTuple):
    name: str
    address: str
    port: int
    safe_range: Optional[tuple[int, int]] = None


def check_ports(args: argparse.Namespace) -> None:
    """The executable's checks, with its texts (ValueError): the safe range
    must parse (whether or not SageMaker is served, as there); then, with
    --allow-sagemaker, no other endpoint at the SageMaker service's address
    may share its port (port 0, the system's choice, never does), nor, with
    a safe range, lie outside the range."""
    safe = None
    if args.sagemaker_safe_port_range is not None:  # parsed whether served or not, as there
        safe = safe_port_range(args.sagemaker_safe_port_range)
    if not args.allow_sagemaker:
        return
    endpoints = []
    if args.allow_http:
        endpoints.append(_Endpoint("HTTP", args.http_address, args.http_port))
    if args.allow_grpc:
        endpoints.append(_Endpoint("GRPC", args.grpc_address, args.grpc_port))
    if args.allow_metrics:
        endpoints.append(_Endpoint("metrics", args.metrics_address, args.metrics_port))
    endpoints.append(_Endpoint(SAGEMAKER, args.http_address, args.sagemaker_port, safe))
    if args.openai_port is not None:
        endpoints.append(_Endpoint("OpenAI", args.openai_address, args.openai_port))
    # The executable's order: each endpoint against those after it, and one
    # with a safe range against every other.
    for i, current in enumerate(endpoints):
        others = endpoints if current.safe_range else endpoints[i + 1:]
        for other in others:
            if other is current or other.address != current.address \
                    or SAGEMAKER not in (current.name, other.name):
                continue
            if current.safe_range is not None:
                lo, hi = current.safe_range
                if not lo <= other.port <= hi:
                    raise ValueError(f"The server cannot listen to {other.name} requests at "
                                     f"port {other.port}, allowed port range is [{lo}, {hi}]")
            if current.port == other.port and current.port != 0:
                raise ValueError(f"The server cannot listen to {current.name} requests and "
                                 f"{other.name} requests at the same address and port "
                                 f"{current.address}:{current.port}")
