"""Tests of the frontends' pieces that need no server: tensors from a
client's JSON lists and bytes (dataplane.tensors), model versions
(dataplane.state), the HTTP body within its size limit and its decompression
(http.wire), Triton's HTTP status and gRPC code per error, trace settings as
HTTP and gRPC send them, and the restricted-API options."""

from __future__ import annotations

import asyncio
import gzip
import struct
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tritonserver import (
    AlreadyExistsError,
    CancelledError,
    DataType,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    TritonError,
    UnavailableError,
    UnsupportedError,
)
from tritonserver._trace import DISABLED, TENSORS, TIMESTAMPS, parse_update
from tritonserver.frontends._restricted import (
    GRPC_KEY_PREFIX,
    FeatureGroup,
    Protocols,
    RestrictedFeatures,
    as_restricted,
    restriction_table,
)
from tritonserver.frontends.dataplane import tensors
from tritonserver.frontends.dataplane.state import Forbidden, PayloadTooLarge, parse_version
from tritonserver.frontends.grpc.codec import grpc_code_name
from tritonserver.frontends.grpc.trace import parse_grpc
from tritonserver.frontends.httpbase import wire

SETTINGS = settings(max_examples=200, deadline=None, database=None)


# ---- dataplane.tensors -----------------------------------------------------------------


def test_datatype_names_cover_the_enum():
    assert set(tensors.DATATYPE_NAME.values()) == set(tensors.NUMPY_DTYPE)
    assert tensors.DATATYPE_NAME[int(DataType.FP32)] == "FP32"
    assert tensors.ELEMENT_SIZE["BF16"] == 2 and tensors.ELEMENT_SIZE["BYTES"] == 0
    assert tensors.check_datatype("x", "INT8") == "INT8"
    for bad in ("int8", "TYPE_FP32", None, 3):
        with pytest.raises(InvalidArgumentError, match="invalid datatype"):
            tensors.check_datatype("x", bad)
    assert tensors.nbytes_of([2, 3], "FP64") == 48


@pytest.mark.parametrize("shape,count", [([], 1), ([0, 5], 0), ([2, 3, 4], 24), ((7,), 7)])
def test_element_count(shape, count):
    assert tensors.element_count("x", shape) == count


@pytest.mark.parametrize("shape,message", [
    ("12", "must hold non-negative integers"),
    (5, "must be a list"),
    ([-1], "non-negative"),
    ([1.0], "non-negative"),
    ([True], "non-negative"),
    ([1] * 33, "33 dimensions"),
    ([1 << 62, 2], (r"shape \[4611686018427387904,2\] causes total element count to exceed "
                    "maximum size of 9223372036854775807")),
])
def test_element_count_refuses(shape, message):
    with pytest.raises(InvalidArgumentError, match=message):
        tensors.element_count("x", shape)


def test_tensor_from_list_numbers():
    out = tensors.tensor_from_list("x", "INT32", [2, 2], [[1, 2], [3, 4]])
    assert out.dtype == np.int32 and out.tolist() == [[1, 2], [3, 4]]
    out = tensors.tensor_from_list("x", "UINT64", [2], [0, 2**64 - 1])
    assert out.dtype == np.uint64 and out.tolist() == [0, 2**64 - 1]
    assert tensors.tensor_from_list("x", "FP32", [], 1.5).tolist() == 1.5
    assert tensors.tensor_from_list("x", "BOOL", [2], [True, False]).tolist() == [True, False]


@pytest.mark.parametrize("datatype,shape,data,message", [
    ("INT8", [1], [300], "does not fit in INT8"),
    ("UINT64", [1], [2**64], "does not fit in UINT64"),
    ("INT32", [1], [1.5], "not INT32"),
    ("BOOL", [1], [1], "not BOOL"),
    ("FP32", [3], [1.0, 2.0], "2 elements of data for shape [3]"),
    ("FP32", [2], ["a", "b"], "not FP32"),
    ("BF16", [1], [1.0], "BF16 data cannot be given as JSON"),
    ("BYTES", [2], ["a"], "1 elements of data"),
    ("BYTES", [1], [1], "BYTES elements must be strings"),
    ("FP32", [2], [[1.0], [2.0, 3.0]], "3 elements of data for shape [2]"),
    ("FP32", [1], [[1.0]] * 2, "2 elements of data for shape [1]"),
])
def test_tensor_from_list_refuses(datatype, shape, data, message):
    with pytest.raises(InvalidArgumentError) as e:
        tensors.tensor_from_list("x", datatype, shape, data)
    assert message in str(e.value)


