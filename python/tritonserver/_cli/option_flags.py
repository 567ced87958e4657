"""The executable's flags for the core's own settings (caches, the rate
limiter, host policies, metrics settings, repository agents, the buffer
manager), parsed with the executable's formats and error texts (Triton 2.51's
``command_line_parser.cc``), and the flags ``serve`` refuses with a reason:
the GPU ones and Vertex AI's (SageMaker's are served: sagemaker_flags).

``serve_flags`` adds these to the ``serve`` parser and merges
``option_settings`` into the ``tritonserver.Options`` it builds.
"""

from __future__ import annotations

import argparse
from typing import Any, Optional, Sequence

NO_GPU = "this package serves on CPUs only (no GPU support in this build)"
NO_VERTEX_AI = ("serve has no Vertex AI frontend; the tritonserver executable has one "
                "(python -m tritonserver executable)")
# flag -> why serve refuses it. A ``--allow-*`` flag set to false asks for
# nothing serve lacks and is accepted (scripts written for the executable pass
# --allow-vertex-ai=false).
REFUSED = {
    "--cuda-memory-pool-byte-size": NO_GPU,
    "--cuda-virtual-address-size": NO_GPU,
    "--min-supported-compute-capability": NO_GPU,
    "--model-load-gpu-limit": NO_GPU,
    "--enable-peer-access": NO_GPU,
    "--allow-vertex-ai": NO_VERTEX_AI,
    "--vertex-ai-port": NO_VERTEX_AI,
    "--vertex-ai-thread-count": NO_VERTEX_AI,
    "--vertex-ai-default-model": NO_VERTEX_AI,
}
_FALSE_ACCEPTED = {"--allow-vertex-ai", "--enable-peer-access"}


