"""``python -m tritonserver serve`` without ``--ray``: an in-process Server
behind the HTTP, gRPC and metrics frontends, OpenAI's with
``--openai-port`` and SageMaker's with ``--allow-sagemaker`` (flags:
``tritonserver._cli.serve_flags``).

It runs until SIGINT or SIGTERM, then stops accepting, lets requests in
flight finish within ``--exit-timeout-secs``, stops the server and exits 0.
A second signal exits at once (status 1). Unlike the executable, every
endpoint listens on 127.0.0.1 unless an address is given.
"""

from __future__ import annotations

import argparse
import threading
import time
from typing import Any, Optional

import tritonserver
from tritonserver._control.load_reasons import failure_lines
from tritonserver._cli.option_flags import warnings as option_warnings
from tritonserver._cli.sagemaker_flags import check_ports as check_sagemaker_ports
from tritonserver._cli.serve_flags import (COMPRESSION_LEVELS, Signals, end_process, say,
                                           server_options, tls_options)
from tritonserver._server import startup_failures, tracing_of
# Imported here, not when serving starts: without the serve extra this
# module's import fails, saying how to install it (tritonserver._cli.serve).
from tritonserver.frontends import KServeGrpc, KServeHttp, Metrics, OpenAI, SageMaker
from tritonserver._cli.trace_flags import DEPRECATED_FLAGS, deprecation_warnings, start_settings


