"""Building the Ray Serve application: Server options and Ray Serve's
deployment settings in, one ``serve.Application`` out."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable, Optional

from tritonserver import InvalidArgumentError, Options, Server
from tritonserver._errors import InvalidArgumentTypeError
from tritonserver.frontends import HttpSettings, OpenAISettings, create_http_app
from tritonserver.frontends.openai.app import create_openai_app, one_port_app
from tritonserver.ray._replica import TritonReplica, current_server

DEFAULT_NAME = "tritonserver"
# Ray Serve's own default (5 at a time per replica) would starve the core's
# dynamic batcher; a user's value is passed through as given.
DEFAULT_MAX_ONGOING_REQUESTS = 64
# The health check only asks the core (microseconds): every 2 s rather than
# Ray's 10 s, so a replica whose server stopped is replaced sooner.
DEFAULT_HEALTH_CHECK_PERIOD_S = 2.0
# Triton logs no line per request; Ray's access log costs about 1.5 ms a
# request here. A user's logging_config is passed through as given.
DEFAULT_LOGGING_CONFIG = {"enable_access_log": False}

_OPTION_FIELDS = frozenset(f.name for f in dataclasses.fields(Options))


def deployment_setting_names() -> frozenset[str]:
    """The settings a Ray Serve deployment takes, as the installed Ray names
    them (``name`` is application()'s own; Serve sets ``version`` itself)."""
    from ray.serve.deployment import Deployment

    return frozenset(name for name in inspect.signature(Deployment.options).parameters
                     if not name.startswith("_")
                     and name not in ("self", "func_or_class", "name", "version"))


def split_settings(settings: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(Options fields, Ray Serve deployment settings) from one set of keywords."""
    ray_names = deployment_setting_names()
    fields: dict[str, Any] = {}
    deployment: dict[str, Any] = {}
    for key, value in settings.items():
        if key in _OPTION_FIELDS:
            fields[key] = value
        elif key in ray_names:
            deployment[key] = value
        else:
            raise InvalidArgumentError(
                f"unknown setting '{key}': neither a tritonserver.Options field nor a Ray Serve "
                f"deployment setting ({', '.join(sorted(ray_names))})")
    return fields, deployment


def _ingress_class(http: HttpSettings, openai: Optional[OpenAISettings]) -> Any:
    from ray import serve

    def build_http_app() -> Any:
        # Called in the replica's process: the app serves that replica's Server.
        kserve = create_http_app(current_server, http)
        if openai is None:
            return kserve
        return one_port_app(kserve, create_openai_app(current_server, openai))

    return serve.ingress(build_http_app)(TritonReplica)


def application(options: Optional[Options] = None, *, name: str = DEFAULT_NAME,
                setup: Optional[Callable[[Server], None]] = None,
                http: Optional[HttpSettings] = None, openai: Optional[OpenAISettings] = None,
                **settings: Any) -> Any:
    """A Ray Serve application of in-process Triton servers, one per replica.

    ``options`` and keywords naming ``tritonserver.Options`` fields
    (``model_repository``, ``startup_models``, ``backend_directory``...) make
    each replica's Server options (keywords win). Keywords naming Ray Serve
    deployment settings (``num_replicas``, ``autoscaling_config``,
    ``max_ongoing_requests``, ``ray_actor_options``...) go to the deployment
    unchanged. ``setup(server)``, if given, runs in each replica before its
    Server starts (e.g. ``server.register_model(...)``); it must be picklable.
    ``http`` sets the HTTP app's limits (HttpSettings); ``openai`` (an
    OpenAISettings) serves OpenAI's API on the same port too (``/v1/...``,
    ``/health/ready``, ``/metrics``; docs/openai.md). Run it with
    ``serve.run(app, route_prefix="/")``: Ray's HTTP proxy then speaks the
    KServe v2 protocol, and ``serve.get_app_handle(name)`` gives the handle
    API (``infer``, ``stream``, ``statistics``).
    """
    from ray import serve

    if options is not None and not isinstance(options, Options):
        raise InvalidArgumentTypeError(
            f"options: expected tritonserver.Options, got {type(options).__name__}")
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"name: expected a non-empty str, got {name!r}")
    if setup is not None and not callable(setup):
        raise InvalidArgumentTypeError("setup: expected a callable taking the Server")
    fields, deployment = split_settings(settings)
    server_options = dataclasses.replace(options or Options(), **fields)
    deployment.setdefault("max_ongoing_requests", DEFAULT_MAX_ONGOING_REQUESTS)
    deployment.setdefault("health_check_period_s", DEFAULT_HEALTH_CHECK_PERIOD_S)
    deployment.setdefault("logging_config", dict(DEFAULT_LOGGING_CONFIG))
    deployment.setdefault("graceful_shutdown_timeout_s", float(server_options.exit_timeout) + 5)
    if openai is not None and not isinstance(openai, OpenAISettings):
        raise InvalidArgumentTypeError(
            f"openai: expected tritonserver.frontends.OpenAISettings, got "
            f"{type(openai).__name__}")
    replica = serve.deployment(name=name)(_ingress_class(http or HttpSettings(), openai))
    try:
        configured = replica.options(**deployment)
    except (ValueError, TypeError) as e:  # Ray's own checks of the values
        raise InvalidArgumentError(f"Ray Serve deployment settings: {e}") from None
    return configured.bind(server_options, setup)