class _Refused(argparse.Action):
    """Exits 2 naming the flag and why serve does not take it."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: Optional[str] = None) -> None:
        flag = option_string or self.option_strings[0]
        if flag in _FALSE_ACCEPTED and isinstance(values, str) \
                and values.strip().lower() in ("false", "off", "0", "no"):
            return
        raise argparse.ArgumentError(self, f"not supported: {REFUSED[flag]}")


def add_arguments(p: argparse.ArgumentParser, uint: Any) -> None:
    """The core-settings flags and the refused ones; ``uint`` parses a
    non-negative integer (serve_flags' type)."""
    g = p.add_argument_group("response cache")
    g.add_argument("--cache-config", action="append", default=[],
                   metavar="<cache_name>,<setting>=<value>",
                   help="a cache's setting (repeatable), e.g. local,size=1048576 for the core's "
                        "local response cache; models opt in with response_cache { enable: true }")
    g.add_argument("--cache-directory", default=None, metavar="PATH",
                   help="folder of cache libraries (<name>/libtritoncache_<name>.so); default: "
                        "the installed core's")
    g.add_argument("--response-cache-byte-size", type=uint, default=None, metavar="BYTES",
                   help="deprecated: --cache-config=local,size=BYTES")

    g = p.add_argument_group("rate limiter")
    g.add_argument("--rate-limit", default="off", metavar="execution_count|off",
                   help="execution_count: instances run when the resources their "
                        "rate_limiter config names are available (default off)")
    g.add_argument("--rate-limit-resource", action="append", default=[],
                   metavar="<name>:<count>[:<device>]",
                   help="how many of a resource there are (repeatable; default: the most any "
                        "instance asks for)")

    g = p.add_argument_group("core")
    g.add_argument("--model-config-name", default=None, metavar="NAME",
                   help="configure each model that has configs/<NAME>.pbtxt with that file "
                        "instead of its config.pbtxt")
    g.add_argument("--host-policy", action="append", default=[],
                   metavar="<policy_name>,<setting>=<value>",
                   help="numa-node or cpu-cores (<lo>-<hi>[,...]) of a host policy; CPU "
                        "instances use the policy named 'cpu' unless their config names one")
    g.add_argument("--metrics-config", action="append", default=[],
                   metavar="<setting>=<value>",
                   help="a metrics setting (repeatable), e.g. summary_latencies=true")
    g.add_argument("--repoagent-directory", default="/opt/tritonserver/repoagents",
                   metavar="PATH", help="folder of repository agent libraries")
    g.add_argument("--buffer-manager-thread-count", type=uint, default=0, metavar="N",
                   help="threads the core copies tensors with (default 0)")
    g.add_argument("--grpc-infer-allocation-pool-size", type=uint, default=8, metavar="N",
                   help="accepted for compatibility: the gRPC frontend keeps no pool of "
                        "request/response objects to size")

    g = p.add_argument_group("not served (refused with the reason)")
    for flag, why in REFUSED.items():
        g.add_argument(flag, action=_Refused, nargs="?", default=None, metavar="VALUE",
                       help=why)


def _named_setting(flag: str, item: str, name_desc: str) -> tuple[str, str, str]:
    """``<name>,<setting>=<value>``, as the executable's generic parser reads it."""
    comma = item.find(",")
    eq = item.find("=", comma + 1)
    name, setting, value = item[:comma], item[comma + 1:eq], item[eq + 1:]
    if comma < 0 or eq < 0 or not name or not setting or not value:
        raise ValueError(f"{flag} option format is '<{name_desc}>,<setting>=<value>'. "
                         f"Got {item}")
    return name, setting, value


def cache_settings(items: Sequence[str], byte_size: Optional[int]) -> dict[str, dict[str, str]]:
    """--cache-config items (or the deprecated --response-cache-byte-size)
    as Options.cache_config; empty: no cache."""
    if items and byte_size is not None:
        raise ValueError("Error: Incompatible flags --response-cache-byte-size and "
                         "--cache-config both provided. Please provide one or the other.")
    if byte_size is not None:
        return {"local": {"size": str(byte_size)}}
    caches: dict[str, dict[str, str]] = {}
    for item in items:
        if item.find(",") <= 0:
            raise ValueError("No cache specified. --cache-config option format is "
                             f"<cache name>,<setting>=<value>. Got {item}")
        name, setting, value = _named_setting("--cache-config", item, "cache name")
        caches.setdefault(name, {})[setting] = value
    return caches


def rate_limit_mode(text: str) -> Any:
    import tritonserver

    mode = text.strip().lower()
    if mode == "execution_count":
        return tritonserver.RateLimitMode.EXEC_COUNT
    if mode == "off":
        return tritonserver.RateLimitMode.OFF
    raise ValueError("invalid argument for --rate-limit")


def rate_limit_resources(items: Sequence[str]) -> list[Any]:
    """``<name>:<count>[:<device>]`` items; device -1 (every device) when left out."""
    from tritonserver._options import RateLimiterResource

    resources = []
    for item in items:
        parts = item.split(":")
        if len(parts) not in (2, 3):
            raise ValueError("--rate-limit-resource option format is "
                             "'<resource_name>:<count>:<device>' or '<resource_name>:<count>'. "
                             f"Got {item}")
        try:
            count = int(parts[1])
            device = int(parts[2]) if len(parts) == 3 else -1
        except ValueError:
            raise ValueError(f"--rate-limit-resource={item}: the count and the device are "
                             "integers") from None
        resources.append(RateLimiterResource(parts[0], count, device))
    return resources


def host_policies(items: Sequence[str]) -> dict[str, dict[str, str]]:
    policies: dict[str, dict[str, str]] = {}
    for item in items:
        name, setting, value = _named_setting("--host-policy", item, "policy name")
        policies.setdefault(name, {})[setting] = value
    return policies


def metrics_settings(items: Sequence[str]) -> dict[str, dict[str, str]]:
    """``<setting>=<value>`` items, global (the core's group "")."""
    settings: dict[str, str] = {}
    for item in items:
        setting, eq, value = item.partition("=")
        if not eq or "," in setting or not setting or not value:
            raise ValueError(f"--metrics-config option format is <setting>=<value>. Got {item}")
        settings[setting] = value
    return {"": settings} if settings else {}


def option_settings(args: argparse.Namespace) -> dict[str, Any]:
    """tritonserver.Options fields from these flags (ValueError with the
    executable's text for a bad value)."""
    return {
        "cache_config": cache_settings(args.cache_config, args.response_cache_byte_size),
        "cache_directory": args.cache_directory,
        "rate_limiter_mode": rate_limit_mode(args.rate_limit),
        "rate_limiter_resources": rate_limit_resources(args.rate_limit_resource),
        "host_policies": host_policies(args.host_policy),
        "metrics_configuration": metrics_settings(args.metrics_config),
        "repo_agent_directory": args.repoagent_directory,
        "buffer_manager_thread_count": args.buffer_manager_thread_count,
        "model_config_name": args.model_config_name or None,
    }


def warnings(args: argparse.Namespace) -> list[str]:
    """The executable's warnings for these flags."""
    if args.response_cache_byte_size is None:
        return []
    return ["Warning: '--response-cache-byte-size' has been deprecated! This will default to "
            "the 'local' cache implementation with the provided byte size for its config. "
            "Please use '--cache-config' instead. The equivalent --cache-config CLI args would "
            f"be: '--cache-config=local,size={args.response_cache_byte_size}'"]
