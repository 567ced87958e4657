"""Text generation, protocol-free: which models turn text into text (Triton's
text-generation conventions, the shape TensorRT-LLM's and vLLM's model
repositories use), a generation request made into a call to such a model,
its responses made into text pieces with stop sequences and a token limit
applied, and the token counts of ``usage``. The OpenAI frontend
(frontends/openai) speaks the wire; everything here takes and gives plain
values and raises TritonErrors.

The conventions (docs/openai.md):

- a model is served when it has a BYTES input ``text_input`` and a BYTES
  output ``text_output`` (or, for chat only, a BYTES input ``messages``
  that takes the chat's messages as JSON); this is decided once per model
  load, from its metadata;
- every field of the request that names an input of the model becomes that
  input (``stream``, ``max_tokens``, ``stop``, ``temperature``...), every
  other one a request parameter (lists and objects as JSON text); a model
  with a BYTES input ``sampling_parameters`` (vLLM's) gets the sampling
  fields as one JSON object there instead; inputs ``exclude_input_in_output``,
  ``return_num_input_tokens`` and ``return_num_output_tokens`` are set true
  when the model has them;
- a decoupled model streams one piece of text per response; a model that
  is not answers once with the whole text;
- token counts come from a tokenizer when there is one, else from the
  model's responses (an output or response parameter ``num_input_tokens``
  or ``prompt_tokens``, ``num_output_tokens`` or ``completion_tokens``),
  else they are estimated (prompt: whitespace-separated words; completion:
  the responses that carried text for a decoupled model, the words of the
  text otherwise).
"""

from __future__ import annotations

import codecs
import importlib
import json
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from tritonserver._distribution import install_command
from tritonserver._errors import raise_taken
from tritonserver import InvalidArgumentError, NotFoundError, Server, TritonError
from tritonserver.frontends.dataplane.generate import add_member
from tritonserver.frontends.dataplane.inference import WireRequest, send_request
from tritonserver.frontends.dataplane.state import ModelEntry, state_of
from tritonserver.frontends.dataplane.tensors import tensor_to_list

TEXT_INPUT = "text_input"
TEXT_OUTPUT = "text_output"
MESSAGES_INPUT = "messages"
SAMPLING_INPUT = "sampling_parameters"
# Inputs set true when the model has them (vLLM's backend).
TRUE_INPUTS = ("exclude_input_in_output", "return_num_input_tokens", "return_num_output_tokens")
# Outputs or response parameters naming token counts, first found wins.
PROMPT_COUNT_NAMES = ("num_input_tokens", "prompt_tokens")
COMPLETION_COUNT_NAMES = ("num_output_tokens", "completion_tokens")
# Request fields a sampling_parameters input does not take (they go as themselves).
NOT_SAMPLING = ("stream",)


class NotTextModel(InvalidArgumentError):
    """A model that does not follow the text-generation conventions."""


@dataclass
class TextModel:
    """A model as text generation sees it, decided once per load."""

    name: str
    decoupled: bool
    inputs: dict[str, dict[str, Any]]  # name -> metadata spec (datatype, shape)
    outputs: set[str]
    created: int  # when this frontend first saw this load of the model (Unix seconds)

    @property
    def takes_text(self) -> bool:
        return _is_bytes(self.inputs.get(TEXT_INPUT)) and TEXT_OUTPUT in self.outputs

    @property
    def takes_messages(self) -> bool:
        return _is_bytes(self.inputs.get(MESSAGES_INPUT)) and TEXT_OUTPUT in self.outputs

    @property
    def served(self) -> bool:
        return self.takes_text or self.takes_messages


def _is_bytes(spec: Optional[dict[str, Any]]) -> bool:
    return spec is not None and spec.get("datatype") == "BYTES"


