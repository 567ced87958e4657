"""OpenAI's wire, without the transport: a request body checked and made
into a Generation (frontends/dataplane/text_generation), the documents and
stream chunks of completions and chat completions, and OpenAI's error
object (``{"error": {"message", "type", "param", "code"}}``)."""

from __future__ import annotations

import uuid
from typing import Any, Optional

from tritonserver import InvalidArgumentError, NotFoundError
from tritonserver.frontends.dataplane.text_generation import Generation, message_text

# Fields read here; every other one goes to the model (text_generation.make_call).
_READ = ("model", "prompt", "messages", "stream", "stream_options", "n", "max_tokens",
         "max_completion_tokens", "stop")


class RequestError(InvalidArgumentError):
    """A request OpenAI would refuse (400), naming the field in ``param``."""

    def __init__(self, message: str, param: Optional[str] = None, code: Optional[str] = None):
        super().__init__(message)
        self.param = param
        self.code = code


class ModelNotFound(NotFoundError):
    """The model is unknown or not ready (404, code model_not_found)."""

    param = "model"
    code = "model_not_found"


def _type_name(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
            dict: "object", type(None): "null"}.get(type(value), type(value).__name__)


def _expect(doc: dict[str, Any], key: str, kinds: tuple[type, ...], what: str,
            optional: bool = True) -> Any:
    value = doc.get(key)
    if value is None:
        if optional:
            return None
        raise RequestError(f"you must provide a '{key}' parameter", key,
                           "missing_required_parameter")
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise RequestError(f"Invalid type for '{key}': expected {what}, but got "
                           f"{_type_name(value)} instead.", key, "invalid_type")
    return value


def _positive(doc: dict[str, Any], key: str) -> Optional[int]:
    value = _expect(doc, key, (int,), "an integer")
    if value is not None and value < 1:
        raise RequestError(f"Invalid '{key}': integer below minimum value. Expected a value >= 1, "
                           f"but got {value} instead.", key, "integer_below_min_value")
    return value  # type: ignore[no-any-return]


def _common(doc: dict[str, Any], prompt: str) -> tuple[str, Generation, bool]:
    """(model name, the generation, whether the stream ends with usage)."""
    model = _expect(doc, "model", (str,), "a string", optional=False)
    stream = bool(_expect(doc, "stream", (bool,), "a boolean"))
    options = _expect(doc, "stream_options", (dict,), "an object")
    include_usage = False
    if options is not None:
        if not stream:
            raise RequestError("The 'stream_options' parameter is only allowed when 'stream' "
                               "is enabled.", "stream_options")
        include_usage = bool(_expect(options, "include_usage", (bool,), "a boolean"))
    n = _expect(doc, "n", (int,), "an integer")
    if n is not None and n != 1:
        raise RequestError(f"Invalid 'n': only n=1 is supported (one choice per request), got "
                           f"{n}.", "n", "unsupported_value")
    max_tokens = _positive(doc, "max_completion_tokens")
    if max_tokens is None:
        max_tokens = _positive(doc, "max_tokens")
    stop = _expect(doc, "stop", (str, list), "a string or an array of strings")
    if isinstance(stop, str):
        stop = [stop]
    elif stop is not None and not all(isinstance(s, str) for s in stop):
        raise RequestError("Invalid 'stop': expected a string or an array of strings.", "stop",
                           "invalid_type")
    for key in ("temperature", "top_p", "presence_penalty", "frequency_penalty"):
        _expect(doc, key, (int, float), "a number")
    _expect(doc, "seed", (int,), "an integer")
    fields = {k: v for k, v in doc.items() if k not in _READ and v is not None}
    return model, Generation(prompt=prompt, stream=stream, max_tokens=max_tokens,
                             stop=list(stop or []), fields=fields), include_usage


