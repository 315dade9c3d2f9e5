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


# absl's C++ logging writes every line to stderr until absl::InitializeLog() is called, whatever
# TF_CPP_MIN_LOG_LEVEL says (abseil-cpp#1718, #1957), and TensorFlow 2.21 logs its start-up lines
# before that: "oneDNN custom operations are on", "Could not find cuda drivers", each twice. Such
# lines carry absl's pre-initialisation stamp, `I0000 00:00:<epoch seconds>`: only they are matched
# (Python's absl logging and TensorFlow's later lines carry the date).
_ABSL_PREINIT = (
    rb"^WARNING: All log messages before absl::InitializeLog\(\) is called are written to "
    rb"STDERR\r?\n"
)
_ABSL_LINE = rb"^[%s]0000 00:00:\d+\.\d+ +\d+ [^\s\]]+:\d+\] [^\n]*\n"


def native_log_below(min_level: str | None) -> re.Pattern[bytes] | None:
    """The lines of absl's C++ log that TF_CPP_MIN_LOG_LEVEL asks to hide (absl prints them
    anyway before its initialisation): INFO at 1, WARNING too at 2, ERROR too at 3.

    Args:
      min_level: TF_CPP_MIN_LOG_LEVEL's value (None or not a number: 0).

    Returns:
      A pattern of whole lines to drop, or None when nothing is hidden.
    """
    try:
        level = min(int(min_level or 0), 3)
    except ValueError:
        return None
    if level <= 0:
        return None
    severities = b"IWE"[:level]
    return re.compile(_ABSL_PREINIT + b"|" + _ABSL_LINE % severities, re.MULTILINE)
