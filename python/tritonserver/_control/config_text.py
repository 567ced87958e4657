"""Model configurations in protobuf text format (config.pbtxt), read without protobuf.

The package hands the Triton core model configurations it has rewritten
(fields added to or changed in a repository's config.pbtxt) as JSON, which the
core reads with ``google::protobuf::util::JsonStringToMessage``.
``parse_model_config`` turns the text format into the dict of protobuf's JSON
mapping, with the .proto's field names kept: repeated fields become lists,
maps objects with string keys, 64-bit integers strings, enums their value's
name, bytes base64, infinities and NaN the strings "Infinity", "-Infinity" and
"NaN". ``json.dumps`` of the result is the JSON to hand over.

The base package depends on numpy alone, so protobuf is not imported: the
schema is read at first use from the model_config.proto shipped in the package,
by a small reader of the part of the .proto language that file uses (package,
messages and enums, nested ones, oneof, repeated, optional, map<K, V>, field
options, reserved and option statements, comments). Imports, groups and
extensions are not read. Where protobuf's C++ and Python text parsers differ,
this one follows C++ (the core's own parser of config.pbtxt): unknown escapes
are errors, \\u escapes may form surrogate pairs.
"""

from __future__ import annotations

import base64
import functools
import math
import os
import re
from dataclasses import dataclass
from typing import Any, NamedTuple, Optional

from tritonserver._package_files import package_file

ROOT = "inference.ModelConfig"

