"""The OpenAI frontend on a real server with real PythonModels: the
``openai`` client (sync and async, streaming and not) against a decoupled
model that streams one word per response and a model that answers once,
raw server-sent events through curl, model management in explicit mode,
generated bad requests answered in OpenAI's error schema with the server
live after each, and a client that goes away cancelling its request in the
model."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import ssl
import subprocess
import threading
import time
from typing import Any, Iterator

import numpy as np
import pytest
import requests

import tritonserver
from conftest import stop_within

openai = pytest.importorskip("openai")

from tritonserver.frontends import OpenAI  # noqa: E402

TEXT = (bytes, [1])
# What the cancellable model saw, per prompt: the words it sent and whether
# it found its request cancelled.
SEEN: dict[str, dict[str, Any]] = {}


def _prompt(request: Any) -> str:
    return request.inputs["text_input"].reshape(-1)[0].decode()


class Words(tritonserver.PythonModel):
    """Decoupled: sends the prompt's words back one per response (or
    ``count`` words "w0 w1 ..." when the parameter asks, or the request's
    parameters as JSON when ``echo`` is set), each from a thread of its
    own; ``delay`` seconds between words, stopping once cancelled; an
    error instead of word ``fail_after``; ``split_utf8``: a character split
    between two responses, then bytes that are not UTF-8."""

    def execute(self, requests: list) -> None:
        for request in requests:
            threading.Thread(target=self._answer, args=(request,), daemon=True).start()

    def _answer(self, request: Any) -> None:
        params = dict(request.parameters)
        prompt = _prompt(request)
        if params.get("echo"):
            words = [json.dumps(params, sort_keys=True)]
        elif params.get("split_utf8"):  # "é" (c3 a9) sent as two responses, then bad bytes
            words = [b"caf\xc3", b"\xa9 ", b"\xff!"]
        elif "count" in params:
            words = [f"w{i} " for i in range(int(params["count"]))]
        else:
            words = [w + " " for w in prompt.split()]
        seen = SEEN.setdefault(prompt, {"sent": 0, "cancelled": False})
        delay = float(params.get("delay", 0))
        fail_after = int(params.get("fail_after", -1))
        for n, word in enumerate(words):
            if n == fail_after:
                request.sender.send(tritonserver.InvalidArgumentError("the model failed"))
                return
            if request.is_cancelled():
                seen["cancelled"] = True
                break
            data = word if isinstance(word, bytes) else word.encode()
            request.sender.send({"text_output": np.array([data], dtype=object)})
            seen["sent"] += 1
            if delay:
                time.sleep(delay)
        request.sender.finish()


class Whole(tritonserver.PythonModel):
    """Answers once: "You said: <prompt>" (or the request's parameters and
    max_tokens input as hex of their JSON when ``echo`` is set), with the token counts
    as response parameters."""

    def execute(self, requests: list) -> list:
        out = []
        for request in requests:
            params = dict(request.parameters)
            prompt = _prompt(request)
            if params.get("echo"):
                seen = dict(params)
                if "max_tokens" in request.inputs:
                    seen["max_tokens_input"] = int(request.inputs["max_tokens"].reshape(-1)[0])
                text = json.dumps(seen, sort_keys=True).encode().hex()  # no stop sequence in it
            else:
                text = f"You said: {prompt}"
            out.append(tritonserver.ModelResponse(
                {"text_output": np.array([text.encode()], dtype=object)},
                parameters={"prompt_tokens": 7, "completion_tokens": 3}))
        return out


class ChatJson(tritonserver.PythonModel):
    """Takes the chat's messages as JSON and answers with their roles."""

    def execute(self, requests: list) -> list:
        out = []
        for request in requests:
            messages = json.loads(request.inputs["messages"].reshape(-1)[0].decode())
            roles = ",".join(m["role"] for m in messages)
            out.append({"text_output": np.array([roles.encode()], dtype=object)})
        return out