def test_tensor_from_list_reads_nesting_as_triton_does():
    """Any nesting is flattened (ragged too) up to Triton's depth of 100
    (server PR #8172), then refused with its text."""
    def nested(depth, value):
        for _ in range(depth):
            value = [value]
        return value

    assert tensors.tensor_from_list("x", "FP32", [3], [[1.0], [2.0, 3.0]]).tolist() == [1, 2, 3]
    for datatype, value in (("FP32", 1.5), ("INT64", 7), ("BYTES", "hi")):
        for depth in (1, 50, 65, 99):
            out = tensors.tensor_from_list("x", datatype, [1, 1], nested(depth, value))
            assert tuple(out.shape) == (1, 1)
        with pytest.raises(InvalidArgumentError) as e:
            tensors.tensor_from_list("x", datatype, [1, 1], nested(100, value))
        assert str(e.value) == "JSON nesting depth exceeds maximum allowed limit (100)"


def test_tensor_from_list_bytes_makes_length_prefixed_elements():
    out = tensors.tensor_from_list("x", "BYTES", [2], [["hé"], ["!"]])
    assert out.data_type == DataType.BYTES and tuple(out.shape) == (2,)
    assert out.to_bytes_array().tolist() == ["hé".encode(), b"!"]
    assert tensors.tensor_to_list("x", out) == ["hé", "!"]


def bytes_blob(items):
    return b"".join(struct.pack("<I", len(i)) + i for i in items)


def test_tensor_from_buffer_in_place_and_checked():
    raw = bytearray(np.arange(6, dtype="<i4").tobytes())
    out = tensors.tensor_from_buffer("x", "INT32", [2, 3], raw, 0, len(raw))
    assert out.tolist() == [[0, 1, 2], [3, 4, 5]]
    raw[0] = 9  # a view of the request's bytes
    assert out[0, 0] == 9
    assert tensors.tensor_from_buffer("x", "INT32", [1], raw, 4, 4).tolist() == [1]
    with pytest.raises(InvalidArgumentError, match="24 bytes of data for shape \\[5\\]"):
        tensors.tensor_from_buffer("x", "INT32", [5], raw, 0, 24)
    blob = bytes_blob([b"ab", b""])
    assert tensors.tensor_from_buffer("x", "BYTES", [2], blob, 0, len(blob)).size == len(blob)
    for data, count, message in ((bytes_blob([b"ab"]), 2, "fewer elements"),
                                 (bytes_blob([b"ab"])[:-1], 1, "runs past the end"),
                                 (bytes_blob([b"a", b"b"]), 1, "more bytes than its 1")):
        with pytest.raises(InvalidArgumentError, match=message):
            tensors.tensor_from_buffer("x", "BYTES", [count], data, 0, len(data))


@given(st.lists(st.binary(max_size=6), max_size=5), st.binary(max_size=12))
@SETTINGS
def test_bytes_layout_accepts_exactly_well_formed_data(items, noise):
    blob = bytes_blob(items)
    tensors.check_bytes_layout("x", blob, 0, len(blob), len(items))
    bad = blob + noise
    if noise:
        with pytest.raises(InvalidArgumentError):
            tensors.check_bytes_layout("x", bad, 0, len(bad), len(items))


@given(st.recursive(st.one_of(st.integers(), st.floats(allow_nan=False), st.text(max_size=3),
                              st.booleans(), st.none()),
                    lambda inner: st.lists(inner, max_size=3), max_leaves=12),
       st.sampled_from(sorted(tensors.NUMPY_DTYPE)),
       st.lists(st.integers(0, 3), max_size=3))
@SETTINGS
def test_tensor_from_list_never_fails_otherwise(data, datatype, shape):
    """Any JSON value: a tensor of the shape, or InvalidArgumentError."""
    try:
        out = tensors.tensor_from_list("x", datatype, shape, data)
    except InvalidArgumentError:
        return
    assert tuple(out.shape) == tuple(shape)


# ---- dataplane.state.parse_version -----------------------------------------------------


