"""The one parser of JSON and YAML a user hands the runtime, bounded in size, nesting and alias
expansion.

Every JSON or YAML text the runtime reads from a user (the executor input, custom config,
hyperparameters, TF_CONFIG, eval configs, Task config files and overrides, a checkpoint's
state) goes through `load_json` or `load_yaml`, so hostile text ends as a `UserInputError`
(exit 2) naming the input and the limit it passed, before TensorFlow loads:

- nesting deeper than `MAX_DEPTH` levels (Python's parsers, and every walk of the value after
  them, would overflow the stack: a RecursionError);
- YAML whose aliases expand to more than `MAX_NODES` values (an alias bomb: a few hundred bytes
  that become millions of values once copied, dumped or merged) or refer to themselves (a cycle);
- text longer than `MAX_TEXT_BYTES` (`read_text` reads files with that bound).

The checks run on the text, in one pass without recursion, before Python's parsers see it.
A leaf module (only errors.py); PyYAML is imported inside `load_yaml`.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping
from typing import Any

from generic_trainer.artifacts import files
from generic_trainer.errors import UserInputError

MAX_DEPTH = 100  # levels of nested objects / lists (a config needs a handful)
MAX_NODES = 100_000  # values in a YAML document once its aliases are expanded
MAX_TEXT_BYTES = 16 * 1024 * 1024  # a config, an executor input, a hyperparameters file

_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_LONE_SURROGATE = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
    r"|[\ud800-\udfff]"
)


def _too_deep(input_name: str, where: str = "") -> UserInputError:
    return UserInputError(
        input_name,
        f"{where}nested deeper than the limit of {MAX_DEPTH} levels of objects and "
        "lists; flatten it",
    )


def check_text_size(input_name: str, text: str | bytes, where: str = "") -> None:
    """UserInputError when `text` is over MAX_TEXT_BYTES."""
    size = len(text.encode("utf-8", "surrogatepass")) if isinstance(text, str) else len(text)
    if size > MAX_TEXT_BYTES:
        raise UserInputError(
            input_name,
            f"{where}is {size} bytes, over the limit of {MAX_TEXT_BYTES} bytes "
            f"({MAX_TEXT_BYTES // (1024 * 1024)} MiB)",
        )


def json_depth(text: str) -> int:
    """How deeply the objects and lists of JSON `text` nest (brackets inside strings do not
    count)."""
    depth = deepest = 0
    for match in _JSON_TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif token in "]}":
            depth -= 1
    return deepest


def load_json(
    text: str | bytes, input_name: str, where: str = "", max_depth: int = MAX_DEPTH
) -> Any:
    """Parse JSON `text` (`input_name` names it in errors, `where` prefixes the message: 'a.json:
    ')."""
    check_text_size(input_name, text, where)
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise UserInputError(
                input_name, f"{where}not UTF-8 text (byte {e.start}: {e.reason})"
            ) from None
    if json_depth(text) > max_depth:
        raise _too_deep(input_name, where)
    check_surrogates(text, input_name, where)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UserInputError(
            input_name, f"{where}not valid JSON ({e.msg} at line {e.lineno} column {e.colno})"
        ) from None
    except ValueError as e:  # an integer of more digits than Python converts (sys.int_info)
        raise _number_too_long(input_name, where, e) from None
    except (
        RecursionError
    ):  # not reached with max_depth well under the recursion limit; kept as a backstop
        raise _too_deep(input_name, where) from None


def _number_too_long(input_name: str, where: str, error: ValueError) -> UserInputError:
    return UserInputError(
        input_name,
        f"{where}holds a number Python cannot read: {str(error).split(';')[0]} (an integer may "
        f"have at most {sys.get_int_max_str_digits() or 'unlimited'} digits; give it as a string)",
    )


def check_surrogates(text: str, input_name: str, where: str = "") -> None:
    """UserInputError when `text` holds a lone surrogate (a `\\ud800` escape without its pair, or
    the
    character itself): not a Unicode character, it could be neither logged nor written as UTF-8."""
    match = _LONE_SURROGATE.search(text)
    if match:
        raise UserInputError(
            input_name,
            f"{where}holds a lone surrogate "
            f"{match.group().encode('ascii', 'backslashreplace').decode()} "
            f"at character {match.start()}: not a Unicode character (a broken \\u escape?)",
        )


def tool_text(data: bytes) -> str:
    """The output of a tool the runtime runs (nvidia-smi, ...) as text: UTF-8, undecodable bytes
    shown as U+FFFD and control characters other than newline and tab dropped, so no output can fail
    or forge a
    log line."""
    text = data.decode("utf-8", errors="replace")
    return "".join(c for c in text if c in "\n\t" or c.isprintable())


def _yaml_bounds(text: str, input_name: str, where: str) -> None:
    """Walk YAML's events (no recursion): nesting depth, values after alias expansion,
    self-reference."""
    import yaml

    sizes: dict[str, int] = {}  # anchor -> values it expands to
    stack: list[list[Any]] = [
        [None, 0]
    ]  # [anchor, values so far] of each open collection; the root first
    total = 0  # values so far, aliases expanded
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent):
            if any(frame[0] == event.anchor for frame in stack):
                raise UserInputError(
                    input_name,
                    f"{where}the alias *{event.anchor} refers to a value that holds "
                    "itself (a cycle); YAML aliases must not refer to themselves",
                )
            added = sizes.get(event.anchor, 1)
        elif isinstance(event, yaml.ScalarEvent):
            added = 1
            if event.anchor:
                sizes[event.anchor] = 1
        elif isinstance(event, yaml.CollectionStartEvent):
            stack.append([event.anchor, 0])
            if len(stack) - 1 > MAX_DEPTH:
                raise _too_deep(input_name, where)
            added = 1  # the collection itself, counted in its own frame
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, size = stack.pop()
            if anchor:
                sizes[anchor] = size
            stack[-1][1] += size
            continue
        else:
            continue
        stack[-1][1] += added
        total += added
        if total > MAX_NODES:
            raise _too_many(input_name, where)


