"""``python -m tritonserver serve --ray``: the serve command's flags, served
by replicas on a Ray cluster behind Ray's HTTP proxy.

``build`` is the same as an application builder for Ray's own command
(flag names without their dashes as keys)::

    serve run tritonserver.ray:build model-repository=models num-replicas=2
"""

from __future__ import annotations

import argparse
import json
import os
import threading
from typing import Any, Callable, Optional

import tritonserver
from tritonserver.frontends import HttpSettings
from tritonserver._serve_command import Signals, build_parser, say, server_options
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
    http = HttpSettings(max_input_size=args.http_max_input_size,
                        restricted_features=list(args.http_restricted_api) or None,
                        header_forward_pattern=args.http_header_forward_pattern)
    return application(server_options(args), name=args.ray_app_name, http=http,
                       **deployment_settings(args))


def build(cli_args: dict[str, str]) -> Any:
    """An application builder for ``serve run``: ``key=value`` pairs are the
    serve command's flags without their leading dashes."""
    argv = ["--ray"] + [f"--{key.lstrip('-')}={value}" for key, value in cli_args.items()]
    return build_from_args(build_parser().parse_args(argv))


HAPROXY_VARIABLE = "RAY_SERVE_ENABLE_HA_PROXY"


def run(args: argparse.Namespace, signals: Optional[Signals] = None) -> int:
    try:
        if args.ray_ingress == "haproxy":
            if args.ray_address:
                raise ValueError("--ray-ingress=haproxy: a running cluster keeps the ingress it "
                                 f"was started with (start it with {HAPROXY_VARIABLE}=1)")
            # Read by Ray's processes when they start: before ray is imported.
            os.environ[HAPROXY_VARIABLE] = "1"
        app = build_from_args(args)
    except (ValueError, tritonserver.TritonError) as e:
        say(f"tritonserver serve --ray: {e}")
        return 2
    import ray
    from ray import serve

    signals = signals or Signals()
    address = args.ray_address or "local"  # "local": always a new cluster of this machine
    own_cluster = address == "local" and not ray.is_initialized()
    try:
        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False)
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
        say("tritonserver serve: ready")
        signals.stop.wait()
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
        say("tritonserver serve: stopped")
        signals.restore()


def _bounded(step: Callable[[], Any], timeout: float, what: str) -> None:
    """Run a shutdown step that Ray may never finish (serve.delete with the
    HAProxy ingress does not, in Ray 2.60) for at most ``timeout`` seconds."""
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
