"""Tests of the OpenAI frontend's pieces that need no server: stop
sequences cut across any split of the text (dataplane.text_generation's
StopScanner), how a request's fields reach a model (inputs, parameters,
vLLM's sampling_parameters), token counts with a tokenizer and without,
the chat templates, and OpenAI's request checks and error object
(openai.protocol)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tritonserver import InvalidArgumentError
from tritonserver.frontends.dataplane import text_generation as tg
from tritonserver.frontends.openai import protocol as p


def _cut(text: str, stops: list[str]) -> tuple[str, bool]:
    """The text up to the stop sequence that completes first, scanning the
    whole text one character at a time."""
    for end in range(len(text) + 1):
        starts = [end - len(s) for s in stops if s and text[:end].endswith(s)]
        if starts:
            return text[:min(starts)], True
    return text, False


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="abc", max_size=30), st.lists(st.text(alphabet="abc", min_size=1,
                                                               max_size=4), max_size=3),
       st.lists(st.integers(0, 30), max_size=6))
def test_stop_sequences_cut_the_same_however_the_text_is_split(text: str, stops: list[str],
                                                               splits: list[int]) -> None:
    cuts = sorted({min(s, len(text)) for s in splits})
    pieces = [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]
    scanner = tg.StopScanner(stops)
    out, stopped = [], False
    for piece in pieces:
        emitted, stopped = scanner.feed(piece)
        out.append(emitted)
        if stopped:
            break
    if not stopped:
        out.append(scanner.flush())
    assert ("".join(out), stopped) == _cut(text, stops)


def _model(inputs: dict[str, str], decoupled: bool = False) -> tg.TextModel:
    specs = {name: {"name": name, "datatype": dt, "shape": [1]} for name, dt in inputs.items()}
    return tg.TextModel("m", decoupled, specs, {"text_output"}, 0)


def _values(call: Any) -> dict[str, Any]:
    out = {}
    for name, value in call.inputs.items():
        item = value.to_bytes_array().reshape(-1)[0].decode() \
            if not isinstance(value, np.ndarray) else value.reshape(-1)[0].item()
        out[name] = item
    return out


def test_fields_become_inputs_when_the_model_has_them_else_parameters() -> None:
    model = _model({"text_input": "BYTES", "max_tokens": "INT32", "stream": "BOOL",
                    "temperature": "FP32"})
    generation = tg.Generation("hello", stream=True, max_tokens=5, stop=["\n"],
                               fields={"temperature": 0.5, "seed": 3, "tools": [{"a": 1}],
                                       "user": None})
    call = tg.make_call(model, generation)
    assert _values(call) == {"text_input": "hello", "stream": True, "max_tokens": 5,
                             "temperature": 0.5}
    assert call.parameters == {"stop": '["\\n"]', "seed": 3, "tools": '[{"a":1}]'}


def test_a_sampling_parameters_input_takes_the_sampling_fields_as_json() -> None:
    model = _model({"text_input": "BYTES", "stream": "BOOL", "sampling_parameters": "BYTES",
                    "exclude_input_in_output": "BOOL", "return_num_output_tokens": "BOOL"})
    call = tg.make_call(model, tg.Generation("p", max_tokens=8, stop=["x"],
                                             fields={"top_p": 0.9}))
    values = _values(call)
    assert json.loads(values.pop("sampling_parameters")) == {"max_tokens": 8, "stop": ["x"],
                                                             "top_p": 0.9}
    assert values == {"text_input": "p", "stream": False, "exclude_input_in_output": True,
                      "return_num_output_tokens": True}
    assert call.parameters == {}


def test_messages_go_whole_to_a_model_that_takes_them() -> None:
    model = _model({"messages": "BYTES"})
    messages = [{"role": "user", "content": "hi"}]
    call = tg.make_call(model, tg.Generation("user: hi\nassistant:", messages=messages))
    assert json.loads(_values(call)["messages"]) == messages
    assert model.takes_messages and not model.takes_text and model.served


def test_a_bytes_input_takes_other_values_as_json() -> None:
    model = _model({"text_input": "BYTES", "response_format": "BYTES"})
    call = tg.make_call(model, tg.Generation("p", fields={"response_format": {"type": "json"}}))
    assert _values(call)["response_format"] == '{"type":"json"}'


def test_reserved_parameters_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="triton_"):
        tg.make_call(_model({"text_input": "BYTES"}), tg.Generation("p", fields={"triton_x": 1}))


class _Tokenizer:
    """Counts characters; its chat template is a marker around the roles."""

    def count(self, text: str) -> int:
        return len(text)

    def chat_prompt(self, messages: list[dict[str, Any]]) -> str:
        return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"


class _Response:
    def __init__(self, parameters: dict[str, Any]):
        self.outputs: dict[str, Any] = {}
        self.parameters = parameters


def test_token_counts_from_the_tokenizer_the_model_or_an_estimate() -> None:
    model = _model({"text_input": "BYTES"}, decoupled=True)
    tally = tg.Tally(model, "three word prompt", _Tokenizer())
    tally.add(_Response({}), "abc")
    assert tally.source == "tokenizer"
    assert tally.usage() == {"prompt_tokens": 17, "completion_tokens": 3, "total_tokens": 20}
    tally = tg.Tally(model, "three word prompt")
    tally.add(_Response({"completion_tokens": 2, "prompt_tokens": 9}), "ab")
    tally.add(_Response({"completion_tokens": 4}), "cd")
    assert tally.source == "model"
    assert tally.usage() == {"prompt_tokens": 9, "completion_tokens": 6, "total_tokens": 15}
    tally = tg.Tally(model, "three word prompt")
    for piece in ("a ", "", "b "):
        tally.add(_Response({}), piece)
    assert tally.source == "estimate"
    assert tally.usage() == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    tally = tg.Tally(_model({"text_input": "BYTES"}), "p")
    tally.add(_Response({}), "four words in one")
    assert tally.usage()["completion_tokens"] == 4


def test_chat_templates() -> None:
    messages = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "Hi"},
                                             {"type": "text", "text": "!"}]}]
    assert tg.chat_prompt(messages, None) == "system: Be brief.\nuser: Hi!\nassistant:"
    flat = [dict(m, content=tg.message_text(m["content"])) for m in messages]
    tokenizer: Any = _Tokenizer()
    assert tg.chat_prompt(flat, tokenizer) == "<system>Be brief.<user>Hi!<assistant>"


def test_a_tokenizer_without_transformers_says_what_to_install() -> None:
    try:
        import transformers  # noqa: F401
    except ImportError:
        with pytest.raises(InvalidArgumentError, match="transformers"):
            tg.Tokenizer("gpt2")
    else:
        pytest.skip("transformers is installed")


def test_completion_requests_are_checked() -> None:
    model, generation, usage = p.completion_request(
        {"model": "m", "prompt": ["x"], "stream": True, "stream_options": {"include_usage": True},
         "max_tokens": 4, "max_completion_tokens": 2, "stop": "s", "seed": 1, "extra": [1]})
    assert (model, generation.prompt, generation.stream, usage) == ("m", "x", True, True)
    assert (generation.max_tokens, generation.stop) == (2, ["s"])
    assert generation.fields == {"seed": 1, "extra": [1]}
    for body, param in ((
            {"prompt": "x"}, "model"), ({"model": "m"}, "prompt"),
            ({"model": "m", "prompt": "x", "n": 2}, "n"),
            ({"model": "m", "prompt": "x", "stream_options": {}}, "stream_options"),
            ({"model": "m", "prompt": "x", "max_tokens": True}, "max_tokens"),
            ({"model": "m", "prompt": "x", "temperature": "1"}, "temperature")):
        with pytest.raises(p.RequestError) as info:
            p.completion_request(body)
        assert info.value.param == param, body


def test_chat_requests_are_checked() -> None:
    model, generation, _ = p.chat_request(
        {"model": "m", "messages": [{"role": "user", "content": "hi"}]}, lambda m: "PROMPT")
    assert (model, generation.prompt, generation.messages) == (
        "m", "PROMPT", [{"role": "user", "content": "hi"}])
    with pytest.raises(p.RequestError) as info:
        p.chat_request({"model": "m", "messages": [{"role": 1}]}, lambda m: "")
    assert info.value.param == "messages[0].role"


def test_the_error_object() -> None:
    assert p.error_object("x", 404, "model", "model_not_found") == {"error": {
        "message": "x", "type": "invalid_request_error", "param": "model",
        "code": "model_not_found"}}
    assert [p.error_object("x", s)["error"]["type"] for s in (400, 403, 404, 413, 500, 503)] == [
        "invalid_request_error", "permission_error", "not_found_error", "invalid_request_error",
        "server_error", "server_error"]