def _model_table(server: Any) -> str:
    failures = startup_failures(server)
    rows = [(m.name, str(m.version) if m.version >= 0 else "-", m.state or "-",
             (m.reason or failures.get(m.name) or "").replace("\n", " ")[:80])
            for m in server.models().values()]
    if not rows:
        return "no models"
    headers = ("Model", "Version", "Status", "Reason")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    out = [line, "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths)) + " |", line]
    out += ["| " + " | ".join(v.ljust(w) for v, w in zip(r, widths)) + " |" for r in rows]
    out.append(line)
    return "\n".join(out)


def run(args: argparse.Namespace, signals: Optional[Signals] = None,
        end_process: bool = False) -> int:
    """Serve until a signal; ``end_process``: the process ends when serving
    does (the command line), so the time the stop took is measured to the
    end (see tritonserver._cli.serve_flags.end_process)."""
    try:
        options = server_options(args)
        deprecated = {key: getattr(args, key) for key in DEPRECATED_FLAGS}
        for warning in option_warnings(args) + deprecation_warnings(deprecated):
            say(warning)
        tracing = start_settings(args.trace_config, deprecated)
        check_sagemaker_ports(args)
        sagemaker = _sagemaker_options(args)
    except (ValueError, tritonserver.TritonError) as e:
        say(f"tritonserver serve: {e}")
        return 2
    signals = signals or Signals()
    signals.install()
    tls = tls_options(args)
    server = tritonserver.Server(options)
    tracing_of(server).configure(**tracing)
    frontends: list[Any] = []
    try:
        try:
            server.start(wait_until_ready=False)
            say(_model_table(server))
            if args.allow_grpc:
                frontends.append(KServeGrpc(server, KServeGrpc.Options(
                    address=args.grpc_address, port=args.grpc_port,
                    reuse_port=args.reuse_grpc_port, use_ssl=args.grpc_use_ssl,
                    use_mutual_auth=args.grpc_use_ssl_mutual, server_cert=args.grpc_server_cert,
                    server_key=args.grpc_server_key, root_cert=args.grpc_root_cert,
                    infer_compression_level=COMPRESSION_LEVELS[
                        args.grpc_infer_response_compression_level],
                    keepalive_time_ms=args.grpc_keepalive_time,
                    keepalive_timeout_ms=args.grpc_keepalive_timeout,
                    keepalive_permit_without_calls=args.grpc_keepalive_permit_without_calls,
                    http2_max_pings_without_data=args.grpc_http2_max_pings_without_data,
                    http2_min_recv_ping_interval_without_data_ms=(
                        args.grpc_http2_min_recv_ping_interval_without_data),
                    http2_max_ping_strikes=args.grpc_http2_max_ping_strikes,
                    max_connection_age_ms=args.grpc_max_connection_age,
                    max_connection_age_grace_ms=args.grpc_max_connection_age_grace,
                    max_input_size=args.grpc_max_input_size,
                    forward_header_pattern=args.grpc_header_forward_pattern,
                    restricted_features=list(args.grpc_restricted_protocol),
                    infer_allocation_pool_size=args.grpc_infer_allocation_pool_size,
                    allow_client_shm=args.allow_client_shm)).start())
                say(f"Started GRPCInferenceService at {frontends[-1].url}")
            if args.allow_http:
                frontends.append(KServeHttp(server, KServeHttp.Options(
                    address=args.http_address, port=args.http_port,
                    reuse_port=args.reuse_http_port,
                    thread_count=max(1, args.http_thread_count),
                    header_forward_pattern=args.http_header_forward_pattern,
                    max_input_size=args.http_max_input_size,
                    restricted_features=list(args.http_restricted_api),
                    allow_client_shm=args.allow_client_shm, **tls)).start())
                say(f"Started HTTPService at {frontends[-1].url}"
                    + (" (HTTPS)" if tls else ""))
            if sagemaker is not None:
                frontends.append(SageMaker(server, sagemaker).start())
                say(f"Started Sagemaker HTTPService at {args.http_address}:{frontends[-1].port}")
            if args.openai_port is not None:
                frontends.append(OpenAI(server, OpenAI.Options(
                    address=args.openai_address, port=args.openai_port,
                    reuse_port=args.reuse_openai_port,
                    max_input_size=args.openai_max_input_size,
                    restricted_features=list(args.openai_restricted_api),
                    tokenizer=args.openai_tokenizer, **tls)).start())
                say(f"Started OpenAIService at {args.openai_address}:{frontends[-1].port}"
                    + (" (HTTPS)" if tls else ""))
            if args.allow_metrics:
                frontends.append(Metrics(server, Metrics.Options(
                    address=args.metrics_address, port=args.metrics_port, **tls)).start())
                say(f"Started Metrics Service at {args.metrics_address}:{frontends[-1].port}")
        except tritonserver.TritonError as e:
            say(f"tritonserver serve: {type(e).__name__}: {e}")
            return 1
        say(_readiness(server))
        _wait(server, args, signals)
        return _shutdown(server, frontends, args.exit_timeout_secs, end_process)
    finally:
        for frontend in frontends:
            try:
                frontend.stop(timeout=0)
            except Exception:
                pass
        try:
            server.stop()
        except Exception:
            pass
        signals.restore()


def _sagemaker_options(args: argparse.Namespace) -> Optional[Any]:
    """SageMaker.Options from the flags (None without --allow-sagemaker):
    at --http-address, with the HTTP service's input size limit, restricted
    APIs and shared memory setting, as the executable applies them; the
    SAGEMAKER_TRITON_* variables are read here. An inference type Triton's
    service would refuse on every /invocations is said once."""
    if not args.allow_sagemaker:
        return None
    options = SageMaker.Options(
        address=args.http_address, port=args.sagemaker_port,
        thread_count=max(1, args.sagemaker_thread_count),
        max_input_size=args.http_max_input_size,
        restricted_features=list(args.http_restricted_api),
        allow_client_shm=args.allow_client_shm)
    refusal = options.inference_type_error
    if refusal is not None:
        say(f"tritonserver serve: warning: {refusal} (the answer to every /invocations)")
    return options


def _wait(server: Any, args: argparse.Namespace, signals: Signals) -> None:
    poll = args.model_control_mode == "poll" and args.repository_poll_secs > 0
    while not signals.wait(args.repository_poll_secs if poll else None):
        if poll:
            try:
                server.poll_model_repository()
            except Exception as e:  # a bad model in the repository: say so, go on
                say(f"tritonserver serve: polling the repository: {e}")


def _readiness(server: Any) -> str:
    failed = failure_lines(startup_failures(server))
    if server.ready():
        return "tritonserver serve: ready" + (
            f"\ntritonserver serve: models that failed to load:{failed}" if failed else "")
    return ("tritonserver serve: live but not ready (/v2/health/ready answers 400): "
            + (f"models failed to load:{failed}" if failed else "models are not ready"))


def _shutdown(server: Any, frontends: list[Any], timeout: int, end: bool) -> int:
    start = time.monotonic()
    errors: list[str] = []

    def stop(frontend: Any) -> None:
        try:
            frontend.stop(timeout=timeout)
        except Exception as e:
            errors.append(f"{type(frontend).__name__}: {e}")

    threads = [threading.Thread(target=stop, args=(f,), daemon=True) for f in frontends]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 15)
    frontends.clear()
    try:
        server.stop()
    except Exception as e:
        errors.append(f"server: {e}")
    for error in errors:
        say(f"tritonserver serve: while stopping: {error}")
    if end:
        end_process(0, start)
    say(f"tritonserver serve: stopped in {time.monotonic() - start:.1f} s")
    return 0