class Adder(tritonserver.PythonModel):
    def execute(self, requests: list) -> list:
        return [{"SUM": r.inputs["A"] + r.inputs["A"]} for r in requests]


@pytest.fixture(scope="module")
def server() -> Iterator[tritonserver.Server]:
    server = tritonserver.Server(model_control_mode=tritonserver.ModelControlMode.EXPLICIT,
                                 log_error=True, exit_timeout=10)
    server.register_model("words", Words, inputs={"text_input": TEXT},
                          outputs={"text_output": TEXT}, decoupled=True)
    server.register_model("whole", Whole,
                          inputs={"text_input": TEXT,
                                  "max_tokens": {"data_type": "TYPE_INT32", "dims": [1],
                                                 "optional": True}},
                          outputs={"text_output": TEXT})
    server.register_model("chat_json", ChatJson, inputs={"messages": TEXT},
                          outputs={"text_output": TEXT})
    server.register_model("adder", Adder, inputs={"A": (np.float32, [-1])},
                          outputs={"SUM": (np.float32, [-1])})
    server.start(wait_until_ready=True, timeout=120)
    yield server
    stop_within(server)


@pytest.fixture(scope="module")
def frontend(server: tritonserver.Server) -> Iterator[OpenAI]:
    with OpenAI(server, OpenAI.Options(port=0, max_input_size=1 << 20)) as frontend:
        yield frontend


@pytest.fixture(scope="module")
def client(frontend: OpenAI) -> Any:
    return openai.OpenAI(base_url=frontend.url, api_key="unused", max_retries=0, timeout=30)


def assert_live(frontend: OpenAI) -> None:
    reply = requests.get(frontend.url[:-3] + "/health/ready", timeout=10)
    assert reply.status_code == 200, reply.text


def assert_openai_error(reply: requests.Response, status: int, param: Any = "any") -> dict:
    assert reply.status_code == status, (reply.status_code, reply.text)
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert isinstance(error["message"], str) and error["message"]
    if param != "any":
        assert error["param"] == param, error
    return error


# ---- Models ----------------------------------------------------------------------------


def test_models_lists_the_text_models_only(client: Any, frontend: OpenAI) -> None:
    ids = sorted(m.id for m in client.models.list())
    assert ids == ["chat_json", "whole", "words"]
    model = client.models.retrieve("words")
    assert model.id == "words" and model.object == "model" and model.created > 0
    for name in ("nope", "adder"):
        with pytest.raises(openai.NotFoundError) as info:
            client.models.retrieve(name)
        assert info.value.code == "model_not_found"


# ---- Completions ---------------------------------------------------------------------------


def test_completion_of_a_decoupled_model_joins_its_responses(client: Any) -> None:
    reply = client.completions.create(model="words", prompt="one two three")
    assert reply.object == "text_completion" and reply.model == "words"
    assert reply.choices[0].text == "one two three "
    assert reply.choices[0].finish_reason == "stop"
    usage = reply.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (3, 3, 6)
    assert usage.model_extra["count_source"] == "estimate"


def test_completion_of_a_model_that_answers_once_with_its_counts(client: Any) -> None:
    reply = client.completions.create(model="whole", prompt="hi there")
    assert reply.choices[0].text == "You said: hi there"
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (7, 3)
    assert reply.usage.model_extra["count_source"] == "model"


def test_streaming_completion_one_chunk_per_piece(client: Any) -> None:
    chunks = list(client.completions.create(model="words", prompt="a b c d", stream=True,
                                            stream_options={"include_usage": True}))
    texts = [c.choices[0].text for c in chunks if c.choices]
    assert texts == ["a ", "b ", "c ", "d ", ""]
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 4
    # A model that answers once streams once.
    chunks = list(client.completions.create(model="whole", prompt="x", stream=True))
    assert "".join(c.choices[0].text for c in chunks) == "You said: x"
    assert all(c.usage is None for c in chunks)


