"""The header forward pattern as Triton reads it (dataplane.headers): put
after "(?i)", so case-insensitive unless it starts with "(?-i)", found
anywhere in a header's name, and never forwarding a header named like a
parameter Triton reads itself."""

from __future__ import annotations

import pytest

from tritonserver import InvalidArgumentError
from tritonserver.frontends.dataplane.headers import forward_headers, forward_regex


def forwarded(pattern: str, headers: list[tuple[str, object]]) -> dict[str, object]:
    parameters: dict[str, object] = {}
    forward_headers(forward_regex(pattern, "pattern"), headers, parameters)
    return parameters


def test_pattern_matches_case_insensitively_anywhere_in_the_name():
    headers = [("my_header_1", "a"), ("x-my_header_2", "b"), ("other", "c")]
    assert forwarded("MY_HEADER.*", headers) == {"my_header_1": "a", "x-my_header_2": "b"}
    assert forwarded("^my_header", headers) == {"my_header_1": "a"}


def test_leading_case_sensitive_flag_turns_case_insensitivity_off():
    assert forwarded("(?-i)MY_HEADER.*", [("my_header_1", "a")]) == {}
    assert forwarded("(?-i)my_header.*", [("my_header_1", "a")]) == {"my_header_1": "a"}
    assert forwarded("(?i)(?-i)MY.*", [("my", "a")]) == {}  # what Triton compiles, flag by flag
    assert forwarded("(?s-i)A.B", [("a\nb", "x"), ("A\nB", "y")]) == {"A\nB": "y"}


def test_empty_pattern_forwards_nothing_and_bad_pattern_is_refused():
    assert forward_regex("", "pattern") is None
    assert forwarded("", [("my_header", "a")]) == {}
    with pytest.raises(InvalidArgumentError, match="grpc: not a regex"):
        forward_regex("(unclosed", "grpc")
    with pytest.raises(InvalidArgumentError, match="expected a str"):
        forward_regex(3, "grpc")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["sequence_id", "sequence_start", "sequence_end", "priority",
                                  "timeout", "headers", "binary_data_output",
                                  "triton_enable_empty_final_response"])
def test_reserved_names_are_refused_in_tritons_words(name):
    with pytest.raises(InvalidArgumentError) as info:
        forwarded(".*", [(name, "1")])
    assert str(info.value) == f"Header '{name}' is reserved for Triton usage and cannot be " \
                              "forwarded."


def test_binary_metadata_values_become_text():
    assert forwarded("key", [("key-bin", b"\x61\x62")]) == {"key-bin": "ab"}
