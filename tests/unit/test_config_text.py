"""Tests of tritonserver._control.config_text: config.pbtxt -> protobuf's JSON form, without protobuf.

The reference is protobuf itself: ``text_format.Parse`` into the ModelConfig
class the frontends build from the same .proto (frontends/grpc/protos.py, from the
descriptor set the build compiles). What the core needs is JSON that parses (with
JsonStringToMessage) to the message the text gives, so the checks parse our
JSON back with ``json_format.Parse`` and compare the two messages' dict forms
(``MessageToDict``, which writes NaN as "NaN" and so compares equal to itself).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("google.protobuf")
pytest.importorskip("hypothesis")

from google.protobuf import descriptor, json_format, text_format  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tritonserver._control.config_text import (  # noqa: E402
    _TEXT_LEXER,
    ConfigTextError,
    _Cursor,
    _Schema,
    _schema,
    _TextParser,
    parse_model_config,
)
from tritonserver._package_files import package_file  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
FD = descriptor.FieldDescriptor
# No example database: failing examples are not saved under .hypothesis/ in the checkout.
SETTINGS = settings(max_examples=300, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@functools.lru_cache(maxsize=None)
def model_config_class() -> Any:
    """inference.ModelConfig, built as the frontends build it (loaded from its
    file, so the frontends' optional dependencies are not needed)."""
    spec = importlib.util.spec_from_file_location("_test_config_text_protos",
                                                  package_file("frontends", "grpc", "protos.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.messages().ModelConfig


def as_dict(message: Any) -> dict[str, Any]:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def reference(text: str) -> dict[str, Any]:
    message = model_config_class()()
    text_format.Parse(text, message)
    return as_dict(message)


def through_json(ours: dict[str, Any]) -> dict[str, Any]:
    message = model_config_class()()
    json_format.Parse(json.dumps(ours, allow_nan=False), message)
    return as_dict(message)


def assert_same_as_protobuf(text: str) -> dict[str, Any]:
    ours = parse_model_config(text)
    assert through_json(ours) == reference(text)
    return ours


def repository_configs() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files", "*.pbtxt"], cwd=REPO, capture_output=True,
                             text=True, check=True).stdout
        return sorted(out.split())
    except (OSError, subprocess.CalledProcessError):
        return sorted(str(p.relative_to(REPO)) for p in REPO.rglob("*.pbtxt") if "build" not in p.parts)


@pytest.mark.parametrize("path", repository_configs())
def test_repository_configs(path: str) -> None:
    text = (REPO / path).read_text(encoding="utf-8")
    try:
        expected = reference(text)
    except text_format.ParseError:  # a deliberately broken one: we must refuse it too
        with pytest.raises(ConfigTextError, match=r"line \d+, column \d+"):
            parse_model_config(text)
        return
    assert through_json(parse_model_config(text)) == expected


HAND_WRITTEN = [
    # An ensemble, with most sections that do not depend on the scheduler.
    """
    # comments anywhere
    name: "ens"  # after a value
    platform: "ensemble"
    max_batch_size: 16
    version_policy: { specific { versions: [1, 3] versions: 0x7fffffffffffffff } }
    input [
      { name: "IN", data_type: TYPE_STRING, dims: [ -1 ], format: FORMAT_NONE, reshape: { shape: [ ] } },
      < name: 'IMG' data_type: TYPE_UINT8 format: FORMAT_NHWC dims: [224, 224, 3] optional: true
        allow_ragged_batch: True is_shape_tensor: false is_non_linear_format_io: f >
    ]
    output { name: "OUT" data_type: TYPE_FP32 dims: 10 dims: -1 label_filename: "labels.txt"
             reshape { shape: 10 } }
    ensemble_scheduling {
      step [
        { model_name: "pre" model_version: -1 input_map { key: "RAW" value: "IN" }
          output_map { key: "PRE_OUT" value: "mid" } },
        { model_name: "infer" model_version: 3
          input_map [ { key: "X" value: "mid" }, { key: "Y", value: "IMG" } ]
          output_map { key: "Z" value: "OUT" } model_namespace: "ns" }
      ]
      max_inflight_requests: 4
    }
    parameters { key: "a" value { string_value: "1" } }
    parameters [ { key: "b", value: { string_value: "two" } }, { key: "a" value: < string_value: "again" > } ]
    model_repository_agents { agents [ { name: "checksum" parameters { key: "MD5:file" value: "abc" } } ] }
    metric_tags { key: "team" value: "ml" }
    cc_model_filenames { key: "7.5" value: "model_75.plan" }
    """,
    # Dynamic batching, instance groups, batch inputs and outputs, warmup.
    """
    name: "dyn"; backend: "onnxruntime"; max_batch_size: 8;
    dynamic_batching {
      preferred_batch_size: [ 4, 8 ]
      max_queue_delay_microseconds: 100
      preserve_ordering: t
      priority_levels: 3
      default_priority_level: 2
      default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 18446744073709551615
                             allow_timeout_override: 1 max_queue_size: 4294967295 }
      priority_queue_policy { key: 1 value { timeout_action: REJECT max_queue_size: 2 } }
      priority_queue_policy [ { key: 2 value { default_timeout_microseconds: 0x10 } } ]
    }
    instance_group [
      { name: "g0" kind: KIND_GPU count: 2 gpus: [ 0, 1 ] host_policy: "numa0" profile: "p0" passive: false
        rate_limiter { resources [ { name: "R1" count: 4 global: true } ] priority: 2 }
        secondary_devices { kind: KIND_NVDLA device_id: 1 } },
      { kind: KIND_CPU count: 1 },
      { kind: KIND_MODEL, count: 0, gpus: 3 }
    ]
    batch_input [ { kind: BATCH_ACCUMULATED_ELEMENT_COUNT target_name: "ACC" data_type: TYPE_FP32
                    source_input: "IN" } ]
    batch_output { target_name: [ "OUT" ] kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: [ "IN" ] }
    response_cache { enable: true }
    model_transaction_policy { decoupled: True }
    model_warmup [
      { name: "w" batch_size: 1 count: 2
        inputs { key: "IN" value: { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } }
        inputs { key: "IN2" value { data_type: TYPE_INT32 dims: 1 random_data: true } } },
      { name: "file"
        inputs [ { key: "IN" value { data_type: TYPE_STRING dims: [1] input_data_file: "raw" } } ] }
    ]
    """,
    # Sequence batching: direct strategy, control inputs, state.
    """
    name: "seq"
    max_batch_size: 4
    sequence_batching {
      max_sequence_idle_microseconds: 5000000
      direct { max_queue_delay_microseconds: 100, minimum_slot_utilization: 0.5 }
      control_input [
        { name: "START" control [ { kind: CONTROL_SEQUENCE_START fp32_false_true: [ 0, 1 ] } ] },
        { name: "READY" control { kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] } },
        { name: "END" control { kind: CONTROL_SEQUENCE_END bool_false_true: [ false, true ] } },
        { name: "CORRID" control { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } }
      ]
      state [ { input_name: "INPUT_STATE" output_name: "OUTPUT_STATE" data_type: TYPE_INT32 dims: [ -1 ]
                initial_state { name: "init" data_type: TYPE_INT32 dims: [ 1 ] zero_data: true }
                initial_state { name: "from_file" data_type: TYPE_INT32 dims: [ 1 ] data_file: "state.bin" }
                use_same_buffer_for_input_output: true use_growable_memory: true } ]
      iterative_sequence: false
    }
    """,
    # Oldest strategy, optimization, operations, metrics, version policy.
    """
    sequence_batching { oldest { max_candidate_sequences: 4 preferred_batch_size: [2, 4]
                                 max_queue_delay_microseconds: 0 preserve_ordering: true } }
    optimization {
      graph { level: -1 }
      priority: PRIORITY_MAX
      cuda { graphs: true busy_wait_events: true output_copy_stream: true
        graph_spec [ { batch_size: 4 input { key: "IN" value { dim: [ 16, 32 ] } }
                       graph_lower_bound { batch_size: 1 input { key: "IN" value { dim: [ 1, 32 ] } } } } ] }
      execution_accelerators {
        gpu_execution_accelerator : [ { name : "tensorrt"
          parameters { key: "precision_mode" value: "FP16" }
          parameters { key: "max_workspace_size_bytes" value: "1073741824" } } ]
        cpu_execution_accelerator : [ { name : "openvino" } ]
      }
      input_pinned_memory { enable: false }
      output_pinned_memory: { enable: true }
      gather_kernel_buffer_threshold: 4294967295
      eager_batching: true
    }
    model_operations { op_library_filename: [ "libcustom.so", "libother.so" ] }
    model_metrics { metric_control [ { metric_identifier { family: "nv_inference_request_duration" }
                                       histogram_options { buckets: [ 0.5, 1, 1e3, 2.5e-1 ] } } ] }
    default_model_filename: "model.savedmodel"
    runtime: "model.py"
    version_policy { latest { num_versions: 2 } }
    """,
    'version_policy: { all: { } } name: "x"',
    "version_policy < all < > >",
    # String escapes, quotes and adjacent literals.
    r'''name: "tab\t nl\n quote\" apos\' bs\\ oct\101\0 hex\x41\x4 u\u00e9 U\U0001F600 ünï ✓"
        backend: 'single \'quoted\' "double"' ' and' " more"
        runtime: "a#b"  # not a comment inside the string''',
    "",
    "# only comments\n# at all\n",
    'name: "a", backend: "b"; max_batch_size: 1,',
    "max_batch_size: 0 instance_group { count: 0 kind: KIND_AUTO } dynamic_batching { }",
    "instance_group { count: 0 count: 3 } name: '' name: 'x'",  # a default may be given again
    "input { data_type: 11 format: 2 } input { data_type: 99 } input { data_type: -1 }",
    "max_batch_size: 0x10 input { dims: [-0x1, 010, 0, -0] }",
    "input { dims: [9223372036854775807, -9223372036854775808] } "
    "dynamic_batching { max_queue_delay_microseconds: 18446744073709551615 }",
    "model_metrics { metric_control { histogram_options { "
    "buckets: [inf, -inf, Infinity, -INFINITY, nan, NaN, 1e-3, 1.5f, 2F, .5, 5., 1e308, 5e-324, -0.0, "
    "1e400] } } }",
    "sequence_batching { direct { minimum_slot_utilization: -inff } control_input { control { "
    "fp32_false_true: [1e40, -1e40, 3.4028234663852886e38, 1e-50, nanf, 0.1] } } }",
    "sequence_batching { control_input { control { "
    "bool_false_true: [true, false, True, False, t, f, 1, 0] } } }",
    'parameters { value { string_value: "no key" } } metric_tags { key: "no value" } '
    "dynamic_batching { priority_queue_policy { value { max_queue_size: 3 } } "
    "priority_queue_policy { key: 9 } }",
    "dynamic_batching < default_queue_policy < max_queue_size: 1 > >",
    'input { name: "a" } output { name: "o" } input { name: "b" } output: [] input []',
    'input [] output [ ] parameters [] input { dims: [] }',
    "input{name:'x'dims:[1,2]}output{name:\"y\"}",
]


@pytest.mark.parametrize("text", HAND_WRITTEN)
def test_hand_written(text: str) -> None:
    assert_same_as_protobuf(text)


def test_json_mapping() -> None:
    text = """
      name: "m" max_batch_size: 4
      input { dims: [-1, 9223372036854775807] data_type: TYPE_FP32 }
      input { data_type: 11 }
      dynamic_batching { max_queue_delay_microseconds: 10
                         priority_queue_policy { key: 7 value { max_queue_size: 1 } } }
      parameters { key: "k" value { string_value: "v" } }
      metric_tags { key: "a" value: "b" }
      model_metrics { metric_control { histogram_options { buckets: [inf, -inf, 1.5, nan] } } }
    """
    expected = {
        "name": "m", "max_batch_size": 4,
        "input": [{"dims": ["-1", "9223372036854775807"], "data_type": "TYPE_FP32"},
                  {"data_type": "TYPE_FP32"}],
        "dynamic_batching": {"max_queue_delay_microseconds": "10",
                             "priority_queue_policy": {"7": {"max_queue_size": 1}}},
        "parameters": {"k": {"string_value": "v"}},
        "metric_tags": {"a": "b"},
        "model_metrics": {"metric_control": [
            {"histogram_options": {"buckets": ["Infinity", "-Infinity", 1.5, "NaN"]}}]},
    }
    ours = parse_model_config(text)
    assert ours == expected
    assert ours == reference(text)  # no explicit defaults here, so even the dicts agree
    json.dumps(ours, allow_nan=False)


def test_explicit_defaults_are_kept() -> None:
    ours = assert_same_as_protobuf("max_batch_size: 0 instance_group { count: 0 passive: false }")
    assert ours == {"max_batch_size": 0, "instance_group": [{"count": 0, "passive": False}]}


def test_string_escapes() -> None:
    ours = parse_model_config(
        r'name: "t\t n\n q\" s\' b\\ o\101\7 x\x41\x4 u\u00e9 U\U0001F600 pair\uD83D\uDE00 ?\? a\a"'
        r" 'adjacent' " + '"' + r"\303\251" + '"')
    assert ours["name"] == ("t\t n\n q\" s' b\\ oA\x07 xA\x04 u\u00e9 U\U0001F600 pair\U0001F600 ?? a\x07"
                            "adjacenté")


def test_errors_name_line_and_column() -> None:
    with pytest.raises(ConfigTextError) as info:
        parse_model_config('name: "a"\n\n  foo: 1\n')
    assert (info.value.line, info.value.column) == (3, 3)
    assert str(info.value) == "line 3, column 3: unknown field 'foo' in inference.ModelConfig"
    assert isinstance(info.value, ValueError)
    with pytest.raises(ConfigTextError) as info:
        parse_model_config('# x\nname: "abc\\qdef"')
    assert (info.value.line, info.value.column) == (2, 11)  # at the escape itself
    assert str(info.value) == "line 2, column 11: invalid escape '\\\\q' in string"


def test_schema_is_read_once() -> None:
    path = package_file("proto", "model_config.proto")
    parse_model_config("")
    assert _schema(path) is _schema(path)
    assert "inference.ModelConfig.ParametersEntry" in _schema(path).messages


# (text, line of the error, part of the message, whether protobuf's Python parser refuses it too)
MALFORMED = [
    ('name: "abc\nbackend: "x"', 1, "unterminated string", True),
    ('name: "a" "b', 1, "unterminated string", True),
    ("name: 'abc", 1, "unterminated string", True),
    ('name: "a"\nnot_a_field: 1', 2, "unknown field 'not_a_field'", True),
    ("input { nmae: 'x' }", 1, "unknown field 'nmae' in inference.ModelInput", True),
    ("dynamic_batching {\n  max_queue_delay_microseconds: 5\n", 3,
     "expected a field name or '}', found end of input", True),
    ("input { name: 'x'", 1, "found end of input", True),
    ("input < name: 'x' }", 1, "expected a field name or '>', found '}'", True),
    ("}", 1, "expected a field name, found '}'", True),
    ('input { name: "a" data_type: TYPE_FP31 }', 1, "enum inference.DataType", True),
    ("input { data_type: 'TYPE_FP32' }", 1, "enum inference.DataType", True),
    ("input { data_type: 2147483648 }", 1, "enum", True),
    ("instance_group { kind: KIND_FOO }", 1, "enum inference.ModelInstanceGroup.Kind", True),
    ("name { }", 1, "expected ':' after field 'name'", True),
    ("name: { }", 1, "expected a string value for field 'name', found '{'", True),
    ("input { dims: { } }", 1, "int64", True),
    ("\n\ndynamic_batching: 5", 3, "'{' or '<' to open message field 'dynamic_batching'", True),
    ('dynamic_batching: "x"', 1, "'{' or '<'", True),
    ("dynamic_batching: [ {} ]", 1, "'{' or '<'", True),
    ("max_batch_size: 2147483648", 1, "int32", True),
    ("instance_group { gpus: -2147483649 }", 1, "int32", True),
    ("model_warmup { batch_size: -1 }", 1, "uint32", True),
    ("dynamic_batching { max_queue_delay_microseconds: -1 }", 1, "uint64", True),
    ("dynamic_batching { max_queue_delay_microseconds: 18446744073709551616 }", 1, "uint64", True),
    ("input { dims: 1.5 }", 1, "int64", True),
    ("max_batch_size: true", 1, "int32", True),
    ("response_cache { enable: 2 }", 1, "bool", True),
    ("response_cache { enable: yes }", 1, "bool", True),
    ("sequence_batching { direct { minimum_slot_utilization: 0x10 } }", 1, "float", True),
    ("sequence_batching { direct { minimum_slot_utilization: 010 } }", 1, "float", True),
    ("sequence_batching { direct { minimum_slot_utilization: infinite } }", 1, "float", True),
    ('name: "a"\nname: "b"', 2, "field 'name' is given more than once", True),
    ("response_cache { }\nresponse_cache { }", 2, "more than once", True),
    ("parameters { key: 'a' value { string_value: 'x' } key: 'b' }", 1, "more than once", True),
    ("dynamic_batching {}\nsequence_batching {}", 2, "oneof 'scheduling_choice'", True),
    ("version_policy { latest {} all {} }", 1, "oneof 'policy_choice'", True),
    ("model_warmup { inputs { value { zero_data: false random_data: true } } }", 1, "oneof", True),
    ('name: ["a"]', 1, "expected a string value for field 'name', found '['", True),
    ("input { dims: [1, ] }", 1, "int64", True),
    ("input { dims: [1 2] }", 1, "expected ',' or ']'", True),
    ("input { dims: [1, 2 }", 1, "expected ',' or ']'", True),
    ("input { dims [1] }", 1, "expected ':' after field 'dims'", True),
    ("input { dims 1 }", 1, "expected ':'", True),
    ('name: "a" @', 1, "unexpected character '@'", True),
    ("[ext.field]: 1", 1, "expected a field name, found '['", True),
    ('name: "x" @ backend: "y"', 1, "unexpected character '@'", True),
    ('name: "x" }\n@', 1, "expected a field name, found '}'", True),  # the first fault is reported
    ("# a comment\nname: \"x\" backend", 2, "found end of input", True),
    ("name: 'x' ,, backend: 'y'", 1, "expected a field name, found ','", True),
    ("name: 'x';;", 1, "found ';'", True),
    ("max_batch_size: 1-2", 1, "expected a field name, found '-2'", True),
    ("max_batch_size: - 1", 1, "unexpected character '-'", True),
    ('name: "\\xff"', 1, "not valid UTF-8", True),
    ('name: "\\uD800"', 1, "invalid code point", True),
    # Protobuf's C++ parser (the core's) refuses these; its Python parser lets them through.
    ("name: 'bad \\q escape'", 1, "invalid escape", False),
    ('name: "\\?\\N{DIGIT ONE}"', 1, "invalid escape", False),
    ('name: "\\777"', 1, "invalid escape", False),
]


@pytest.mark.parametrize("text, line, message, protobuf_refuses", MALFORMED)
def test_malformed(text: str, line: int, message: str, protobuf_refuses: bool) -> None:
    with pytest.raises(ConfigTextError) as info:
        parse_model_config(text)
    assert info.value.line == line
    assert re.match(rf"line {line}, column \d+: ", str(info.value))
    assert message in str(info.value)
    if protobuf_refuses:
        with pytest.raises(Exception):
            reference(text)


# ---- the .proto reader, on a schema with what model_config.proto lacks ----

TEST_PROTO = """
syntax = "proto3";
/* a block
   comment */
package t.sub;
option go_package = "example.com/t";
message M {
  reserved 7, 9 to 11;
  reserved "old";
  option deprecated = true;
  bytes blob = 1 [deprecated = true, json_name = "b"];
  optional int32 maybe = 2;
  .t.sub.E e = 3;
  Inner.Deep deep = 4;
  map<int32, bool> flags = 5;
  map<bool, E> by_bool = 6;
  sfixed64 big = 8;
  message Inner { message Deep { double x = 1; } }
  oneof choice { string a = 12; Inner b = 13; }  // trailing comment
  ;
}
enum E { option allow_alias = true; E_ZERO = 0; E_ONE = 1; E_UNO = 1 [deprecated = true]; reserved 5; }
service S { rpc Do (M) returns (M) { option (x) = { a: 1 }; } }
"""


def parse_test_proto(text: str) -> dict[str, Any]:
    schema = _Schema(TEST_PROTO, "test.proto")
    return _TextParser(schema, _Cursor(text, _TEXT_LEXER)).message("t.sub.M", None)


def test_proto_reader() -> None:
    ours = parse_test_proto(
        r'blob: "\x00\xff" "\001" maybe: 0 e: E_UNO deep { x: 1e-3 } flags { key: -1 value: true } '
        "flags { key: 2 } by_bool { key: true value: E_ONE } by_bool { value: 1 } big: -5 b { }")
    assert ours == {"blob": "AP8B", "maybe": 0, "e": "E_ONE", "deep": {"x": 0.001},
                    "flags": {"-1": True, "2": False}, "by_bool": {"true": "E_ONE", "false": "E_ONE"},
                    "big": "-5", "b": {}}
    with pytest.raises(ConfigTextError, match="more than once"):
        parse_test_proto("maybe: 0 maybe: 1")  # optional: present once given, even as 0
    with pytest.raises(ConfigTextError, match="oneof 'choice'"):
        parse_test_proto("a: '' b { }")


@pytest.mark.parametrize("proto, line, message", [
    ("package p; message M { Missing m = 1; }", 1, "unknown type 'Missing'"),
    ("package p;\nmessage M {\n  int32 x = 1;\n", 4, "expected a field, or '}', found end of input"),
    ("message M { int32 x = one; }", 1, "expected an integer"),
    ("/* never closed\nmessage M {}", 1, "unexpected character '/'"),
    ("extend Foo { int32 x = 1; }", 1, "unexpected 'extend'"),
])
def test_proto_reader_errors(proto: str, line: int, message: str) -> None:
    with pytest.raises(ConfigTextError) as info:
        _Schema(proto, "bad.proto")
    assert info.value.line == line
    assert str(info.value).startswith(f"bad.proto: line {line}, column ")
    assert message in str(info.value)


# ---- random configurations: valid ones (built from protobuf's own descriptors) ----

INT_RANGES = {
    FD.TYPE_INT32: (-(2**31), 2**31 - 1), FD.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FD.TYPE_SFIXED32: (-(2**31), 2**31 - 1), FD.TYPE_UINT32: (0, 2**32 - 1), FD.TYPE_FIXED32: (0, 2**32 - 1),
    FD.TYPE_INT64: (-(2**63), 2**63 - 1), FD.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FD.TYPE_SFIXED64: (-(2**63), 2**63 - 1), FD.TYPE_UINT64: (0, 2**64 - 1), FD.TYPE_FIXED64: (0, 2**64 - 1),
}
MAX_DEPTH = 7  # deep enough for optimization.cuda.graph_spec.graph_lower_bound.input[].dim
SEPARATORS = st.sampled_from([" ", "\n", ",", ";", ", ", ";\n", "\t", "  # a comment, with { } [ ] : \"\n"])
SIMPLE_ESCAPES = {"\n": r"\n", "\t": r"\t", "\r": r"\r", "\a": r"\a", "\b": r"\b", "\f": r"\f", "\v": r"\v"}


@st.composite
def int_text(draw: Any, low: int, high: int) -> str:
    n = draw(st.integers(low, high))
    sign, form = "-" if n < 0 else "", draw(st.sampled_from(["dec", "dec", "hex", "oct"]))
    if form == "hex":
        return f"{sign}0x{abs(n):X}" if draw(st.booleans()) else f"{sign}0x{abs(n):x}"
    return f"{sign}0{abs(n):o}" if form == "oct" and n else str(n)


@st.composite
def float_text(draw: Any) -> str:
    value = draw(st.floats())
    if math.isnan(value):
        return str(draw(st.sampled_from(["nan", "NaN", "nanf"])))
    if math.isinf(value):
        return ("-" if value < 0 else "") + draw(st.sampled_from(["inf", "Infinity", "INF", "inff"]))
    return repr(value) + draw(st.sampled_from(["", "", "f", "F"]))


@st.composite
def string_text(draw: Any) -> str:
    value = draw(st.text(st.characters(blacklist_categories=("Cs",)), max_size=12))
    quote = draw(st.sampled_from(['"', "'"]))
    out = [quote]
    for char in value:
        how = draw(st.sampled_from(["plain", "plain", "plain", "octal", "hex", "u", "split"]))
        if char in (quote, "\\"):
            out.append("\\" + char)
        elif char in SIMPLE_ESCAPES:
            out.append(SIMPLE_ESCAPES[char])
        elif how == "octal":
            out.append("".join(f"\\{b:03o}" for b in char.encode()))
        elif how == "hex":
            out.append("".join(f"\\x{b:02x}" for b in char.encode()))
        elif how == "u" and ord(char) <= 0xFFFF:
            out.append(f"\\u{ord(char):04x}")
        elif how == "split":  # adjacent literals are one string
            out.append(f"{quote} {quote}{char}")
        else:
            out.append(char)
    return "".join(out) + quote


@st.composite
def value_text(draw: Any, field: Any, depth: int) -> str:
    if field.type == FD.TYPE_MESSAGE:
        opening, closing = draw(st.sampled_from([("{", "}"), ("<", ">")]))
        return f"{opening} {draw(message_body(field.message_type, depth + 1))} {closing}"
    if field.type == FD.TYPE_ENUM:
        values = field.enum_type.values
        return str(draw(st.one_of(st.sampled_from([v.name for v in values]),
                                  st.sampled_from([str(v.number) for v in values]),
                                  st.integers(-5, 40).map(str))))
    if field.type == FD.TYPE_BOOL:
        return str(draw(st.sampled_from(["true", "false", "True", "False", "t", "f", "1", "0"])))
    if field.type in (FD.TYPE_FLOAT, FD.TYPE_DOUBLE):
        return str(draw(float_text()))
    if field.type == FD.TYPE_STRING:
        return str(draw(string_text()))
    return str(draw(int_text(*INT_RANGES[field.type])))


@st.composite
def field_text(draw: Any, field: Any, depth: int) -> str:
    is_message = field.type == FD.TYPE_MESSAGE
    colon = draw(st.sampled_from(["", ":", ": "] if is_message else [":", ": ", " : "]))
    repeated = (field.is_repeated if hasattr(field, "is_repeated")  # maps too: repeated entries
                else field.label == FD.LABEL_REPEATED)
    if repeated and draw(st.booleans()):  # the list syntax
        items = draw(st.lists(value_text(field, depth), max_size=3))
        return f"{field.name}{colon} [" + ", ".join(items) + "]"
    values = draw(st.lists(value_text(field, depth), min_size=1, max_size=3 if repeated else 1))
    return " ".join(f"{field.name}{colon} {value}" for value in values)


@st.composite
def message_body(draw: Any, message: Any, depth: int) -> str:
    fields = [f for f in message.fields if depth < MAX_DEPTH or f.type != FD.TYPE_MESSAGE]
    if not fields:
        return ""
    chosen = draw(st.lists(st.sampled_from(fields), unique_by=lambda f: f.name,
                           max_size=8 if depth == 0 else 3))
    parts, oneofs = [], set()
    for field in chosen:
        oneof = field.containing_oneof
        if oneof is not None and oneof.name in oneofs:
            continue
        if oneof is not None:
            oneofs.add(oneof.name)
        parts.append(draw(field_text(field, depth)) + draw(SEPARATORS))
    return "".join(parts)


def valid_configs() -> Any:
    return message_body(model_config_class().DESCRIPTOR, 0)


@SETTINGS
@given(valid_configs())
def test_random_valid_configs(text: str) -> None:
    assert_same_as_protobuf(text)


# ---- random malformed text: refused with a ConfigTextError, or read as protobuf reads it ----

@functools.lru_cache(maxsize=None)
def vocabulary() -> list[str]:
    words = {"{", "}", "<", ">", "[", "]", ":", ",", ";", "-", "0x", "1", "-1", "1.5", "1e", "inf", "nan",
             "true", "t", '"', "'", '"str"', "'s'", "#", "\n", "\\", "\\x", "\\u12", "@", "/", ".", "0", "_"}
    pending = [model_config_class().DESCRIPTOR]
    while pending:
        message = pending.pop()
        for field in message.fields:
            words.add(field.name)
            if field.message_type is not None:
                pending.append(field.message_type)
            if field.enum_type is not None:
                words.update(v.name for v in field.enum_type.values)
    return sorted(words)


def refused_or_same_as_protobuf(text: str) -> None:
    try:
        ours = parse_model_config(text)
    except ConfigTextError as e:
        assert 1 <= e.line <= text.count("\n") + 1 and e.column >= 1
        assert re.match(rf"line {e.line}, column {e.column}: \S", str(e))
        return
    assert through_json(ours) == reference(text)


@SETTINGS
@given(st.one_of(st.text(max_size=80),
                 st.lists(st.sampled_from(vocabulary()), max_size=30).map(" ".join),
                 st.lists(st.sampled_from(vocabulary()), max_size=30).map("".join)))
def test_random_garbage(text: str) -> None:
    refused_or_same_as_protobuf(text)


@SETTINGS
@given(valid_configs(), st.data())
def test_random_damage_to_valid_configs(text: str, data: Any) -> None:
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(text)))
        edit = data.draw(st.sampled_from(["delete", "insert", "replace"]))
        if edit == "delete":
            text = text[:at] + text[at + data.draw(st.integers(1, 5)):]
        else:
            word = data.draw(st.one_of(st.sampled_from(vocabulary()), st.text(max_size=2)))
            text = text[:at] + word + text[at + (edit == "replace"):]
    refused_or_same_as_protobuf(text)