def test_utf8_split_between_responses_is_joined(client: Any) -> None:
    reply = client.completions.create(model="words", prompt="p", extra_body={"split_utf8": True})
    assert reply.choices[0].text == "caf\u00e9 \ufffd!"
    pieces = [c.choices[0].text for c in client.completions.create(
        model="words", prompt="p", stream=True, extra_body={"split_utf8": True})]
    assert pieces == ["caf", "\u00e9 ", "\ufffd!", ""]


def test_stop_sequences_cut_the_text_across_pieces(client: Any) -> None:
    reply = client.completions.create(model="words", prompt="alpha beta gamma delta",
                                      stop=["a gam", "zzz"])
    assert reply.choices[0].text == "alpha bet"
    assert reply.choices[0].finish_reason == "stop"
    pieces = [c.choices[0].text for c in client.completions.create(
        model="words", prompt="alpha beta gamma delta", stop="gamma", stream=True)]
    assert "".join(pieces) == "alpha beta "
    reply = client.completions.create(model="whole", prompt="abc STOP def", stop="STOP")
    assert reply.choices[0].text == "You said: abc "


def test_max_tokens_ends_a_stream_with_length(client: Any) -> None:
    # words takes no max_tokens input: it gets a parameter it ignores, the frontend cuts.
    reply = client.completions.create(model="words", prompt="p", max_tokens=3,
                                      extra_body={"count": 10})
    assert reply.choices[0].text == "w0 w1 w2 "
    assert reply.choices[0].finish_reason == "length"
    chat = client.chat.completions.create(
        model="words", messages=[{"role": "user", "content": "x"}], max_completion_tokens=2,
        extra_body={"count": 10})
    assert chat.choices[0].message.content == "w0 w1 "
    assert chat.choices[0].finish_reason == "length"


def test_fields_reach_the_model_as_inputs_or_parameters(client: Any) -> None:
    reply = client.completions.create(
        model="whole", prompt="p", max_tokens=5, seed=42, temperature=0.5, top_p=0.9,
        stop=["<|end|>", "###"], extra_body={"echo": True, "custom": {"a": [1, 2]}, "flag": True})
    seen = json.loads(bytes.fromhex(reply.choices[0].text))
    assert seen == {"custom": '{"a":[1,2]}', "echo": True, "flag": True, "max_tokens_input": 5,
                    "seed": 42, "stop": '["<|end|>","###"]', "stream": False, "temperature": 0.5,
                    "top_p": 0.9}


def test_n_other_than_one_is_refused(client: Any) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model="words", prompt="a", n=2)
    assert info.value.param == "n"
    assert client.completions.create(model="words", prompt="a", n=1).choices[0].text == "a "


# ---- Chat ----------------------------------------------------------------------------------


def test_chat_uses_the_plain_template(client: Any) -> None:
    reply = client.chat.completions.create(
        model="words", messages=[{"role": "system", "content": "Be brief."},
                                 {"role": "user", "content": [{"type": "text", "text": "Hi"}]}])
    assert reply.object == "chat.completion"
    message = reply.choices[0].message
    assert message.role == "assistant"
    assert message.content == "system: Be brief. user: Hi assistant: "
    assert reply.usage.prompt_tokens == 6


def test_streaming_chat_chunks(client: Any) -> None:
    chunks = list(client.chat.completions.create(
        model="words", messages=[{"role": "user", "content": "q"}], stream=True))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "user: q assistant: "
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert all(c.object == "chat.completion.chunk" and c.id == chunks[0].id for c in chunks)


def test_chat_messages_as_json_to_a_model_that_asks_for_them(client: Any) -> None:
    reply = client.chat.completions.create(
        model="chat_json", messages=[{"role": "system", "content": "s"},
                                     {"role": "user", "content": "u"}])
    assert reply.choices[0].message.content == "system,user"
    with pytest.raises(openai.BadRequestError):  # completions need text_input
        client.completions.create(model="chat_json", prompt="p")


