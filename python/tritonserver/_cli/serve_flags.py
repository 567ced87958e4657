"""The ``serve`` command's flags and what both ways of serving share.

``python -m tritonserver serve`` (also ``tritonserver-py serve``) is a
drop-in for the ``tritonserver`` executable, with its flag names for what it
covers. This module parses the flags and turns them into
``tritonserver.Options``; the two runners, the in-process frontends
(``tritonserver._cli.serve_local``) and replicas on Ray Serve
(``tritonserver.ray._command``, with ``--ray``), import it and never each
other, and ``tritonserver._cli.serve`` picks one.
"""

from __future__ import annotations

import argparse
import atexit
import os
import signal
import sys
import threading
import time
from typing import Any, NoReturn, Optional

from tritonserver._cli import option_flags, sagemaker_flags
from tritonserver._options import ServeOptions, python_backend_default

DEFAULT_ADDRESS = "127.0.0.1"
_TRUE = {"true", "on", "1", "yes"}
_FALSE = {"false", "off", "0", "no"}
COMPRESSION_LEVELS = {"none": 0, "low": 1, "medium": 2, "high": 3}


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _uint(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return value


def _port(text: str) -> int:
    value = _uint(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"expected a port in 0..65535, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tritonserver serve",
        description="Serve a model repository over HTTP/REST, gRPC and metrics (and "
                    "SageMaker's routes with --allow-sagemaker) with the "
                    "in-process Triton core, like the tritonserver executable (same flag "
                    "names). Endpoints listen on 127.0.0.1 unless an address is given. "
                    "Port 0 lets the system choose; the ports are printed once serving.",
        allow_abbrev=False)

    g = p.add_argument_group("server and models")
    g.add_argument("--model-repository", "--model-store", dest="model_repository",
                   action="append", default=[], metavar="PATH",
                   help="model repository folder (repeatable)")
    g.add_argument("--model-control-mode", choices=("none", "poll", "explicit"), default="none")
    g.add_argument("--repository-poll-secs", type=_uint, default=15, metavar="SECONDS",
                   help="with --model-control-mode=poll: seconds between polls")
    g.add_argument("--load-model", action="append", default=[], metavar="NAME",
                   help="with --model-control-mode=explicit: a model to load at start "
                        "(repeatable; '*' for all)")
    g.add_argument("--strict-model-config", type=_bool, nargs="?", const=True, default=None,
                   metavar="BOOL", help="require complete model configurations (default false, "
                                        "as the executable)")
    g.add_argument("--disable-auto-complete-config", action="store_true",
                   help="same as --strict-model-config=true")
    g.add_argument("--strict-readiness", type=_bool, nargs="?", const=True, default=True,
                   metavar="BOOL")
    g.add_argument("--exit-on-error", type=_bool, nargs="?", const=True, default=True,
                   metavar="BOOL")
    g.add_argument("--exit-timeout-secs", type=_uint, default=30, metavar="SECONDS",
                   help="on exit, how long requests in flight may take to finish")
    g.add_argument("--id", default="triton", help="server identifier")
    g.add_argument("--backend-directory", metavar="PATH",
                   help="a folder of your own backends, served beside the package's")
    g.add_argument("--python-backend", choices=("stub", "inprocess"), default=None,
                   help="where backend: \"python\" models run: Triton's python backend "
                        "(a stub process per instance) or this process (docs/inprocess.md); "
                        "default: $TRITONSERVER_PYTHON_BACKEND, else stub")
    g.add_argument("--backend-config", action="append", default=[],
                   metavar="<backend>,<setting>=<value>")
    g.add_argument("--model-load-thread-count", type=_uint, default=4)
    g.add_argument("--model-load-retry-count", type=_uint, default=0)
    g.add_argument("--model-namespacing", type=_bool, nargs="?", const=True, default=False,
                   metavar="BOOL")
    g.add_argument("--pinned-memory-pool-byte-size", type=_uint, default=1 << 28)

    g = p.add_argument_group("logging")
    g.add_argument("--log-verbose", type=_uint, default=0, metavar="LEVEL")
    g.add_argument("--log-info", type=_bool, nargs="?", const=True, default=True, metavar="BOOL")
    g.add_argument("--log-warning", type=_bool, nargs="?", const=True, default=True,
                   metavar="BOOL")
    g.add_argument("--log-error", type=_bool, nargs="?", const=True, default=True,
                   metavar="BOOL")
    g.add_argument("--log-format", choices=("default", "ISO8601"), default="default")
    g.add_argument("--log-file", metavar="PATH")

    g = p.add_argument_group("HTTP/REST")
    g.add_argument("--allow-http", type=_bool, nargs="?", const=True, default=True,
                   metavar="BOOL")
    g.add_argument("--http-address", default=DEFAULT_ADDRESS)
    g.add_argument("--http-port", type=_port, default=8000)
    g.add_argument("--reuse-http-port", type=_bool, nargs="?", const=True, default=False,
                   metavar="BOOL")
    g.add_argument("--http-thread-count", type=_uint, default=1,
                   help="event loops serving HTTP (default 1)")
    g.add_argument("--http-header-forward-pattern", default="", metavar="REGEX")
    g.add_argument("--http-max-input-size", type=_uint, default=64 << 20, metavar="BYTES")
    g.add_argument("--http-restricted-api", action="append", default=[],
                   metavar="<apis>:<key>=<value>")

    g.add_argument("--http-ssl-certfile", default="", metavar="PATH",
                   help="serve HTTPS on the HTTP, metrics and OpenAI ports with this "
                        "certificate (PEM; the chain after it)")
    g.add_argument("--http-ssl-keyfile", default="", metavar="PATH",
                   help="the certificate's private key (PEM)")
    g.add_argument("--http-ssl-ca-certs", default="", metavar="PATH",
                   help="CA certificates (PEM) that client certificates are checked against")
    g.add_argument("--http-ssl-cert-reqs", choices=("none", "optional", "required"),
                   default=None, help="client certificates: none (default without "
                   "--http-ssl-ca-certs), optional, or required (default with it)")

    g = p.add_argument_group(
        "OpenAI (docs/openai.md)",
        "OpenAI's completions, chat completions and models API for the text-generation "
        "models, on a port of its own; HTTPS with the --http-ssl-* flags.")
    g.add_argument("--openai-port", type=_port, default=None, metavar="PORT",
                   help="serve OpenAI's API on this port (default: not served)")
    g.add_argument("--openai-address", default=DEFAULT_ADDRESS)
    g.add_argument("--reuse-openai-port", type=_bool, nargs="?", const=True, default=False,
                   metavar="BOOL")
    g.add_argument("--openai-max-input-size", type=_uint, default=64 << 20, metavar="BYTES",
                   help="the largest request body (413 beyond)")
    g.add_argument("--openai-restricted-api", action="append", default=[],
                   metavar="<apis>:<key>=<value>",
                   help="APIs that need a header (repeatable): inference, model-repository, "
                        "health, statistics (/metrics)")
    g.add_argument("--openai-tokenizer", default="", metavar="NAME|PATH",
                   help="a Hugging Face tokenizer (needs transformers) for chat templates "
                        "and token counts")

    g = p.add_argument_group("shared memory")
    g.add_argument("--allow-client-shm", type=_bool, nargs="?", const=True, default=False,
                   metavar="BOOL", help="let HTTP and gRPC clients register, unregister and "
                   "use system and CUDA shared memory regions (default false: a system region "
                   "names any shared memory object this process can open)")

    g = p.add_argument_group("gRPC")
    g.add_argument("--allow-grpc", type=_bool, nargs="?", const=True, default=True,
                   metavar="BOOL")
    g.add_argument("--grpc-address", default=DEFAULT_ADDRESS)
    g.add_argument("--grpc-port", type=_port, default=8001)
    g.add_argument("--reuse-grpc-port", type=_bool, nargs="?", const=True, default=False,
                   metavar="BOOL")
    g.add_argument("--grpc-use-ssl", type=_bool, nargs="?", const=True, default=False,
                   metavar="BOOL")
    g.add_argument("--grpc-use-ssl-mutual", type=_bool, nargs="?", const=True, default=False,
                   metavar="BOOL")
    g.add_argument("--grpc-server-cert", default="", metavar="PATH")
    g.add_argument("--grpc-server-key", default="", metavar="PATH")
    g.add_argument("--grpc-root-cert", default="", metavar="PATH")
    g.add_argument("--grpc-infer-response-compression-level", choices=tuple(COMPRESSION_LEVELS),
                   default="none")
    g.add_argument("--grpc-keepalive-time", type=_uint, default=7_200_000, metavar="MS")
    g.add_argument("--grpc-keepalive-timeout", type=_uint, default=20_000, metavar="MS")
    g.add_argument("--grpc-keepalive-permit-without-calls", type=_bool, nargs="?", const=True,
                   default=False, metavar="BOOL")
    g.add_argument("--grpc-http2-max-pings-without-data", type=_uint, default=2)
    g.add_argument("--grpc-http2-min-recv-ping-interval-without-data", type=_uint,
                   default=300_000, metavar="MS")
    g.add_argument("--grpc-http2-max-ping-strikes", type=_uint, default=2)
    g.add_argument("--grpc-max-connection-age", type=_uint, default=0, metavar="MS")
    g.add_argument("--grpc-max-connection-age-grace", type=_uint, default=0, metavar="MS")
    g.add_argument("--grpc-header-forward-pattern", default="", metavar="REGEX",
                   help="request metadata whose keys this finds (case-insensitively) "
                        "go to the model as request parameters")
    g.add_argument("--grpc-max-input-size", type=_uint, default=64 << 20, metavar="BYTES",
                   help="the largest request message (this package's; the executable has none)")
    g.add_argument("--grpc-restricted-protocol", action="append", default=[],
                   metavar="<protocols>:<key>=<value>")

    g = p.add_argument_group("metrics")
    g.add_argument("--allow-metrics", type=_bool, nargs="?", const=True, default=True,
                   metavar="BOOL")
    g.add_argument("--allow-gpu-metrics", type=_bool, nargs="?", const=True, default=True,
                   metavar="BOOL")
    g.add_argument("--allow-cpu-metrics", type=_bool, nargs="?", const=True, default=True,
                   metavar="BOOL")
    g.add_argument("--metrics-address", default=DEFAULT_ADDRESS)
    g.add_argument("--metrics-port", type=_port, default=8002)
    g.add_argument("--metrics-interval-ms", type=_uint, default=2000)

    sagemaker_flags.add_arguments(p, _bool, _port, _uint)
    option_flags.add_arguments(p, _uint)

    g = p.add_argument_group("tracing")
    g.add_argument("--trace-config", action="append", default=[],
                   metavar="[<mode>,]<setting>=<value>",
                   help="as the executable's (repeatable): level=<OFF|TIMESTAMPS|TENSORS>, "
                        "rate=<N>, count=<N>, triton,file=<path>, triton,log-frequency=<N>; "
                        "mode triton only (docs/serving.md, Tracing)")
    for flag, help_text in (("--trace-file", "deprecated: --trace-config triton,file="),
                            ("--trace-rate", "deprecated: --trace-config rate="),
                            ("--trace-count", "deprecated: --trace-config count="),
                            ("--trace-log-frequency",
                             "deprecated: --trace-config triton,log-frequency=")):
        g.add_argument(flag, default=None, help=help_text)
    g.add_argument("--trace-level", action="append", default=[],
                   help="deprecated: --trace-config level=")

    g = p.add_argument_group(
        "Ray Serve (--ray; the ray extra)",
        "Serve the repository from replicas on a Ray cluster behind Ray's HTTP proxy "
        "(--http-address and --http-port set the proxy; gRPC and metrics are not served).")
    g.add_argument("--ray", action="store_true", help="scale out on Ray Serve")
    g.add_argument("--ray-address", default=None, metavar="ADDRESS",
                   help="a running Ray cluster to join ('auto', or its host:port); default: start "
                        "a cluster of this machine for this command, stopped when it exits")
    g.add_argument("--ray-app-name", default="tritonserver", metavar="NAME")
    g.add_argument("--ray-ingress", choices=("proxy", "haproxy"), default=None,
                   help="HTTP ingress of the cluster this command starts: Ray's HAProxy "
                        "ingress (default where Ray has it; adds under 1 ms to a request; its "
                        "stats and metrics ports listen on all interfaces), or Ray's proxy "
                        "(adds about 10 ms): docs/scale-out.md")
    g.add_argument("--num-replicas", default=None, metavar="N|auto",
                   help="replicas (an integer, or 'auto' for Ray's autoscaling defaults)")
    g.add_argument("--max-ongoing-requests", type=_uint, default=None, metavar="N",
                   help="requests a replica handles at once (default 64)")
    g.add_argument("--num-cpus", type=float, default=None, metavar="CPUS",
                   help="CPUs reserved per replica (ray_actor_options)")
    g.add_argument("--num-gpus", type=float, default=None, metavar="GPUS",
                   help="GPUs reserved per replica (ray_actor_options)")
    g.add_argument("--autoscaling-config", default=None, metavar="JSON",
                   help="Ray Serve's autoscaling_config as JSON")
    g.add_argument("--ray-actor-options", default=None, metavar="JSON",
                   help="Ray Serve's ray_actor_options as JSON")
    return p


def server_options(args: argparse.Namespace) -> Any:
    """tritonserver.Options from the parsed flags."""
    import tritonserver

    if not args.model_repository:
        raise ValueError("--model-repository is required")
    strict = bool(args.strict_model_config) or args.disable_auto_complete_config
    mode = {"none": tritonserver.ModelControlMode.NONE, "poll": tritonserver.ModelControlMode.POLL,
            "explicit": tritonserver.ModelControlMode.EXPLICIT}[args.model_control_mode]
    if args.load_model and mode != tritonserver.ModelControlMode.EXPLICIT:
        raise ValueError("--load-model needs --model-control-mode=explicit")
    if "*" in args.load_model and len(args.load_model) > 1:
        raise ValueError("--load-model=* must be the only --load-model")
    backend_config: dict[str, dict[str, str]] = {}
    for item in args.backend_config:
        backend, comma, rest = item.partition(",")
        setting, eq, value = rest.partition("=")
        if not comma or not eq or not backend or not setting:
            raise ValueError(f"--backend-config={item!r}: expected <backend>,<setting>=<value>")
        backend_config.setdefault(backend, {})[setting] = value
    return ServeOptions(
        model_repository=list(args.model_repository), server_id=args.id,
        model_control_mode=mode, startup_models=list(args.load_model),
        strict_model_config=strict, strict_readiness=args.strict_readiness,
        exit_on_error=args.exit_on_error, exit_timeout=args.exit_timeout_secs,
        backend_directory=args.backend_directory, backend_configuration=backend_config,
        python_backend=args.python_backend or python_backend_default(),
        model_load_thread_count=args.model_load_thread_count,
        model_load_retry_count=args.model_load_retry_count,
        model_namespacing=args.model_namespacing,
        pinned_memory_pool_size=args.pinned_memory_pool_byte_size,
        log_verbose=args.log_verbose, log_info=args.log_info, log_warn=args.log_warning,
        log_error=args.log_error, log_file=args.log_file,
        log_format=tritonserver.LogFormat.ISO8601 if args.log_format == "ISO8601"
        else tritonserver.LogFormat.DEFAULT,
        metrics=args.allow_metrics, gpu_metrics=args.allow_gpu_metrics,
        cpu_metrics=args.allow_cpu_metrics, metrics_interval=args.metrics_interval_ms,
        **option_flags.option_settings(args))


def tls_options(args: argparse.Namespace) -> dict[str, Any]:
    """The HTTP and metrics frontends' TLS options from --http-ssl-* ({}: plain HTTP)."""
    if not (args.http_ssl_certfile or args.http_ssl_keyfile or args.http_ssl_ca_certs
            or args.http_ssl_cert_reqs):
        return {}
    return {"ssl_certfile": args.http_ssl_certfile, "ssl_keyfile": args.http_ssl_keyfile,
            "ssl_ca_certs": args.http_ssl_ca_certs, "ssl_cert_reqs": args.http_ssl_cert_reqs}


def say(message: str) -> None:
    """A line of serve's own on standard error. A line that cannot be written
    (a supervisor that stopped reading closed the pipe) is dropped: serving
    goes on, and the exit status stays what it would have been (a write
    that raised in the signal handler ended a clean stop with status 1)."""
    try:
        print(message, file=sys.stderr, flush=True)
    except (OSError, ValueError, RuntimeError):  # EPIPE; the stream closed; a reentrant write
        pass


def _say_raw(message: str) -> None:
    """A line written straight to the standard error's file, for the signal
    handler: Python runs a handler inside a buffered write of the main
    thread that a signal interrupted (EINTR), and a print to the same stream
    there raises "reentrant call" (RuntimeError), which ended a clean stop
    with status 1. One unbuffered write cannot re-enter; lost when it fails."""
    try:
        os.write(2, (message + "\n").encode("utf-8", "replace"))
    except OSError:
        pass


class Signals:
    """SIGINT/SIGTERM: the first asks for a clean stop, the second exits at once.

    Wait for them with wait(), not stop.wait(): Python runs a signal's
    handler in the main thread, when that thread next runs Python code. The
    kernel may deliver a process's signal to any thread that does not block
    it (the core's, gRPC's, the event loops'); the main thread, asleep in
    one long wait, then ran the handler only when that wait ended, and a
    `serve` sent SIGTERM kept serving (seen once in the soak: no exit 30 s
    after SIGTERM, the main thread asleep and every frontend running).
    """

    # How long the main thread sleeps before it looks for a handler to run.
    POLL_S = 0.25

    def __init__(self) -> None:
        self.stop = threading.Event()
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Whether a stop was asked within `timeout` seconds (None: until
        one is). Sleeps in short steps, so a signal that reached another
        thread is handled within POLL_S (see the class)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = self.POLL_S if deadline is None else min(self.POLL_S,
                                                            deadline - time.monotonic())
            if self.stop.wait(max(0.0, left)):
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False

    def _handle(self, signum: int, frame: Any) -> None:
        if self.stop.is_set():
            _say_raw(f"tritonserver serve: signal {signum} again, exiting now")
            os._exit(1)
        self.stop.set()
        _say_raw(f"tritonserver serve: signal {signum}: stopping (in-flight requests get the "
                 "exit timeout to finish)")



def end_process(code: int, stop_started: Optional[float]) -> NoReturn:
    """The command's last step once serving stopped: the atexit handlers
    (stub processes, servers a stop gave up on), then the time the stop took
    (when one was timed), then the end of the process. It skips the native
    libraries' static destructors: the core's metrics thread alone holds the
    exit up to half of --metrics-interval-ms (it sleeps that long between
    polls), which would make the printed figure untrue; and it waits for no
    thread (a frontend's or a stop's thread left by an error would hold the
    exit forever)."""
    atexit._run_exitfuncs()
    if stop_started is not None:
        say(f"tritonserver serve: stopped in {time.monotonic() - stop_started:.1f} s")
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # nobody reads any more: nothing to flush to
            pass
    os._exit(code)