def test_parse_version():
    assert parse_version("") == -1
    assert parse_version("0") == 0 and parse_version("17") == 17
    assert parse_version("9" * 18) == int("9" * 18)
    for bad in ("-1", "1.0", " 1", "x", "9" * 19, "1\n"):
        with pytest.raises(InvalidArgumentError, match="failed to get model version"):
            parse_version(bad)


@pytest.mark.parametrize("text", ["\u00b2", "\u0661"])
def test_parse_version_refuses_non_ascii_digits(text):
    with pytest.raises(InvalidArgumentError, match="failed to get model version"):
        parse_version(text)


# ---- errors -> HTTP status, gRPC code --------------------------------------------------


@pytest.mark.parametrize("error,status,code", [
    (NotFoundError("x"), 404, "NOT_FOUND"),
    (UnavailableError("x"), 503, "UNAVAILABLE"),
    (UnsupportedError("x"), 501, "UNIMPLEMENTED"),
    (InternalError("x"), 500, "INTERNAL"),
    (InvalidArgumentError("x"), 400, "INVALID_ARGUMENT"),
    (AlreadyExistsError("x"), 400, "ALREADY_EXISTS"),
    (CancelledError("x"), 400, "CANCELLED"),
    (Forbidden("x"), 403, "UNAVAILABLE"),
    (PayloadTooLarge("x"), 400, "RESOURCE_EXHAUSTED"),  # HTTP: Triton's 400, unread
    (TritonError("x"), 400, "UNKNOWN"),
    (ValueError("ours"), 500, "INTERNAL"),
])
def test_status_and_code_per_error(error, status, code):
    assert wire.http_status(error) == status
    assert grpc_code_name(error) == code


# ---- http.wire: bodies -----------------------------------------------------------------


def read(messages, limit, headers=()):
    queue = list(messages)

    async def receive():
        return queue.pop(0)

    return asyncio.run(wire.read_body({"headers": list(headers)}, receive, limit))


def body(data, more=False):
    return {"type": "http.request", "body": data, "more_body": more}


def test_read_body_whole_and_chunked():
    assert read([body(b"abc")], 3) == b"abc"
    assert read([body(b"ab", True), body(b"", True), body(b"cd")], 4) == b"abcd"
    assert read([{"type": "http.request"}], 0) == b""


def test_read_body_refuses_past_the_limit():
    with pytest.raises(PayloadTooLarge, match="request JSON size of 11 bytes exceeds the "
                       "maximum allowed input size of 10 bytes. Use --http-max-input-size"):
        read([], 10, [(b"content-length", b"11")])  # before reading anything
    with pytest.raises(PayloadTooLarge, match=r"Raw input has a byte_size \(11 bytes\) that "
                       "exceeds the maximum allowed value of 10 bytes"):
        read([], 10, [(b"content-length", b"11"), (b"inference-header-content-length", b"0")])
    with pytest.raises(InvalidArgumentError, match="invalid Content-Length"):
        read([], 10, [(b"content-length", b"ten")])
    with pytest.raises(PayloadTooLarge):
        read([body(b"x" * 11)], 10)
    with pytest.raises(PayloadTooLarge):
        read([body(b"x" * 6, True), body(b"x" * 5)], 10)
    with pytest.raises(wire.Disconnected):
        read([body(b"x", True), {"type": "http.disconnect"}], 10)
    with pytest.raises(wire.Disconnected):
        read([{"type": "http.disconnect"}], 10)


@given(st.binary(max_size=300), st.sampled_from([b"gzip", b"deflate", b"identity", b""]),
       st.integers(0, 400))
@SETTINGS
def test_decompress_round_trip_within_the_limit(data, encoding, limit):
    name = encoding.decode()
    packed = wire.compress(data, name) if name in ("gzip", "deflate") else data
    if name in ("", "identity"):
        assert wire.decompress(packed, encoding, limit) is packed
    elif len(data) > limit:
        with pytest.raises(InvalidArgumentError, match=f"exceeds the maximum allowed value "
                                                       f"of {limit} bytes") as refused:
            wire.decompress(packed, encoding, limit)
        assert not isinstance(refused.value, PayloadTooLarge)  # 400, as Triton
    else:
        assert wire.decompress(packed, b" " + encoding.upper(), limit) == data