def test_async_client_streaming_and_not(frontend: OpenAI) -> None:
    async def run() -> None:
        client = openai.AsyncOpenAI(base_url=frontend.url, api_key="unused", max_retries=0)
        reply = await client.completions.create(model="whole", prompt="async")
        assert reply.choices[0].text == "You said: async"
        stream = await client.chat.completions.create(
            model="words", messages=[{"role": "user", "content": "s"}], stream=True)
        text = "".join([c.choices[0].delta.content or "" async for c in stream])
        assert text == "user: s assistant: "
        await client.close()

    asyncio.run(run())


def test_64_streams_at_once_each_get_their_own_words_in_order(frontend: OpenAI) -> None:
    async def one(client: Any, i: int) -> list[str]:
        prompt = " ".join(f"s{i}-{k}" for k in range(12))
        stream = await client.completions.create(model="words", prompt=prompt, stream=True)
        return [c.choices[0].text async for c in stream if c.choices[0].text]

    async def run() -> None:
        client = openai.AsyncOpenAI(base_url=frontend.url, api_key="unused", max_retries=0,
                                    timeout=60)
        results = await asyncio.gather(*(one(client, i) for i in range(64)))
        for i, words in enumerate(results):
            assert words == [f"s{i}-{k} " for k in range(12)]
        await client.close()

    asyncio.run(run())