def completion_request(doc: dict[str, Any]) -> tuple[str, Generation, bool]:
    """A /v1/completions body: (model name, generation, include_usage)."""
    prompt = doc.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    elif isinstance(prompt, list):
        raise RequestError("Invalid 'prompt': only one string prompt per request is supported "
                           "(n=1, no token arrays).", "prompt", "unsupported_value")
    if prompt is None:
        raise RequestError("you must provide a 'prompt' parameter", "prompt",
                           "missing_required_parameter")
    if not isinstance(prompt, str):
        raise RequestError(f"Invalid type for 'prompt': expected a string, but got "
                           f"{_type_name(prompt)} instead.", "prompt", "invalid_type")
    return _common(doc, prompt)


def chat_messages(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """A /v1/chat/completions body's messages, checked."""
    messages = _expect(doc, "messages", (list,), "an array", optional=False)
    if not messages:
        raise RequestError("Invalid 'messages': empty array. Expected an array with minimum "
                           "length 1, but got an empty array instead.", "messages",
                           "empty_array")
    for i, message in enumerate(messages):
        param = f"messages[{i}]"
        if not isinstance(message, dict):
            raise RequestError(f"Invalid type for '{param}': expected an object, but got "
                               f"{_type_name(message)} instead.", param, "invalid_type")
        if not isinstance(message.get("role"), str):
            raise RequestError(f"Missing or invalid '{param}.role': expected a string.",
                               f"{param}.role", "invalid_type")
        content = message.get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise RequestError(f"Invalid type for '{param}.content': expected a string or an "
                               f"array of content parts, but got {_type_name(content)} instead.",
                               f"{param}.content", "invalid_type")
        if isinstance(content, list):
            for part in content:
                if not isinstance(part, dict) or part.get("type") != "text" \
                        or not isinstance(part.get("text"), str):
                    raise RequestError(f"Invalid '{param}.content': only text parts "
                                       "({'type': 'text', 'text': ...}) are supported.",
                                       f"{param}.content", "unsupported_value")
    return messages  # type: ignore[no-any-return]


def chat_request(doc: dict[str, Any], prompt_of: Any) -> tuple[str, Generation, bool]:
    """A /v1/chat/completions body: (model name, generation, include_usage);
    ``prompt_of(messages)`` makes the prompt (the chat template)."""
    messages = chat_messages(doc)
    model, generation, include_usage = _common(doc, "")
    generation.prompt = prompt_of(messages)
    generation.messages = [dict(m, content=message_text(m.get("content"))) for m in messages]
    return model, generation, include_usage


# ---- Answers -------------------------------------------------------------------------------


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def model_object(name: str, created: int) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": created,
            "owned_by": "Triton Inference Server"}


def completion(ident: str, created: int, model: str, text: Optional[str],
               finish_reason: Optional[str], usage: Optional[dict[str, Any]],
               chunk: bool = False) -> dict[str, Any]:
    """A completion, or (``chunk``) one event of its stream (``text`` None:
    the usage chunk, with no choices)."""
    choices = [] if text is None else [
        {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}]
    return {"id": ident, "object": "text_completion", "created": created, "model": model,
            "choices": choices, "usage": usage, "system_fingerprint": None}


def chat_completion(ident: str, created: int, model: str, text: str,
                    finish_reason: Optional[str], usage: dict[str, Any]) -> dict[str, Any]:
    return {"id": ident, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text,
                                                 "refusal": None},
                         "logprobs": None, "finish_reason": finish_reason}],
            "usage": usage, "system_fingerprint": None}


def chat_chunk(ident: str, created: int, model: str, delta: Optional[dict[str, Any]],
               finish_reason: Optional[str], usage: Optional[dict[str, Any]]) -> dict[str, Any]:
    """One event of a chat completion's stream (``delta`` None: the usage chunk)."""
    choices = [] if delta is None else [
        {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]
    return {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": choices, "usage": usage, "system_fingerprint": None}


def error_object(message: str, status: int, param: Optional[str] = None,
                 code: Optional[str] = None) -> dict[str, Any]:
    """OpenAI's error object for an answer of ``status``."""
    if status == 401:
        kind = "authentication_error"
    elif status == 403:
        kind = "permission_error"
    elif status == 404:
        kind = "not_found_error" if code is None else "invalid_request_error"
    elif status >= 500:
        kind = "server_error"
    else:
        kind = "invalid_request_error"
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}
