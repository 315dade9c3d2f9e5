"""A reader of protobuf text format (what `.pbtxt` / `.textproto` files hold), without the message's
schema.

`parse(text)` returns the fields in order as (name, value) pairs: a nested message is a list of
pairs, a scalar a `Scalar` (`kind` "string" for quoted text, already unescaped, else "word":
numbers, enum names, true/false). A list `name: [a, b]` gives one pair per element, as the format
defines. The caller types the values against the message it expects (eval_tfma.py does for TFMA's
EvalConfig). Comments (`# ...`), `:` before a message, `<...>` delimiters and `,`/`;` separators are
accepted. Errors are ValueError with the line and column.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from generic_trainer.artifacts.bounded_parse import MAX_DEPTH

_TOKEN = re.compile(
    r"""
    (?P<space>\s+|\#[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<word>[A-Za-z0-9_.+-]+)
  | (?P<punct>[{}<>:\[\],;])
""",
    re.VERBOSE,
)
_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "?": "?",
}
_CLOSE = {"{": "}", "<": ">"}


@dataclasses.dataclass(frozen=True)
class Scalar:
    """A scalar value: quoted text (`kind` "string") or a bare word (number, enum name,
    true/false)."""

    kind: str
    text: str


def _unescape(body: str) -> str:
    out = bytearray()
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode("utf-8")
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in _ESCAPES:
            out += _ESCAPES[nxt].encode()
            i += 2
        elif nxt in "xX":
            digits = re.match(r"[0-9A-Fa-f]{1,2}", body[i + 2 :])
            if not digits:
                raise ValueError(f"bad escape \\{nxt} in {body!r}")
            out.append(int(digits.group(), 16))
            i += 2 + len(digits.group())
        elif nxt in "01234567":
            digits = re.match(r"[0-7]{1,3}", body[i + 1 :]).group()  # type: ignore[union-attr]
            out.append(int(digits, 8) & 0xFF)
            i += 1 + len(digits)
        else:
            raise ValueError(f"bad escape \\{nxt} in {body!r}")
    return out.decode("utf-8", errors="replace")


def _tokens(text: str) -> list[tuple[str, str, int]]:
    """(kind, text, offset) of every token but spaces and comments."""
    tokens, pos = [], 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if not match:
            raise ValueError(f"unexpected character {text[pos]!r} at {_where(text, pos)}")
        kind = match.lastgroup or ""
        if kind != "space":
            tokens.append((kind, match.group(), pos))
        pos = match.end()
    return tokens


def _where(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    return f"line {line} column {pos - (text.rfind(chr(10), 0, pos) + 1) + 1}"


class _Parser:
    def __init__(self, text: str):
        self.text, self.tokens, self.i, self.depth = text, _tokens(text), 0, 0

    def peek(self) -> tuple[str, str, int] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, expected: str | None = None) -> tuple[str, str, int]:
        token = self.peek()
        if token is None:
            raise ValueError(
                f"unexpected end of text{f', expected {expected!r}' if expected else ''}"
            )
        if expected is not None and token[1] != expected:
            raise ValueError(
                f"expected {expected!r} at {_where(self.text, token[2])}, found {token[1]!r}"
            )
        self.i += 1
        return token

    def message(self, close: str | None) -> list[tuple[str, Any]]:
        fields: list[tuple[str, Any]] = []
        while True:
            token = self.peek()
            if token is None or token[1] == close:
                if token is None and close is not None:
                    raise ValueError(f"unexpected end of text: {close!r} missing")
                return fields
            kind, name, pos = self.take()
            if kind != "word" or not re.match(r"^[A-Za-z_]\w*$", name):
                raise ValueError(
                    f"expected a field name at {_where(self.text, pos)}, found {name!r}"
                )
            fields += [(name, value) for value in self.field_values()]
            if self.peek() is not None and self.peek()[1] in (",", ";"):  # type: ignore[index]
                self.take()

    def field_values(self) -> list[Any]:
        token = self.peek()
        colon = token is not None and token[1] == ":"
        if colon:
            self.take()
            token = self.peek()
        if token is not None and token[1] in _CLOSE:
            return [self.nested()]
        if not colon:
            where = _where(self.text, token[2]) if token else "the end"
            raise ValueError(f"expected ':' or '{{' at {where}")
        if token is not None and token[1] == "[":
            self.take()
            values: list[Any] = []
            while self.peek() is not None and self.peek()[1] != "]":  # type: ignore[index]
                values.append(self.nested() if self.peek()[1] in _CLOSE else self.scalar())  # type: ignore[index]
                if self.peek() is not None and self.peek()[1] == ",":  # type: ignore[index]
                    self.take()
            self.take("]")
            return values
        return [self.scalar()]

    def nested(self) -> list[tuple[str, Any]]:
        opening, pos = self.take()[1:]
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ValueError(
                f"messages nested deeper than the limit of {MAX_DEPTH} levels at "
                f"{_where(self.text, pos)}"
            )
        fields = self.message(_CLOSE[opening])
        self.take(_CLOSE[opening])
        self.depth -= 1
        return fields

    def scalar(self) -> Scalar:
        kind, text, pos = self.take()
        if kind == "string":
            parts = [_unescape(text[1:-1])]
            while self.peek() is not None and self.peek()[0] == "string":  # "a" "b" is "ab"
                parts.append(_unescape(self.take()[1][1:-1]))
            return Scalar("string", "".join(parts))
        if kind != "word":
            raise ValueError(f"expected a value at {_where(self.text, pos)}, found {text!r}")
        return Scalar("word", text)


def parse(text: str) -> list[tuple[str, Any]]:
    """The fields of a text-format message, in order (see the module docstring). Raises
    ValueError."""
    return _Parser(text).message(None)