_INT_RANGES = {f"{kind}{bits}": (0, 2**bits - 1) if kind in ("uint", "fixed") else
               (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
               for bits in (32, 64) for kind in ("int", "sint", "sfixed", "uint", "fixed")}
_INT64 = {name for name in _INT_RANGES if name.endswith("64")}  # strings in JSON
_SCALARS = set(_INT_RANGES) | {"double", "float", "bool", "string", "bytes"}
_TRUE, _FALSE = ("true", "True", "t", "1"), ("false", "False", "f", "0")
_FLT_MAX = 3.4028234663852886e38
_INT = re.compile(r"(-?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")
_FLOAT = re.compile(r"-?(?:(?:(?:0|[1-9][0-9]*)(?:\.[0-9]*)?|\.[0-9]+)(?:e[+-]?[0-9]+)?f?"
                    r"|inf(?:inity)?f?|nanf?)", re.IGNORECASE)
_ESCAPE = re.compile(r"\\(?:([0-7]{1,3})|x([0-9a-fA-F]{1,2})|u([0-9a-fA-F]{4})"
                     r"(?:\\u([dD][c-fC-F][0-9a-fA-F]{2}))?|U([0-9a-fA-F]{8})|(.))")
_SIMPLE_ESCAPES = {"n": 10, "t": 9, "r": 13, "a": 7, "b": 8, "f": 12, "v": 11,
                   "\\": 92, "'": 39, '"': 34, "?": 63}


class ConfigTextError(ValueError):
    """Malformed text (a configuration, or the .proto it is read against),
    with the line and column (both from 1) where reading stopped."""

    def __init__(self, line: int, column: int, message: str, source: str = "") -> None:
        where = f"{source}: " if source else ""
        super().__init__(f"{where}line {line}, column {column}: {message}")
        self.line = line
        self.column = column


# ---- tokens, for both languages (they differ in comments and names) ----

class _Token(NamedTuple):
    kind: str  # "ident", "number", "string", "symbol" or "eof"
    text: str
    line: int
    column: int


def _lexer(comment: str, ident: str) -> re.Pattern[str]:
    return re.compile(
        rf"(?P<skip>\s+|{comment})"
        r"""|(?P<string>"(?:[^"\\\n]|\\[^\n])*"|'(?:[^'\\\n]|\\[^\n])*')"""
        r"|(?P<number>-?\.?[0-9](?:[A-Za-z0-9_.]|(?<=[eE])[+-])*|-[A-Za-z_][A-Za-z0-9_]*)"
        rf"|(?P<ident>{ident})|(?P<symbol>[{{}}<>\[\]:;,=()])", re.DOTALL)


_TEXT_LEXER = _lexer(r"\#[^\n]*", r"[A-Za-z_][A-Za-z0-9_]*")
_PROTO_LEXER = _lexer(r"//[^\n]*|/\*.*?\*/", r"\.?[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


class _Cursor:
    """The next token of a text, read as it is needed (so the first fault is the one reported)."""

    def __init__(self, text: str, lexer: re.Pattern[str], source: str = "") -> None:
        self.text, self.lexer, self.source = text, lexer, source
        self.pos, self.line, self.line_start = 0, 1, 0
        self.current = self.scan()

    def scan(self) -> _Token:
        while self.pos < len(self.text):
            line, column = self.line, self.pos - self.line_start + 1
            match = self.lexer.match(self.text, self.pos)
            if match is None:
                char = self.text[self.pos]
                what = "unterminated string" if char in "\"'" else f"unexpected character {char!r}"
                raise ConfigTextError(line, column, what, self.source)
            if "\n" in match.group():
                self.line += match.group().count("\n")
                self.line_start = self.text.rindex("\n", self.pos, match.end()) + 1
            self.pos = match.end()
            if match.lastgroup != "skip":
                return _Token(str(match.lastgroup), match.group(), line, column)
        return _Token("eof", "", self.line, self.pos - self.line_start + 1)

    def next(self) -> _Token:
        token = self.current
        if token.kind != "eof":
            self.current = self.scan()
        return token

    def accept(self, symbol: str) -> bool:
        if self.current.kind == "symbol" and self.current.text == symbol:
            self.next()
            return True
        return False

    def expect(self, symbol: str, what: str = "") -> None:
        if not self.accept(symbol):
            raise self.expected(what or repr(symbol))

    def word(self, what: str) -> _Token:
        if self.current.kind != "ident":
            raise self.expected(what)
        return self.next()

    def expected(self, what: str, token: Optional[_Token] = None) -> ConfigTextError:
        token = token or self.current
        found = "end of input" if token.kind == "eof" else repr(token.text)
        return self.fail(f"expected {what}, found {found}", token)

    def fail(self, message: str, token: Optional[_Token] = None) -> ConfigTextError:
        token = token or self.current
        return ConfigTextError(token.line, token.column, message, self.source)


def _int(text: str) -> Optional[int]:
    """An integer literal's value (decimal, 0x hex or 0 octal), or None."""
    match = _INT.fullmatch(text)
    if match is None:
        return None
    sign, digits = match.groups()
    base = 16 if digits[1:2] in ("x", "X") else 8 if digits[0] == "0" and len(digits) > 1 else 10
    return -int(digits, base) if sign else int(digits, base)


# ---- the schema, from the .proto ----

@dataclass
class _Field:
    name: str
    type: str  # a scalar type's name, or a message's or an enum's full name
    repeated: bool = False
    oneof: Optional[str] = None  # proto3 ``optional`` fields have their own, as in protoc
    map_key: Optional[str] = None  # maps: the key's type; ``type`` is then the entry message


class _Schema:
    """Messages (field name -> _Field) and enums (value name -> number, in order) by full name."""

    def __init__(self, text: str, source: str) -> None:
        self.messages: dict[str, dict[str, _Field]] = {}
        self.enums: dict[str, dict[str, int]] = {}
        self.cursor = _Cursor(text, _PROTO_LEXER, source)
        self.unresolved: list[tuple[str, _Field, _Token]] = []
        package = ""
        while self.cursor.current.kind != "eof":
            if self.cursor.accept(";"):
                continue
            word = self.cursor.word("a top-level definition").text
            if word == "package":
                package = self.cursor.word("a package name").text
                self.cursor.expect(";")
            elif word in ("syntax", "option", "import"):
                self.skip(";")
            elif word in ("message", "enum", "service"):
                self.definition(word, package)
            else:
                raise self.cursor.fail(f"unexpected {word!r} (extensions are not read)")
        for scope, field, token in self.unresolved:  # protobuf's scoping: innermost first
            name = field.type
            candidates = [name[1:]] if name.startswith(".") else [
                f"{scope.rsplit('.', n)[0]}.{name}" for n in range(scope.count(".") + 1)] + [name]
            found = [c for c in candidates if c in self.messages or c in self.enums]
            if not found:
                raise self.cursor.fail(f"unknown type {name!r}", token)
            field.type = found[0]

    def definition(self, kind: str, scope: str) -> None:
        cursor = self.cursor
        full = f"{scope}.{cursor.word(f'a {kind} name').text}".lstrip(".")
        if kind == "service":
            self.skip("}")
            return
        cursor.expect("{")
        if kind == "message":
            self.messages[full] = {}
            self.fields(full, None)
            return
        values = self.enums.setdefault(full, {})
        while not cursor.accept("}"):
            if cursor.accept(";"):
                continue
            name = cursor.word("an enum value name").text
            if name in ("option", "reserved"):
                self.skip(";")
                continue
            cursor.expect("=")
            values[name] = self.number()
            if cursor.accept("["):  # options
                self.skip("]", 1)
            cursor.expect(";")

    def fields(self, message: str, oneof: Optional[str]) -> None:
        cursor = self.cursor
        while not cursor.accept("}"):
            if cursor.accept(";"):
                continue
            token = cursor.word("a field, or '}'")
            label = token.text
            if label in ("message", "enum") and cursor.current.kind == "ident":
                self.definition(label, message)
            elif label in ("option", "reserved", "extensions"):
                self.skip(";")
            elif label == "oneof" and oneof is None and cursor.current.kind == "ident":
                name = cursor.next().text
                cursor.expect("{")
                self.fields(message, name)
            else:
                if label in ("repeated", "optional", "required"):
                    token = cursor.word("a field type")
                key = value = ""
                if token.text == "map" and cursor.accept("<"):
                    key = cursor.word("a map key type").text
                    cursor.expect(",")
                    value = cursor.word("a map value type").text
                    cursor.expect(">")
                name = cursor.word("a field name").text
                cursor.expect("=")
                self.number()
                if cursor.accept("["):  # options
                    self.skip("]", 1)
                cursor.expect(";")
                field = _Field(name, token.text, label == "repeated",
                               f"_{name}" if label == "optional" else oneof)
                if key:  # a repeated message of (key, value) entries
                    field = _Field(name, f"{message}.{name.title().replace('_', '')}Entry", True, None, key)
                    self.messages[field.type] = {"key": _Field("key", key), "value": _Field("value", value)}
                    message_of, to_resolve = field.type, self.messages[field.type]["value"]
                else:
                    message_of, to_resolve = message, field
                if to_resolve.type not in _SCALARS:
                    self.unresolved.append((message_of, to_resolve, token))
                self.messages[message][name] = field

    def number(self) -> int:
        value = _int(self.cursor.current.text) if self.cursor.current.kind == "number" else None
        if value is None:
            raise self.cursor.expected("an integer")
        self.cursor.next()
        return value

    def skip(self, end: str, depth: int = 0) -> None:
        """Skips past the next ``end`` outside the brackets opened on the way
        (``depth`` of them already open)."""
        while True:
            token = self.cursor.next()
            if token.kind == "eof":
                raise self.cursor.expected(repr(end), token)
            if token.kind == "symbol":
                depth += (token.text in "{[(") - (token.text in "}])")
                if depth == 0 and token.text == end:
                    return


@functools.lru_cache(maxsize=None)
def _schema(path: str) -> _Schema:
    with open(path, encoding="utf-8") as f:
        return _Schema(f.read(), path)


# ---- the text format ----

def config_file(folder: str, config_name: Optional[str] = None) -> str:
    """The file the core reads a model's configuration from: with a model
    config name (the executable's ``--model-config-name``),
    ``configs/<name>.pbtxt`` where the model has one, else ``config.pbtxt``."""
    if config_name:
        named = os.path.join(folder, "configs", f"{config_name}.pbtxt")
        if os.path.isfile(named):
            return named
    return os.path.join(folder, "config.pbtxt")


def parse_model_config(text: str) -> dict[str, Any]:
    """A config.pbtxt's text -> the dict of its JSON form (see the module's doc)."""
    schema = _schema(package_file("proto", "model_config.proto"))
    return _TextParser(schema, _Cursor(text, _TEXT_LEXER)).message(ROOT, None)


class _TextParser:
    def __init__(self, schema: _Schema, cursor: _Cursor) -> None:
        self.schema, self.cursor = schema, cursor

    def message(self, type_name: str, close: Optional[str]) -> dict[str, Any]:
        cursor, fields = self.cursor, self.schema.messages[type_name]
        out: dict[str, Any] = {}
        oneofs: dict[str, str] = {}
        while not (cursor.accept(close) if close else cursor.current.kind == "eof"):
            token = cursor.word(f"a field name or {close!r}" if close else "a field name")
            field = fields.get(token.text)
            if field is None:
                raise cursor.fail(f"unknown field {token.text!r} in {type_name}", token)
            is_message = field.type in self.schema.messages
            if not field.repeated and field.name in out and (  # a proto3 scalar may repeat its default
                    is_message or field.oneof or str(out[field.name]) != str(self.default(field))):
                raise cursor.fail(f"field {field.name!r} is given more than once", token)
            if field.oneof is not None and oneofs.setdefault(field.oneof, field.name) != field.name:
                raise cursor.fail(f"fields {oneofs[field.oneof]!r} and {field.name!r} are both given, "
                                  f"but they belong to the same oneof {field.oneof!r}", token)
            if is_message:
                cursor.accept(":")
            else:
                cursor.expect(":", f"':' after field {field.name!r}")
            if field.repeated and cursor.accept("["):
                if not cursor.accept("]"):
                    self.value(field, out)
                    while not cursor.accept("]"):
                        cursor.expect(",", "',' or ']'")
                        self.value(field, out)
            else:
                self.value(field, out)
            if not cursor.accept(","):
                cursor.accept(";")
        return out

    def value(self, field: _Field, out: dict[str, Any]) -> None:
        value: Any
        if field.type in self.schema.messages:
            closes = {"{": "}", "<": ">"}
            token = self.cursor.current
            if token.kind != "symbol" or token.text not in closes:
                raise self.cursor.expected(f"'{{' or '<' to open message field {field.name!r}")
            self.cursor.next()
            value = self.message(field.type, closes[token.text])
        else:
            value = self.scalar(field)
        if field.map_key is not None:
            entry = self.schema.messages[field.type]
            key = value.get("key", self.default(entry["key"]))
            key = ("true" if key else "false") if isinstance(key, bool) else str(key)
            out.setdefault(field.name, {})[key] = value.get("value", self.default(entry["value"]))
        elif field.repeated:
            out.setdefault(field.name, []).append(value)
        else:
            out[field.name] = value

    def scalar(self, field: _Field) -> Any:
        cursor, kind = self.cursor, field.type
        token = cursor.current
        what = f"a {kind} value for field {field.name!r}"
        if kind in ("string", "bytes"):
            if token.kind != "string":
                raise cursor.expected(what)
            data = b""
            while cursor.current.kind == "string":  # adjacent literals are one string
                data += self.unescape(cursor.next())
            if kind == "bytes":
                return base64.b64encode(data).decode("ascii")
            try:
                return data.decode("utf-8")
            except UnicodeDecodeError:
                raise cursor.fail(f"string for field {field.name!r} is not valid UTF-8", token) from None
        text = token.text if token.kind in ("ident", "number") else ""
        number = _int(text) if token.kind == "number" else None
        if kind == "bool" and text in _TRUE + _FALSE:
            cursor.next()
            return text in _TRUE
        if kind in self.schema.enums:
            values = self.schema.enums[kind]
            number = values.get(text, number)
            if number is not None and -(2**31) <= number < 2**31:
                cursor.next()  # by name, or by number (proto3 enums are open); the first name in JSON
                return next((name for name, n in values.items() if n == number), number)
            what = f"a value of enum {kind} for field {field.name!r}"
        if kind in ("float", "double") and _FLOAT.fullmatch(text):
            cursor.next()
            text = text.lower()
            value = float(text[:-1] if text.endswith("f") and not text.endswith("inf") else text)
            if kind == "float" and math.isfinite(value) and abs(value) > _FLT_MAX:
                value = math.copysign(math.inf, value)
            return value if math.isfinite(value) else "NaN" if math.isnan(value) else (
                "Infinity" if value > 0 else "-Infinity")
        if kind in _INT_RANGES:
            low, high = _INT_RANGES[kind]
            if number is not None and low <= number <= high:
                cursor.next()
                return str(number) if kind in _INT64 else number
            what = f"a {kind} ({low} to {high}) for field {field.name!r}"
        raise cursor.expected(what)

    def unescape(self, token: _Token) -> bytes:
        """A string literal's bytes (C escapes; \\u and \\U give UTF-8)."""
        body, out, pos = token.text[1:-1], bytearray(), 0
        for match in _ESCAPE.finditer(body):
            out += body[pos:match.start()].encode("utf-8")
            at = token._replace(column=token.column + 1 + match.start())
            pos = match.end()
            octal, hexa, high, low, wide, other = match.groups()
            if high is None and wide is None:
                byte = int(octal, 8) if octal else int(hexa, 16) if hexa else _SIMPLE_ESCAPES.get(other, 256)
                if byte > 255:
                    raise self.cursor.fail(f"invalid escape {match.group()!r} in string", at)
                out.append(byte)
                continue
            code = int(high or wide, 16)
            if low is not None and 0xD800 <= code < 0xDC00:  # a surrogate pair
                code = 0x10000 + ((code - 0xD800) << 10) + int(low, 16) - 0xDC00
            if (low is not None and code <= 0xFFFF) or code > 0x10FFFF or 0xD800 <= code < 0xE000:
                raise self.cursor.fail(f"invalid code point {match.group()!r} in string", at)
            out += chr(code).encode("utf-8")
        return bytes(out + body[pos:].encode("utf-8"))

    def default(self, field: _Field) -> Any:
        """The JSON form of a field's default value."""
        if field.type in self.schema.messages:
            return {}
        if field.type in self.schema.enums:
            values = self.schema.enums[field.type]
            return next((name for name, n in values.items() if n == 0), next(iter(values)))
        defaults = {"bool": False, "string": "", "bytes": "", "float": 0.0, "double": 0.0}
        return defaults.get(field.type, "0" if field.type in _INT64 else 0)
