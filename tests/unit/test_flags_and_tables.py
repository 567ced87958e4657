"""Tests of the serve command's flags (_cli.serve_flags: flags to Options,
bad flags refused; _cli.trace_flags: --trace-config to Tracing's start
settings), the metrics' JSON form (_metrics) and the data type tables
(_datatypes)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tritonserver
from tritonserver import DataType, InvalidArgumentError, UnsupportedError
from tritonserver import _datatypes as dt
from tritonserver._cli.serve_flags import build_parser, server_options
from tritonserver._cli.trace_flags import deprecation_warnings, start_settings
from tritonserver._metrics import prometheus_to_json
from tritonserver._trace import DISABLED, TENSORS, TIMESTAMPS

SETTINGS = settings(max_examples=100, deadline=None, database=None)


# ---- serve flags -----------------------------------------------------------------------


def options(*argv):
    return server_options(build_parser().parse_args(list(argv)))


def test_flags_to_options():
    o = options("--model-repository", "/a", "--model-store=/b", "--model-control-mode=explicit",
                "--load-model", "m1", "--load-model=m2", "--strict-model-config",
                "--backend-config=onnxruntime,default-max-batch-size=8",
                "--backend-config=onnxruntime,x=", "--log-verbose=2", "--log-info=off",
                "--log-format", "ISO8601", "--allow-metrics=false", "--metrics-interval-ms=500",
                "--exit-timeout-secs=3", "--id=srv", "--model-namespacing", "yes")
    assert isinstance(o, tritonserver.Options)
    assert o.model_repository == ["/a", "/b"] and o.server_id == "srv"
    assert o.model_control_mode == tritonserver.ModelControlMode.EXPLICIT
    assert o.startup_models == ["m1", "m2"] and o.strict_model_config is True
    assert o.backend_configuration == {"onnxruntime": {"default-max-batch-size": "8", "x": ""}}
    assert o.log_verbose == 2 and o.log_info is False and o.log_warn is True
    assert o.log_format == tritonserver.LogFormat.ISO8601
    assert o.metrics is False and o.metrics_interval == 500 and o.exit_timeout == 3
    assert o.model_namespacing is True


def test_defaults_are_the_executables():
    o = options("--model-repository=/r")
    assert o.model_control_mode == tritonserver.ModelControlMode.NONE
    assert o.strict_model_config is False and o.strict_readiness is True
    assert o.exit_timeout == 30 and o.log_format == tritonserver.LogFormat.DEFAULT
    assert options("--model-repository=/r", "--disable-auto-complete-config").strict_model_config
    args = build_parser().parse_args(["--model-repository=/r"])
    assert (args.http_port, args.grpc_port, args.metrics_port) == (8000, 8001, 8002)
    assert args.http_address == "127.0.0.1" and args.http_max_input_size == 64 << 20


@pytest.mark.parametrize("argv", [
    ["--http-port=70000"], ["--http-port=-1"], ["--grpc-port=x"], ["--log-info=maybe"],
    ["--model-control-mode=sometimes"], ["--log-format=json"], ["--repository-poll-secs=-2"],
    ["--model-repo=/r"],  # no abbreviations
    ["--no-such-flag"],
])
def test_bad_flags_are_refused_by_the_parser(argv, capsys):
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["--model-repository=/r"] + argv)
    assert e.value.code == 2
    assert "error:" in capsys.readouterr().err


@pytest.mark.parametrize("argv,message", [
    ([], "--model-repository is required"),
    (["--model-repository=/r", "--load-model=m"], "needs --model-control-mode=explicit"),
    (["--model-repository=/r", "--model-control-mode=explicit", "--load-model=*",
      "--load-model=m"], "must be the only --load-model"),
    (["--model-repository=/r", "--backend-config=onnxruntime"], "expected <backend>,"),
    (["--model-repository=/r", "--backend-config=,a=b"], "expected <backend>,"),
    (["--model-repository=/r", "--backend-config=x,=b"], "expected <backend>,"),
])
def test_bad_flag_combinations_are_refused(argv, message):
    with pytest.raises(ValueError, match=message):
        options(*argv)


@given(st.lists(st.sampled_from(["--http-port", "--log-verbose", "--strict-readiness",
                                 "--model-control-mode", "--backend-config", "--load-model"]),
                max_size=4),
       st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=8), max_size=4))
@SETTINGS
def test_any_flags_give_options_or_a_clear_refusal(flags, values):
    argv = ["--model-repository=/r"] + [f"{f}={v}" for f, v in zip(flags, values)]
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:
        assert e.code == 2
        return
    try:
        assert isinstance(server_options(args), tritonserver.Options)
    except ValueError as e:
        assert str(e).startswith("--")


# ---- trace flags -----------------------------------------------------------------------


def test_trace_config_to_start_settings():
    assert start_settings([]) == {"trace_file": "", "rate": 1000, "count": -1,
                                  "log_frequency": 0, "level": DISABLED, "mode": "triton",
                                  "extras": []}
    got = start_settings(["level=TIMESTAMPS", "level=tensors", "rate=5", "count=9",
                          "triton,file=/t.json", "Triton,log-frequency=2", "triton,other=1",
                          "opentelemetry,url=x"])
    assert got == {"trace_file": "/t.json", "rate": 5, "count": 9, "log_frequency": 2,
                   "level": TIMESTAMPS | TENSORS, "mode": "triton", "extras": [("other", "1")]}
    assert start_settings(["level=TENSORS", "level=off"])["level"] == DISABLED


def test_deprecated_trace_flags_are_read_and_overridden():
    old = {"trace_file": "/old.json", "trace_level": ["TIMESTAMPS"], "trace_rate": "7",
           "trace_count": "3", "trace_log_frequency": "4"}
    got = start_settings([], old)
    assert (got["trace_file"], got["level"], got["rate"], got["count"], got["log_frequency"]) \
        == ("/old.json", TIMESTAMPS, 7, 3, 4)
    assert start_settings(["rate=9"], old)["rate"] == 9
    warnings = deprecation_warnings(old)
    assert len(warnings) == 5 and "'--trace-rate' has been deprecated" in warnings[2]
    assert deprecation_warnings({}) == []


@pytest.mark.parametrize("configs,deprecated,message", [
    ([",rate=1"], None, "No trace mode specified"),
    (["rate"], None, "--trace-config option format is"),
    (["rate="], None, "--trace-config option format is"),
    (["zipkin,rate=1"], None, "invalid value for trace mode option: zipkin"),
    (["rate=x"], None, 'Bad option: "--trace-config rate".\nInvalid option value. Got x'),
    (["count=99999999999"], None, "out of bound"),
    (["level=loud"], None, "invalid value for trace level option: loud"),
    (["mode=opentelemetry", "opentelemetry,bsp_max_queue_size=x"], None,
     'Bad option: "--trace-config opentelemetry,bsp_max_queue_size".\nInvalid option value. '
     'Got x'),
    (["mode=opentelemetry", "opentelemetry,bsp_schedule_delay=99999999999999999999"], None,
     "Provided option value is out of bound"),
    (["triton,log-frequency=q"], None, 'Bad option: "--trace-config triton,log-frequency"'),
    ([], {"trace_rate": "x"}, 'Bad option: "--trace-rate"'),
    ([], {"trace_level": ["bad"]}, 'Bad option: "--trace-level"'),
])
def test_trace_config_refusals(configs, deprecated, message):
    with pytest.raises(ValueError) as e:
        start_settings(configs, deprecated)
    assert message in str(e.value)


@given(st.lists(st.text(st.sampled_from("triton,opentelmy=rate01-level:file"), max_size=16),
                max_size=4))
@SETTINGS
def test_trace_config_any_text(configs):
    try:
        got = start_settings(configs)
    except ValueError:
        return
    common = {"trace_file", "rate", "count", "log_frequency", "level", "mode"}
    assert set(got) == common | ({"otel"} if got["mode"] == "opentelemetry" else {"extras"})


# ---- metrics as JSON -------------------------------------------------------------------


PROMETHEUS = r'''
# HELP nv_inference_count Number of inferences performed (does not include cached requests)
# TYPE nv_inference_count counter
nv_inference_count{model="m",version="1"} 3
nv_inference_count{model="q\"uote\\d",version="2"} 1.5e+03
# HELP nv_latency Latency with a "quote" and a \\ and\nnew line
# TYPE nv_latency summary
nv_latency_sum{model="m"} +Inf
nv_latency_count{model="m"} NaN 1712345678
nv_latency{model="m",quantile="0.5"} -Inf
loose_metric 7
garbage line that is not a sample {
# a comment
'''


def test_prometheus_to_json():
    families = json.loads(prometheus_to_json(PROMETHEUS))
    assert list(families) == ["nv_inference_count", "nv_latency", "loose_metric"]
    count = families["nv_inference_count"]
    assert count["type"] == "counter" and count["help"].startswith("Number of inferences")
    assert count["samples"] == [
        {"labels": {"model": "m", "version": "1"}, "value": 3.0},
        {"labels": {"model": 'q"uote\\d', "version": "2"}, "value": 1500.0}]
    latency = families["nv_latency"]
    assert latency["help"] == 'Latency with a "quote" and a \\ and\nnew line'
    assert latency["samples"] == [
        {"labels": {"model": "m"}, "value": "+Inf", "name": "nv_latency_sum"},
        {"labels": {"model": "m"}, "value": "NaN", "name": "nv_latency_count"},
        {"labels": {"model": "m", "quantile": "0.5"}, "value": "-Inf"}]
    assert families["loose_metric"] == {"help": "", "type": "untyped",
                                        "samples": [{"labels": {}, "value": 7.0}]}
    assert prometheus_to_json("") == "{}"


@given(st.text(max_size=200))
@SETTINGS
def test_prometheus_to_json_any_text_is_valid_json(text):
    families = json.loads(prometheus_to_json(text))
    for family in families.values():
        assert set(family) == {"help", "type", "samples"}


# ---- data type tables ------------------------------------------------------------------


FIXED = [d for d in DataType if d not in (DataType.INVALID, DataType.BYTES, DataType.BF16)]


@pytest.mark.parametrize("data_type", FIXED)
def test_fixed_size_types_round_trip(data_type):
    dtype = dt.to_numpy_dtype(data_type)
    assert dt.from_numpy_dtype(dtype) == data_type
    assert dt.from_numpy_dtype(dtype.newbyteorder(">")) == data_type or dtype.itemsize == 1
    assert dt.from_dlpack_dtype(*dt.to_dlpack_dtype(data_type), 1) == data_type
    assert dt.from_config_name(dt.to_config_name(data_type)) == data_type
    assert dt.data_type_by_dtype()[dtype] == int(data_type)


def test_names_bytes_and_bf16():
    assert dt.from_config_name("TYPE_STRING") == DataType.BYTES
    assert dt.from_config_name("bytes") == DataType.BYTES
    assert dt.from_config_name("type_fp16") == DataType.FP16
    assert dt.to_config_name(DataType.BYTES) == "TYPE_STRING"
    assert dt.to_numpy_dtype(DataType.BYTES) == np.dtype(object)
    for dtype in (np.dtype(object), np.dtype("S3"), np.dtype("U2")):
        assert dt.from_numpy_dtype(dtype) == DataType.BYTES
    assert dt.to_dlpack_dtype(DataType.BF16) == (dt.DL_BFLOAT, 16)
    assert dt.from_dlpack_dtype(dt.DL_UINT, 1, 1) == DataType.BOOL
    with pytest.raises(UnsupportedError, match="BF16 has no numpy dtype"):
        dt.to_numpy_dtype(DataType.BF16)
    with pytest.raises(UnsupportedError, match="cannot be exported through DLPack"):
        dt.to_dlpack_dtype(DataType.BYTES)
    with pytest.raises(UnsupportedError, match="lanes=4"):
        dt.from_dlpack_dtype(dt.DL_FLOAT, 32, 4)
    with pytest.raises(InvalidArgumentError, match="complex128 has no Triton data type"):
        dt.from_numpy_dtype(np.complex128)
    for bad in ("TYPE_INVALID", "INVALID", "FLOAT", ""):
        with pytest.raises(InvalidArgumentError, match="unknown data type"):
            dt.from_config_name(bad)