def test_decompress_refusals():
    assert wire.decompress(gzip.compress(b"hello"), b"gzip", 5) == b"hello"
    bomb = zlib.compress(b"\0" * 1_000_000)
    with pytest.raises(InvalidArgumentError, match="^Decompressed data size exceeds"):
        wire.decompress(bomb, b"deflate", 1000)
    with pytest.raises(InvalidArgumentError, match="cannot be decompressed"):
        wire.decompress(b"not gzip", b"gzip", 100)
    with pytest.raises(UnsupportedError, match="unsupported content-encoding 'br'"):
        wire.decompress(b"x", b"br", 100)


def test_choose_encoding():
    big = wire.COMPRESS_MIN
    assert wire.choose_encoding(None, big) is None
    assert wire.choose_encoding(b"gzip", big) == "gzip"
    assert wire.choose_encoding(b"deflate;q=0.5, gzip;q=0.4", big) == "deflate"
    assert wire.choose_encoding(b"gzip", 10) is None  # too small to be worth it
    assert wire.choose_encoding(b"gzip, identity;q=0", 10) == "gzip"
    assert wire.choose_encoding(b"br, gzip;q=bad", big) is None


# ---- trace settings: HTTP's JSON, gRPC's lists -----------------------------------------


def test_parse_update_http():
    assert parse_update({}) == {}
    assert parse_update({"trace_level": ["TIMESTAMPS", "TENSORS"], "trace_rate": "10",
                         "trace_count": "-1", "log_frequency": None}) == {
        "level": TIMESTAMPS | TENSORS, "rate": 10, "count": -1, "log_frequency": None}
    assert parse_update({"trace_level": ["OFF"]}) == {"level": DISABLED}
    assert parse_update({"trace_level": ["NOPE"]}) == {}  # unknown names are ignored
    assert parse_update({"trace_rate": "  7xyz"}) == {"rate": 7}  # std::stoi
    assert parse_update({"trace_rate": "-1"}) == {"rate": 2**32 - 1}  # kept as uint32


@pytest.mark.parametrize("update,error,message", [
    ({"trace_file": "x"}, UnsupportedError, "trace file location can not be updated"),
    ({"trace_level": "OFF"}, InternalError, "non-array as array"),
    ({"trace_level": [1]}, InternalError, "non-string as string"),
    ({"trace_rate": 10}, InternalError, "non-string as string"),
    ({"trace_level": ["OFF", "TENSORS"]}, InvalidArgumentError, "only one trace level 'OFF'"),
    ({"trace_rate": "x"}, InvalidArgumentError, "Unable to parse 'trace_rate', got: x"),
    ({"trace_count": "-2"}, InvalidArgumentError, "Expecting value >= -1, got:-2"),
    ({"trace_count": "9999999999"}, InvalidArgumentError, "out of range [ -1, 2147483647 ]"),
])
def test_parse_update_refusals(update, error, message):
    with pytest.raises(error) as e:
        parse_update(update)
    assert message in str(e.value)


def test_parse_grpc():
    assert parse_grpc({"trace_level": ["TENSORS"], "trace_rate": ["3"], "trace_count": []}) == {
        "level": TENSORS, "rate": 3, "count": None}
    with pytest.raises(InvalidArgumentError, match="expect only 1 value for 'trace_rate'"):
        parse_grpc({"trace_rate": ["1", "2"]})
    with pytest.raises(InvalidArgumentError, match="Expecting value >= -1, got: -5"):
        parse_grpc({"trace_count": ["-5"]})
    with pytest.raises(UnsupportedError):
        parse_grpc({"trace_file": ["f"]})


@given(st.dictionaries(st.sampled_from(["trace_level", "trace_rate", "trace_count",
                                        "log_frequency", "other"]),
                       st.one_of(st.none(), st.text(max_size=12), st.integers(),
                                 st.lists(st.text(max_size=12), max_size=3)), max_size=5))
@SETTINGS
def test_parse_update_refuses_only_with_triton_errors(body_):
    try:
        new = parse_update(body_)
    except TritonError:
        return
    assert set(new) <= {"level", "rate", "count", "log_frequency"}


# ---- restricted APIs --------------------------------------------------------------------


