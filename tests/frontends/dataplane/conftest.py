"""What the trace tests share (test_trace.py, test_otel.py): a server with the
models they use, for a module; an ensemble of two identity_fp32 steps."""

from __future__ import annotations

from typing import Iterator

import pytest

import tritonserver
from conftest import stop_within
from frontends.conftest import start_test_server


@pytest.fixture(scope="module")
def trace_server() -> Iterator[tritonserver.Server]:
    """A server with the three models the trace tests send to; a module takes it
    as its frontend_server (a fixture of this folder's conftest would replace
    the frontends' endpoints for every module here)."""
    server = start_test_server(startup_models=["identity_fp32", "add_sub_int32",
                                               "identity_bytes"])
    yield server
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