# ---- The raw stream ------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_raw_events_through_curl(frontend: OpenAI) -> None:
    body = json.dumps({"model": "words", "prompt": "x y", "stream": True})
    out = subprocess.run(["curl", "-sS", "-N", "-D", "-", "-H", "Content-Type: application/json",
                          "-d", body, frontend.url + "/completions"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    head, _, events = out.partition("\n\n")  # text mode reads CRLF as LF
    assert "content-type: text/event-stream" in head.lower()
    blocks = [b for b in events.split("\n\n") if b]
    assert all(b.startswith("data: ") for b in blocks), blocks
    assert blocks[-1] == "data: [DONE]"
    documents = [json.loads(b[6:]) for b in blocks[:-1]]
    assert [d["choices"][0]["text"] for d in documents] == ["x ", "y ", ""]


def _post_raw(frontend: OpenAI, body: bytes, path: str = "/completions") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", frontend.port), timeout=30)
    sock.sendall(b"POST /v1" + path.encode() + b" HTTP/1.1\r\nHost: x\r\n"
                 b"Content-Type: application/json\r\nContent-Length: "
                 + str(len(body)).encode() + b"\r\n\r\n" + body)
    return sock


def test_a_stream_cut_midway_cancels_the_request_in_the_model(frontend: OpenAI) -> None:
    prompt = "cut " + " ".join(f"c{i}" for i in range(200))
    body = json.dumps({"model": "words", "prompt": prompt, "stream": True,
                       "delay": 0.02}).encode()
    sock = _post_raw(frontend, body)
    received = b""
    while received.count(b"data: ") < 3:
        received += sock.recv(65536)
    sock.close()
    deadline = time.monotonic() + 20
    while not SEEN.get(prompt, {}).get("cancelled") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert SEEN[prompt]["cancelled"], SEEN[prompt]
    assert SEEN[prompt]["sent"] < 100
    assert_live(frontend)


def test_the_client_closing_its_stream_cancels_the_request(client: Any,
                                                           frontend: OpenAI) -> None:
    prompt = "close " + " ".join(f"k{i}" for i in range(200))
    stream = client.completions.create(model="words", prompt=prompt, stream=True,
                                       extra_body={"delay": 0.02})
    for n, _ in enumerate(stream):
        if n == 2:
            break
    stream.close()
    deadline = time.monotonic() + 20
    while not SEEN.get(prompt, {}).get("cancelled") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert SEEN[prompt]["cancelled"], SEEN[prompt]
    assert client.completions.create(model="words", prompt="after").choices[0].text == "after "


def test_a_client_gone_before_a_whole_answer_cancels_the_request(frontend: OpenAI) -> None:
    prompt = "whole " + " ".join(f"n{i}" for i in range(200))
    sock = _post_raw(frontend, json.dumps({"model": "words", "prompt": prompt,
                                           "delay": 0.02}).encode())
    deadline = time.monotonic() + 20
    while SEEN.get(prompt, {}).get("sent", 0) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    sock.close()
    while not SEEN.get(prompt, {}).get("cancelled") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert SEEN[prompt]["cancelled"], SEEN[prompt]
    assert_live(frontend)


# ---- Model management ----------------------------------------------------------------------


def test_load_and_unload_in_explicit_mode(frontend: OpenAI, client: Any) -> None:
    base = frontend.url
    reply = requests.post(base + "/models/whole/unload", timeout=60)
    assert reply.status_code == 200 and reply.json() == {"status": "success", "model": "whole"}
    assert "whole" not in [m.id for m in client.models.list()]
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="whole", prompt="p")
    assert_openai_error(requests.post(base + "/models/whole/unload", timeout=60), 400)
    reply = requests.post(base + "/models/whole/load", timeout=60)
    assert reply.status_code == 200, reply.text
    assert reply.json()["id"] == "whole" and reply.json()["object"] == "model"
    error = assert_openai_error(requests.post(base + "/models/whole/load", timeout=60), 400)
    assert "already loaded" in error["message"]
    assert client.completions.create(model="whole", prompt="p").choices[0].text == "You said: p"
    # The core's error class decides, as in NVIDIA's frontend: no such folder is INTERNAL.
    error = assert_openai_error(requests.post(base + "/models/missing/load", timeout=60), 500)
    assert "Failed to load model 'missing'" in error["message"]


def test_load_is_refused_outside_explicit_mode() -> None:
    server = tritonserver.Server(log_error=True, exit_timeout=10)
    server.register_model("words", Words, inputs={"text_input": TEXT},
                          outputs={"text_output": TEXT}, decoupled=True)
    server.start(wait_until_ready=True, timeout=120)
    try:
        with OpenAI(server, OpenAI.Options(port=0)) as frontend:
            error = assert_openai_error(
                requests.post(frontend.url + "/models/words/unload", timeout=30), 400)
            assert "explicit" in error["message"]
    finally:
        stop_within(server)


# ---- Health, metrics, restrictions -----------------------------------------------------------


def test_health_and_metrics(frontend: OpenAI) -> None:
    root = frontend.url[:-3]
    assert requests.get(root + "/health/ready", timeout=10).status_code == 200
    reply = requests.get(root + "/metrics", timeout=10)
    assert reply.status_code == 200 and "nv_inference_request_success" in reply.text


def test_restricted_inference_needs_its_header(server: tritonserver.Server) -> None:
    options = OpenAI.Options(port=0, restricted_features=["inference:api-key=k1"])
    with OpenAI(server, options) as frontend:
        body = {"model": "words", "prompt": "a"}
        error = assert_openai_error(
            requests.post(frontend.url + "/completions", json=body, timeout=30), 403)
        assert error["type"] == "permission_error"
        reply = requests.post(frontend.url + "/completions", json=body,
                              headers={"api-key": "k1"}, timeout=30)
        assert reply.status_code == 200
        assert requests.get(frontend.url + "/models", timeout=10).status_code == 200


def test_https_with_the_openai_client(server: tritonserver.Server, tmp_path: Any) -> None:
    pytest.importorskip("cryptography")
    from frontends.support import make_certificates

    certs = make_certificates(str(tmp_path))
    options = OpenAI.Options(port=0, ssl_certfile=certs["server_cert"],
                             ssl_keyfile=certs["server_key"])
    with OpenAI(server, options) as frontend:
        assert frontend.url.startswith("https://127.0.0.1:")
        verify = ssl.create_default_context(cafile=certs["ca"])
        with openai.DefaultHttpxClient(verify=verify) as http:
            client = openai.OpenAI(base_url=frontend.url, api_key="unused", max_retries=0,
                                   http_client=http)
            assert client.completions.create(model="words", prompt="tls").choices[0].text \
                == "tls "


def test_a_stopped_server_is_answered_503(frontend: OpenAI) -> None:
    server = tritonserver.Server(log_error=True, exit_timeout=10)
    server.register_model("words", Words, inputs={"text_input": TEXT},
                          outputs={"text_output": TEXT}, decoupled=True)
    server.start(wait_until_ready=True, timeout=120)
    other = OpenAI(server, OpenAI.Options(port=0)).start()
    try:
        stop_within(server)
        for method, path in (("POST", "/completions"), ("GET", "/models")):
            reply = requests.request(method, other.url + path, json=GOOD, timeout=30)
            assert assert_openai_error(reply, 503)["type"] == "server_error"
    finally:
        other.stop(timeout=5)


def test_options_are_checked() -> None:
    server = tritonserver.Server()
    with pytest.raises(tritonserver.InvalidArgumentError):
        OpenAI(server, OpenAI.Options(port=-1))
    with pytest.raises(tritonserver.InvalidArgumentError):
        OpenAI(server, OpenAI.Options(max_input_size=0))
    with pytest.raises(tritonserver.InvalidArgumentError):
        OpenAI(server, OpenAI.Options(ssl_keyfile="key.pem"))


# ---- Bad requests --------------------------------------------------------------------------

GOOD = {"model": "words", "prompt": "a b"}
WRONG_TYPES = {
    "model": [1, None, [], {}], "prompt": [1, None, {}, [], [1, 2], ["a", "b"]],
    "stream": ["yes", 1], "n": ["1", 1.5, 0, 3], "max_tokens": ["5", -1, 0, 1.5],
    "max_completion_tokens": [0, "x"], "stop": [1, [1], {"a": 1}], "temperature": ["hot"],
    "top_p": [[0.5]], "seed": ["s", 1.5], "stream_options": ["x", {"include_usage": True}],
}
CHAT_WRONG = [None, [], "hi", [1], [{"content": "x"}], [{"role": "user", "content": 5}],
              [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]]


def _bad_bodies() -> Iterator[tuple[str, bytes, int]]:
    for key, values in WRONG_TYPES.items():
        for value in values:
            body = dict(GOOD, **{key: value})
            if value is None:
                body.pop(key)
            yield "/completions", json.dumps(body).encode(), 400
    for messages in CHAT_WRONG:
        body = {"model": "words", "messages": messages}
        if messages is None:
            body.pop("messages")
        yield "/chat/completions", json.dumps(body).encode(), 400
    for raw in (b"", b"{", b"[1, 2]", b"null", b'"text"', b"{\"model\": \"words\",}",
                b"\xff\xfe", json.dumps(GOOD)[:-3].encode()):
        yield "/completions", raw, 400
        yield "/chat/completions", raw, 400
    yield "/completions", json.dumps(dict(GOOD, model="nope")).encode(), 404
    yield "/completions", json.dumps(dict(GOOD, model="adder")).encode(), 400
    yield "/chat/completions", json.dumps(
        {"model": "nope", "messages": [{"role": "user", "content": "x"}]}).encode(), 404
    yield "/completions", json.dumps(dict(GOOD, triton_x=1)).encode(), 400


def test_bad_requests_get_openai_errors_and_the_server_stays_live(frontend: OpenAI) -> None:
    count = 0
    for path, body, status in _bad_bodies():
        reply = requests.post(frontend.url + path, data=body,
                              headers={"Content-Type": "application/json"}, timeout=30)
        error = assert_openai_error(reply, status)
        assert error["type"] == ("not_found_error" if status == 404 and error["code"] is None
                                 else "invalid_request_error"), (body, error)
        count += 1
    assert count > 50
    assert_live(frontend)


def test_huge_bodies_wrong_methods_and_paths(frontend: OpenAI) -> None:
    huge = json.dumps(dict(GOOD, prompt="x" * (2 << 20))).encode()
    assert_openai_error(requests.post(frontend.url + "/completions", data=huge, timeout=30), 413)
    assert_live(frontend)
    assert_openai_error(requests.get(frontend.url + "/completions", timeout=10), 405)
    assert_openai_error(requests.post(frontend.url + "/models", timeout=10), 405)
    assert_openai_error(requests.get(frontend.url + "/embeddings", timeout=10), 404)
    assert_openai_error(requests.get(frontend.url[:-3] + "/v2/models", timeout=10), 404)
    assert_live(frontend)


def test_a_model_error_before_or_within_a_stream(client: Any, frontend: OpenAI) -> None:
    # Before the first piece: a plain error with its status.
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model="words", prompt="a b c", stream=True,
                                  extra_body={"fail_after": 0})
    assert "the model failed" in str(info.value)
    # After it: an event carrying OpenAI's error object, then [DONE].
    body = {"model": "words", "prompt": "a b c", "stream": True, "fail_after": 2}
    reply = requests.post(frontend.url + "/completions", json=body, timeout=30)
    blocks = [b for b in reply.text.split("\n\n") if b]
    assert [json.loads(b[6:])["choices"][0]["text"] for b in blocks[:2]] == ["a ", "b "]
    error = json.loads(blocks[2][6:])["error"]
    assert error["message"] == "the model failed" and error["type"] == "invalid_request_error"
    assert blocks[3] == "data: [DONE]"
    with pytest.raises(openai.APIError):
        list(client.completions.create(model="words", prompt="a b c", stream=True,
                                       extra_body={"fail_after": 2}))
    assert_live(frontend)


