"""What the trace tests share (test_trace.py, test_otel.py): a server with
HTTP and gRPC frontends, for a module; an ensemble of two identity_fp32 steps."""

from __future__ import annotations

from typing import Iterator

import pytest

from conftest import stop_within
from frontends.conftest import Endpoints, start_test_server
from tritonserver.frontends import KServeGrpc, KServeHttp


@pytest.fixture(scope="module")
def endpoints() -> Iterator[Endpoints]:
    server = start_test_server(startup_models=["identity_fp32", "add_sub_int32",
                                               "identity_bytes"])
    http = KServeHttp(server, KServeHttp.Options(port=0)).start()
    grpc = KServeGrpc(server, KServeGrpc.Options(port=0)).start()
    try:
        yield Endpoints(server, http, grpc, None)  # type: ignore[arg-type]
    finally:
        http.stop(timeout=5)
        grpc.stop(timeout=5)
        stop_within(server)


# Model "twice": IN -> identity_fp32 -> identity_fp32 -> OUT.
ENSEMBLE = """name: "twice"
platform: "ensemble"
max_batch_size: 0
input [ { name: "IN", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "OUT", data_type: TYPE_FP32, dims: [ -1 ] } ]
ensemble_scheduling { step [
  { model_name: "identity_fp32", model_version: -1,
    input_map { key: "INPUT0", value: "IN" }, output_map { key: "OUTPUT0", value: "MID" } },
  { model_name: "identity_fp32", model_version: -1,
    input_map { key: "INPUT0", value: "MID" }, output_map { key: "OUTPUT0", value: "OUT" } } ] }
"""