def _too_many(input_name: str, where: str = "") -> UserInputError:
    return UserInputError(
        input_name,
        f"{where}expands to more than the limit of {MAX_NODES} values (YAML aliases "
        "repeat the value they refer to: an alias bomb?)",
    )


def load_yaml(text: str, input_name: str, where: str = "") -> Any:
    """Parse YAML (or JSON) `text` with the safe loader, within MAX_DEPTH, MAX_NODES and
    MAX_TEXT_BYTES."""
    import yaml

    check_text_size(input_name, text, where)
    check_surrogates(text, input_name, where)
    try:
        _yaml_bounds(text, input_name, where)
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        raise UserInputError(
            input_name, f"{where}not valid YAML/JSON{at}: {getattr(e, 'problem', None) or e}"
        ) from None
    except RecursionError:  # a backstop: the walk above refuses deep nesting first
        raise _too_deep(input_name, where) from None
    except ValueError as e:  # an integer of more digits than Python converts
        raise _number_too_long(input_name, where, e) from None


def read_text(path: str, input_name: str, max_bytes: int = MAX_TEXT_BYTES) -> str:
    """The UTF-8 text of the regular file `path`, read with a bound (files.read_bounded): the one
    reader of a small text file the user gives.

    Args:
        path: a local path.
        input_name: the input named in errors (a flag, or the path itself).
        max_bytes: the most bytes read.

    Returns:
        The text.

    Raises:
        UserInputError: `path` is missing, not a regular file, unreadable, over `max_bytes`, or
            not UTF-8 text, named with `input_name`.
    """
    if not os.path.exists(path):
        raise UserInputError(input_name, f"{path} does not exist")
    try:
        data = files.read_bounded(path, max_bytes)
    except files.UnreadableFile as e:
        raise UserInputError(input_name, str(e)) from None
    except OSError as e:
        raise UserInputError(input_name, f"{path} cannot be read: {e.strerror or e}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserInputError(
            input_name, f"{path} is not UTF-8 text (byte {e.start}: {e.reason})"
        ) from None


def check_depth(value: Any, input_name: str, max_depth: int = MAX_DEPTH) -> Any:
    """`value` (already parsed: a mapping passed through) when it nests at most `max_depth`
    levels."""
    pending, visited = [(value, 0)], 0
    while pending:
        item, depth = pending.pop()
        visited += 1
        if visited > MAX_NODES:
            raise _too_many(input_name)
        if isinstance(item, (Mapping, list, tuple)):
            if depth + 1 > max_depth:
                raise _too_deep(input_name)
            children = item.values() if isinstance(item, Mapping) else item
            pending.extend((child, depth + 1) for child in children)
    return value