# ---- serve --openai-port: a python-backend model.py and an ensemble over it ---------------

PB_CONFIG = '''name: "pb_words"
backend: "inprocess"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "text_input", data_type: TYPE_STRING, dims: [ 1 ] } ]
output [ { name: "text_output", data_type: TYPE_STRING, dims: [ 1 ] } ]
'''
PB_MODEL = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            prompt = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy()
            for word in prompt.reshape(-1)[0].decode().split():
                out = np.array([(word.upper() + " ").encode()], dtype=object)
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("text_output", out)]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
'''
ENSEMBLE_CONFIG = '''name: "ens_words"
platform: "ensemble"
max_batch_size: 0
input [ { name: "text_input", data_type: TYPE_STRING, dims: [ 1 ] } ]
output [ { name: "text_output", data_type: TYPE_STRING, dims: [ 1 ] } ]
ensemble_scheduling { step [ {
  model_name: "pb_words", model_version: -1
  input_map { key: "text_input", value: "text_input" }
  output_map { key: "text_output", value: "text_output" }
} ] }
'''


def test_serve_openai_port_with_a_model_py_and_an_ensemble(tmp_path: Any) -> None:
    from frontends.serve_process import Serve

    (tmp_path / "pb_words" / "1").mkdir(parents=True)
    (tmp_path / "pb_words" / "config.pbtxt").write_text(PB_CONFIG)
    (tmp_path / "pb_words" / "1" / "model.py").write_text(PB_MODEL)
    (tmp_path / "ens_words" / "1").mkdir(parents=True)
    (tmp_path / "ens_words" / "config.pbtxt").write_text(ENSEMBLE_CONFIG)
    serve = Serve("--model-repository", str(tmp_path), "--allow-http", "false",
                  "--allow-grpc", "false", "--allow-metrics", "false", "--openai-port", "0",
                  "--log-info", "false", "--exit-timeout-secs", "10")
    try:
        serve.wait_ready()
        url = f"http://127.0.0.1:{serve.ports['OpenAIService']}/v1"
        client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=30)
        assert sorted(m.id for m in client.models.list()) == ["ens_words", "pb_words"]
        for model in ("pb_words", "ens_words"):
            reply = client.completions.create(model=model, prompt="to be or")
            assert reply.choices[0].text == "TO BE OR ", model
            pieces = [c.choices[0].text for c in client.completions.create(
                model=model, prompt="not to be", stream=True)]
            assert pieces == ["NOT ", "TO ", "BE ", ""], model
            reply = client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": "hi"}])
            assert reply.choices[0].message.content == "USER: HI ASSISTANT: "
        serve.process.terminate()
        assert serve.wait() == 0, serve.output()
    finally:
        serve.end()


@pytest.mark.parametrize("flags, message", [
    (["--openai-port", "9000"], "give --openai-port=8000 (the --http-port)"),
    (["--openai-port", "8000", "--openai-address", "0.0.0.0"], "served on the HTTP address"),
])
def test_serve_ray_serves_openai_only_on_rays_port(flags: list, message: str,
                                                   capsys: pytest.CaptureFixture) -> None:
    pytest.importorskip("ray")
    import os

    from tritonserver._cli.serve import main

    before = dict(os.environ)
    assert main(["--ray", "--model-repository", "models", *flags]) == 2
    assert message in capsys.readouterr().err
    # Refused before Ray's ingress variables are set: nothing leaks into
    # this process's environment (and the Ray clusters it starts later).
    assert dict(os.environ) == before


# ---- A real Hugging Face tokenizer --------------------------------------------------------


@pytest.fixture(scope="module")
def tokenizer_folder(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real transformers tokenizer saved to a folder, as a downloaded one
    is: a word-level vocabulary and a chat template, built here (no hub)."""
    pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    from transformers import PreTrainedTokenizerFast

    words = ["[UNK]", "hi", "there", "be", "brief", "system:", "user:", "assistant:", "."]
    model = tokenizers.models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]")
    raw = tokenizers.Tokenizer(model)
    raw.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="[UNK]")
    tokenizer.chat_template = ("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}"
                               "{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}")
    folder = str(tmp_path_factory.mktemp("tokenizer"))
    tokenizer.save_pretrained(folder)
    return folder


def test_a_named_tokenizer_renders_chats_and_counts_tokens(server: tritonserver.Server,
                                                           tokenizer_folder: str) -> None:
    """With a tokenizer (a folder, as serve --openai-tokenizer takes it), a
    chat becomes its chat template's prompt and usage counts its tokens."""
    from transformers import AutoTokenizer

    reference = AutoTokenizer.from_pretrained(tokenizer_folder)
    options = OpenAI.Options(port=0, tokenizer=tokenizer_folder)
    with OpenAI(server, options) as frontend:
        client = openai.OpenAI(base_url=frontend.url, api_key="unused", max_retries=0)
        messages = [{"role": "system", "content": "be brief ."},
                    {"role": "user", "content": "hi there"}]
        reply = client.chat.completions.create(model="words", messages=messages)
        prompt = reference.apply_chat_template(messages, tokenize=False,
                                               add_generation_prompt=True)
        assert prompt == "<system>be brief .<user>hi there<assistant>"
        assert reply.choices[0].message.content == " ".join(prompt.split()) + " "
        usage = reply.usage
        assert usage.model_extra["count_source"] == "tokenizer"
        assert usage.prompt_tokens == len(reference.encode(prompt, add_special_tokens=False))
        assert usage.completion_tokens == len(
            reference.encode(reply.choices[0].message.content, add_special_tokens=False))
    with pytest.raises(tritonserver.InvalidArgumentError, match="cannot be loaded"):
        OpenAI(server, OpenAI.Options(port=0, tokenizer=tokenizer_folder + "/missing"))
