"""User-given text shown in the runtime's log lines: control characters escaped, so no path, name or
value can start a line that looks like the runtime's own (`--model-dir 'm\n2026-... ERROR ...'`).

`shown` escapes one string (`\\n`, `\\r`, `\\t`, `\\x1b`, `\\u2028`, ...); `EscapingFilter`, on the
log handlers (cli.py), applies it to every string and path argument of the runtime's own records
(logger `generic_trainer`) and exceptions, and `errors.UserInputError` to its message. A floor
module: standard library only.
"""

from __future__ import annotations

import logging
import os
import re

RUNTIME_LOGGER = "generic_trainer"
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"


def shown(text: str) -> str:
    """`text` with every control character (and Unicode line separators and direction overrides)
    written as its escape: one line, as it would read in a log."""
    return _CONTROL.sub(_escape, text)


class EscapingFilter(logging.Filter):
    """Escapes the string and path arguments of the runtime's own log records (`shown`); the format
    string is the runtime's and stays as written, and so do exceptions marked `multiline` (a
    user-code
    error carries the traceback of the user's code)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.split(".")[0] != RUNTIME_LOGGER or not record.args:
            return True
        if isinstance(record.args, tuple):
            record.args = tuple(_shown_arg(a) for a in record.args)
        return True


def _shown_arg(arg: object) -> object:
    if isinstance(arg, str):
        return shown(arg)
    if isinstance(arg, BaseException) and not getattr(arg, "multiline", False):
        return shown(str(arg))  # an OSError naming a path; not a user-code error and its traceback
    if isinstance(arg, os.PathLike):
        return shown(os.fspath(arg)) if isinstance(os.fspath(arg), str) else arg
    return arg