class TextModels:
    """A server's models as text generation sees them: each decided once
    per load (the cache follows the shared model entries, which a load or
    unload drops)."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[ModelEntry, TextModel]] = {}

    def get(self, server: Server, name: str) -> tuple[ModelEntry, TextModel]:
        """The model's entry and description; NotFoundError for a model
        that is unknown or not ready."""
        try:
            entry = state_of(server).entry(server, name, -1)
        except TritonError as e:
            raise NotFoundError(f"The model '{name}' does not exist") from e
        seen = self._seen.get(name)
        if seen is not None and seen[0] is entry:
            return seen
        try:
            metadata = entry.model.metadata()
        except TritonError as e:
            raise NotFoundError(f"The model '{name}' does not exist") from e
        model = TextModel(
            name=name, decoupled=entry.decoupled,
            inputs={spec["name"]: spec for spec in metadata.get("inputs", [])},
            outputs={spec["name"] for spec in metadata.get("outputs", [])},
            created=int(time.time()))
        if len(self._seen) >= 4096:  # names come from the network
            self._seen.clear()
        self._seen[name] = (entry, model)
        return entry, model

    def served(self, server: Server, name: str, chat: bool = False) -> tuple[ModelEntry,
                                                                              TextModel]:
        """As ``get``, refusing a model that does not take text
        (``chat``: or messages)."""
        entry, model = self.get(server, name)
        if not (model.takes_text or (chat and model.takes_messages)):
            raise NotTextModel(
                f"model '{name}' does not generate text: it needs a BYTES input "
                f"'{TEXT_INPUT}'" + (f" (or '{MESSAGES_INPUT}')" if chat else "")
                + f" and a BYTES output '{TEXT_OUTPUT}'")
        return entry, model

    def listed(self, server: Server) -> list[TextModel]:
        """The ready models that are served, by name."""
        names = sorted({m.name for m in server.models(exclude_not_ready=True).values()})
        out = []
        for name in names:
            try:
                _, model = self.get(server, name)
            except TritonError:
                continue  # unloaded meanwhile
            if model.served:
                out.append(model)
        return out


# ---- Requests ------------------------------------------------------------------------


@dataclass
class Generation:
    """One request for text: the prompt (or, for a model that takes them,
    the chat's messages), and the fields passed on to the model."""

    prompt: str
    stream: bool = False
    max_tokens: Optional[int] = None
    stop: list[str] = field(default_factory=list)
    fields: dict[str, Any] = field(default_factory=dict)  # temperature, seed, unknown ones...
    messages: Optional[list[Any]] = None  # for a model with a 'messages' input


def _as_parameter(value: Any) -> Any:
    """A request parameter's value: scalars as they are, lists and objects as JSON text."""
    if isinstance(value, (str, int, float)):  # bool is an int
        return value
    return json.dumps(value, separators=(",", ":"))


def _as_text(value: Any) -> Any:
    """A value for a BYTES input: strings (or a list of them) as they are,
    anything else as JSON text."""
    if isinstance(value, str) or (isinstance(value, list)
                                  and all(isinstance(v, str) for v in value)):
        return value
    return json.dumps(value, separators=(",", ":"))


def make_call(model: TextModel, generation: Generation) -> WireRequest:
    """The call a generation makes to ``model`` (the conventions above)."""
    call = WireRequest(model_name=model.name)
    values: dict[str, Any] = {}
    if generation.messages is not None and model.takes_messages:
        values[MESSAGES_INPUT] = json.dumps(generation.messages, separators=(",", ":"))
    else:
        values[TEXT_INPUT] = generation.prompt
    passed: dict[str, Any] = {"stream": generation.stream}
    if generation.max_tokens is not None:
        passed["max_tokens"] = generation.max_tokens
    if generation.stop:
        passed["stop"] = list(generation.stop)
    for key, value in generation.fields.items():
        if value is not None and key not in passed and key not in values:
            passed[key] = value
    sampling: dict[str, Any] = {}
    takes_sampling = _is_bytes(model.inputs.get(SAMPLING_INPUT)) \
        and SAMPLING_INPUT not in generation.fields
    for key, value in passed.items():
        if key in model.inputs:
            values[key] = _as_text(value) if _is_bytes(model.inputs[key]) else value
        elif takes_sampling and key not in NOT_SAMPLING:
            sampling[key] = value
        else:
            values[key] = _as_parameter(value)
    if takes_sampling:
        values[SAMPLING_INPUT] = json.dumps(sampling, separators=(",", ":"))
    for name in TRUE_INPUTS:
        if name in model.inputs and name not in values:
            values[name] = True
    for key in values:
        add_member(call, model.inputs, values, key)
    return call


def start(server: Server, entry: ModelEntry, model: TextModel, generation: Generation,
          tokenizer: Optional["Tokenizer"] = None,
          trace_context: Optional[dict[str, str]] = None) -> "TextStream":
    """Send a generation to its model: its stream of text pieces.
    ``trace_context``: the W3C trace context headers it came with."""
    call = make_call(model, generation)
    call.trace_context = trace_context
    iterator = send_request(call, server, entry, raise_on_error=False)
    return TextStream(iterator, model, generation, tokenizer)


# ---- Responses -----------------------------------------------------------------------


def _count(response: Any, names: tuple[str, ...]) -> Optional[int]:
    for name in names:
        tensor = response.outputs.get(name)
        if tensor is not None:
            values = tensor_to_list(name, tensor)
            if values and isinstance(values[0], (int, float)):
                return int(sum(values))
        value = response.parameters.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return int(value)
    return None


def response_bytes(response: Any) -> bytes:
    """The bytes of a response's ``text_output`` elements, joined."""
    tensor = response.outputs.get(TEXT_OUTPUT)
    if tensor is None:
        return b""
    return b"".join(bytes(x) for x in tensor.to_bytes_array().reshape(-1))


class StopScanner:
    """Cuts text before the first stop sequence to complete; text that may
    begin one is held back until the next piece tells."""

    def __init__(self, stops: list[str]):
        self.stops = [s for s in stops if s]
        self.held = ""

    def feed(self, piece: str) -> tuple[str, bool]:
        """(text to emit now, whether a stop sequence was met)."""
        if not self.stops:
            return piece, False
        text = self.held + piece
        # The stop sequence completed first (the earliest end; on a tie the
        # longer one), so the cut is the same however the text was split.
        found = [(i + len(stop), i) for stop in self.stops for i in (text.find(stop),) if i >= 0]
        if found:
            self.held = ""
            return text[:min(found)[1]], True
        keep = 0
        for stop in self.stops:
            for n in range(min(len(stop) - 1, len(text)), keep, -1):
                if text.endswith(stop[:n]):
                    keep = n
                    break
        self.held = text[len(text) - keep:] if keep else ""
        return text[:len(text) - keep], False

    def flush(self) -> str:
        held, self.held = self.held, ""
        return held


class Tally:
    """The token counts of one generation (the module's docstring says
    where they come from)."""

    def __init__(self, model: TextModel, prompt: str, tokenizer: Any = None):
        self.model = model
        self.prompt = prompt
        self.tokenizer = tokenizer
        self.text: list[str] = []
        self.pieces = 0  # responses that carried text
        self.reported_prompt: Optional[int] = None
        self.reported_completion: Optional[int] = None

    def add(self, response: Any, text: str) -> None:
        if text:
            self.text.append(text)
            self.pieces += 1
        prompt = _count(response, PROMPT_COUNT_NAMES)
        if prompt is not None:
            self.reported_prompt = prompt
        completion = _count(response, COMPLETION_COUNT_NAMES)
        if completion is not None:
            self.reported_completion = (self.reported_completion or 0) + completion

    def completion_so_far(self) -> int:
        """What the token limit is checked against while streaming."""
        if self.reported_completion is not None:
            return self.reported_completion
        if self.model.decoupled:
            return self.pieces
        return len("".join(self.text).split())

    @property
    def source(self) -> str:
        """"tokenizer", "model" or "estimate"."""
        if self.tokenizer is not None:
            return "tokenizer"
        if self.reported_completion is not None or self.reported_prompt is not None:
            return "model"
        return "estimate"

    def usage(self) -> dict[str, Any]:
        if self.tokenizer is not None:
            prompt = self.tokenizer.count(self.prompt)
            completion = self.tokenizer.count("".join(self.text))
        else:
            prompt = self.reported_prompt if self.reported_prompt is not None \
                else len(self.prompt.split())
            completion = self.completion_so_far()
        return {"prompt_tokens": prompt, "completion_tokens": completion,
                "total_tokens": prompt + completion}


class TextStream:
    """A generation's responses as text pieces: ``await stream.next()``
    gives the next piece ("" possible) or None at the end; then
    ``finish_reason`` is "stop" (the model ended, or a stop sequence was
    met) or "length" (``max_tokens`` reached). A model's error is raised.
    ``cancel()`` cancels the request in the core."""

    def __init__(self, iterator: Any, model: TextModel, generation: Generation,
                 tokenizer: Any = None):
        self.iterator = iterator
        self.model = model
        self.max_tokens = generation.max_tokens
        self.scanner = StopScanner(generation.stop)
        self.tally = Tally(model, generation.prompt, tokenizer)
        self.finish_reason: Optional[str] = None
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._ended = False

    def cancel(self) -> None:
        self.iterator.cancel()

    def _end(self, reason: str, cancel: bool) -> None:
        self.finish_reason = reason
        self._ended = True
        if cancel:
            self.iterator.cancel()

    async def next(self) -> Optional[str]:
        if self._ended:
            return None
        async for response in self.iterator:
            if response.error is not None:
                self._ended = True
                raise_taken(response, "error")  # no cycle through this frame
            if response.final and not response.outputs and not response.parameters:
                continue  # a decoupled model's closing flag
            # UTF-8 across pieces: a character a model split between two responses
            # (byte-level tokens) is whole in the second; invalid bytes become U+FFFD.
            text = self.decoder.decode(response_bytes(response))
            self.tally.add(response, text)
            out, stopped = self.scanner.feed(text)
            if stopped:
                self._end("stop", cancel=not response.final)
            elif self.model.decoupled and self.max_tokens is not None \
                    and self.tally.completion_so_far() >= self.max_tokens:
                out += self.scanner.flush()
                self._end("length", cancel=not response.final)
            return out
        rest, stopped = self.scanner.feed(self.decoder.decode(b"", final=True))
        if not stopped:
            rest += self.scanner.flush()
        reached = not stopped and self.max_tokens is not None \
            and self.tally.completion_so_far() >= self.max_tokens
        self._end("length" if reached else "stop", cancel=False)
        return rest or None

    async def whole(self) -> str:
        """Every piece, joined (a request that is not streamed)."""
        parts: list[str] = []
        while True:
            piece = await self.next()
            if piece is None:
                return "".join(parts)
            parts.append(piece)


# ---- Chat ----------------------------------------------------------------------------


def message_text(content: Any) -> str:
    """A chat message's content as text: a string, or the text of its text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content
                   if isinstance(part, dict) and part.get("type") == "text")


def plain_prompt(messages: list[dict[str, Any]]) -> str:
    """The plain chat template: one line per message, ``<role>: <content>``,
    then ``assistant:`` for the model to go on from."""
    lines = [f"{m.get('role', 'user')}: {message_text(m.get('content'))}" for m in messages]
    return "\n".join(lines + ["assistant:"])


class Tokenizer:
    """A Hugging Face tokenizer (``transformers``): its chat template and
    token counts. Loaded when made, so a wrong name fails at once."""

    def __init__(self, name: str):
        try:
            transformers = importlib.import_module("transformers")  # optional: not typed here
        except ImportError:
            raise InvalidArgumentError(
                f"tokenizer {name!r}: the tokenizer needs the transformers package "
                f"({install_command('openai')})") from None
        try:
            self._tokenizer = transformers.AutoTokenizer.from_pretrained(name)
        except Exception as e:
            raise InvalidArgumentError(f"tokenizer {name!r} cannot be loaded: {e}") from None
        self.name = name

    def chat_prompt(self, messages: list[dict[str, Any]]) -> str:
        if getattr(self._tokenizer, "chat_template", None) is None:
            return plain_prompt(messages)
        try:
            return str(self._tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True))
        except Exception as e:
            raise InvalidArgumentError(f"the chat template cannot render these messages: {e}") \
                from None

    def count(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False))


def chat_prompt(messages: list[dict[str, Any]], tokenizer: Optional[Tokenizer]) -> str:
    """The prompt of a chat: the tokenizer's chat template, else the plain one."""
    return tokenizer.chat_prompt(messages) if tokenizer is not None else plain_prompt(messages)
