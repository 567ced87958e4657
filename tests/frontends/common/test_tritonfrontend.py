"""Programs written for NVIDIA's frontend package (``from tritonfrontend
import KServeHttp, KServeGrpc, Metrics``) run on this package's frontends:
NVIDIA's example program's steps and its OpenAI frontend's start-up of the
KServe frontends, with tritonclient on the other end."""

from __future__ import annotations

import urllib.request

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

import tritonfrontend
import tritonserver
from tritonfrontend import KServeGrpc, KServeHttp, Metrics


def test_the_names_are_this_packages_frontends():
    import tritonfrontend._api._kservegrpc as kservegrpc
    from tritonserver import frontends

    assert (KServeHttp, KServeGrpc, Metrics) == (frontends.KServeHttp, frontends.KServeGrpc,
                                                 frontends.Metrics)
    assert tritonfrontend._api.KServeHttp is KServeHttp
    assert kservegrpc.Grpc_compression_level is KServeGrpc.Grpc_compression_level


def test_nvidias_options_fields_are_taken():
    """Every field of NVIDIA's Options dataclasses, by name."""
    KServeHttp.Options(address="127.0.0.1", port=0, reuse_port=False, thread_count=1,
                       header_forward_pattern="")
    KServeGrpc.Options(address="127.0.0.1", port=0, reuse_port=False, use_ssl=False,
                       server_cert="", server_key="", root_cert="", use_mutual_auth=False,
                       keepalive_time_ms=7_200_000, keepalive_timeout_ms=20_000,
                       keepalive_permit_without_calls=False, http2_max_pings_without_data=2,
                       http2_min_recv_ping_interval_without_data_ms=300_000,
                       http2_max_ping_strikes=2, max_connection_age_ms=0,
                       max_connection_age_grace_ms=0,
                       infer_compression_level=KServeGrpc.Grpc_compression_level.NONE,
                       infer_thread_count=2, infer_allocation_pool_size=8,
                       max_response_pool_size=2_147_483_647, forward_header_pattern="")
    Metrics.Options(address="127.0.0.1", port=0, thread_count=1)


def test_a_wrong_options_type_is_an_invalid_argument(frontend_server):
    with pytest.raises(tritonserver.InvalidArgumentError):
        KServeHttp(frontend_server, KServeGrpc.Options())


def test_nvidias_example_program_steps(frontend_server):
    """src/python/examples/example.py of the server repository: a context
    managed KServeHttp, tritonclient's infer, the frontend stopped on exit;
    and the OpenAI frontend's start()/stop() of both KServe frontends."""
    x = np.arange(16, dtype=np.float32)
    with KServeHttp(frontend_server, KServeHttp.Options(port=0)) as http_service:
        client = httpclient.InferenceServerClient(http_service.url)
        tensor = httpclient.InferInput("INPUT0", [16], "FP32")
        tensor.set_data_from_numpy(x)
        y = np.full(16, 2, dtype=np.float32)
        other = httpclient.InferInput("INPUT1", [16], "FP32")
        other.set_data_from_numpy(y)
        result = client.infer("add_sub_fp32", inputs=[tensor, other])
        assert np.array_equal(result.as_numpy("OUTPUT0"), x + y)
        client.close()
        url = http_service.url
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://{url}/v2/health/live", timeout=5)

    grpc_service = KServeGrpc(frontend_server, KServeGrpc.Options(port=0))
    grpc_service.start()
    try:
        client = grpcclient.InferenceServerClient(grpc_service.url)
        assert client.is_server_ready() and client.is_model_ready("add_sub_fp32")
        client.close()
    finally:
        grpc_service.stop()