def test_restricted_parse_and_table():
    group = RestrictedFeatures.parse("model-repository, logging:admin-key=s3=cret")
    assert group.key == "admin-key" and group.value == "s3=cret"
    assert group.protocols == [Protocols.MODEL_REPOSITORY, Protocols.LOGGING]
    features = as_restricted(["health:k=v", FeatureGroup("Other", "w", ["trace"])], "opt")
    assert features.get(Protocols.HEALTH).key == "k" and features.get(Protocols.METADATA) is None
    assert restriction_table(features, GRPC_KEY_PREFIX) == {
        Protocols.HEALTH: ("triton-grpc-protocol-k", "v"),
        Protocols.TRACE: ("triton-grpc-protocol-other", "w")}
    assert "w" not in repr(features) and "<hidden>" in repr(features)
    assert not as_restricted(None, "opt") and as_restricted("health:k=v", "opt")
    same = RestrictedFeatures()
    assert as_restricted(same, "opt") is same
    same.create_feature_group("k", "v", ["inference", Protocols.STATISTICS])
    assert same.get(Protocols.STATISTICS) is same.groups[0]


@pytest.mark.parametrize("text,message", [
    ("health", "expected <api>"),
    ("health:k", "expected <api>"),
    (":k=v", "expected <api>"),
    ("health: =v", "expected <api>"),
    ("healthz:k=v", "unknown API 'healthz'"),
    ("health:a b=v", "expected a non-empty header name"),
])
def test_restricted_parse_refusals(text, message):
    with pytest.raises(InvalidArgumentError, match=message):
        RestrictedFeatures.parse(text)


def test_restricted_groups_refusals():
    with pytest.raises(InvalidArgumentError, match="already in another group"):
        as_restricted(["health:a=1", "health,trace:b=2"], "opt")
    with pytest.raises(InvalidArgumentError, match="name at least one API"):
        FeatureGroup("k", "v", [])
    with pytest.raises(InvalidArgumentError, match="expected a str"):
        FeatureGroup("k", 1, ["health"])  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="expected a FeatureGroup"):
        RestrictedFeatures(["health:k=v"])  # type: ignore[list-item]
    with pytest.raises(InvalidArgumentError, match="opt: expected"):
        as_restricted(5, "opt")  # type: ignore[arg-type]


@given(st.text(max_size=40))
@SETTINGS
def test_restricted_parse_any_text(text):
    try:
        group = RestrictedFeatures.parse(text)
    except InvalidArgumentError:
        return
    assert group.protocols and group.key and ":" in text and "=" in text


# ---- The answer-once policy (HTTP infer and gRPC ModelInfer share it) ------------


class _Responses:
    """Stands for a request's response iterator: what the policy calls on it."""

    def __init__(self):
        self.cancelled = False

    def cancel(self):
        self.cancelled = True


class _Regions:
    def __init__(self):
        self.released = 0

    def release(self):
        self.released += 1


def _answer_once(responses, second="ModelStreamInfer"):
    from tritonserver.frontends.dataplane.inference import AnswerOnce, WireRequest

    call, iterator, regions = WireRequest(model_name="m"), _Responses(), _Regions()
    call.shm_use = regions
    once = AnswerOnce(call, iterator, second)
    error = None
    try:
        with once:
            for response in responses:
                if once.take(response):
                    break
    except Exception as e:
        error = e
    return once, iterator, regions, error


def _response(final, outputs=None):
    import types

    return types.SimpleNamespace(final=final, outputs=outputs or {})


def test_answer_once_keeps_the_one_response_and_a_final_flag_after_it_ends_the_wait():
    first, flag, never = _response(False, {"Y": 1}), _response(True), _response(False, {"Y": 2})
    once, iterator, regions, error = _answer_once([first, flag, never])
    assert error is None and once.response() is first
    assert not iterator.cancelled and regions.released == 1


def test_answer_once_refuses_a_second_response_cancels_and_releases_the_regions():
    import tritonserver

    once, iterator, regions, error = _answer_once(
        [_response(False, {"Y": 1}), _response(True, {"Y": 2})], second="a streaming endpoint")
    assert isinstance(error, tritonserver.UnsupportedError)
    assert str(error) == "the model sent more than one response; use a streaming endpoint"
    assert iterator.cancelled and regions.released == 1


def test_answer_once_with_no_response_is_an_internal_error():
    import tritonserver

    once, iterator, regions, error = _answer_once([])
    assert error is None and regions.released == 1
    with pytest.raises(tritonserver.InternalError, match="no response"):
        once.response()
