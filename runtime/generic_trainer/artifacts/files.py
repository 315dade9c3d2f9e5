"""Small files the runtime reads and writes itself: bounded reads, atomic writes, strict JSON.

Every small file the runtime reads (hyperparameters, schemas, executor input, module files, lock
files) goes through `read_bounded` (as text: `bounded_parse.read_text`): a file that is not a
regular file (a FIFO would block for ever, `/dev/zero` never ends) or is larger than the limit is
refused, naming the file and the limit. `write_file_atomic` replaces only a regular file (never a
device, FIFO or socket, nor what a symlink points to) and removes its temporary file when the
write fails (a full disk: exit 4).
`dumps_strict` writes JSON that any parser reads: NaN and infinities become null, with a warning.
"""

from __future__ import annotations

import json
import logging
import math
import os
import stat
import uuid
from collections.abc import Mapping
from typing import Any

from generic_trainer.errors import OutputError

log = logging.getLogger(__name__)

MAX_SMALL_FILE = (
    64 * 1024 * 1024
)  # bytes: no configuration, module or schema file of a run comes near it

_KINDS = (
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
    (stat.S_ISFIFO, "FIFO (named pipe)"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISDIR, "directory"),
)


class UnreadableFile(ValueError):
    """A file the runtime will not read: not a regular file, or larger than its limit."""


class OutputWriteError(OutputError, OSError):
    """An output file that could not be written (exit 4); an OSError too, for callers that catch
    those."""

    def __init__(self, path: str, reason: str):
        self.path, self.reason = path, reason
        super().__init__(f"could not write {path}: {reason}")


MISSING = "missing"
REGULAR = "regular file"
DIRECTORY = "directory"


def classify(path: str) -> str:
    """What is at `path`, following symlinks, decided once from one `stat`: REGULAR, DIRECTORY,
    "FIFO (named pipe)", "character device", "block device", "socket", or MISSING (nothing there, or
    a symlink whose target is missing)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return MISSING
    if stat.S_ISREG(mode):
        return REGULAR
    return next((name for test, name in _KINDS if test(mode)), "special file")


def describe(path: str) -> str:
    """`path`'s kind as a message says it: "a regular file", "a FIFO (named pipe)", "a symlink to
    /x (a directory)", "a dangling symlink to /x", "missing (nothing there)"."""
    kind = classify(path)
    if os.path.islink(path):
        target = os.path.realpath(path)
        if kind == MISSING:
            return f"a dangling symlink to {target}"
        return f"a symlink to {target} ({_article(kind)})"
    return "missing (nothing there)" if kind == MISSING else _article(kind)


def _article(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def special_kind(path: str) -> str | None:
    """What `path` is when it exists and is not a regular file ("FIFO (named pipe)", ...; through
    symlinks),
    else None (a regular file, or nothing there)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    kind = next((name for test, name in _KINDS if test(mode)), "special file")
    if os.path.islink(path):
        return f"{kind} (it is a symlink to {os.path.realpath(path)})"
    return kind


def not_replaceable(path: str) -> str | None:
    """Why an output file at `path` must not be replaced (it exists and is not a regular file), or
    None."""
    kind = special_kind(path)
    if kind is None:
        return None
    return f"{path} is a {kind}, not a regular file; an output file replaces only a regular file"


def read_bounded(path: str, limit: int | None = None) -> bytes:
    """The bytes of the regular file `path` (the one bounded reader; as text:
    bounded_parse.read_text).

    Raises:
        UnreadableFile: "<path> is a <kind>, not a regular file" or "<path> is over the limit of
            <limit> bytes" (MAX_SMALL_FILE by default).
        OSError: as reading it would raise.
    """
    limit = MAX_SMALL_FILE if limit is None else limit
    kind = special_kind(path)
    if kind is not None:
        raise UnreadableFile(f"{path} is a {kind}, not a regular file")
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise UnreadableFile(f"{path} is over the limit of {limit} bytes")
    return data


def inside(path: str, folder: str) -> bool:
    """Whether `path` is `folder` or lies under it, by the names as given (no links followed).

    Args:
      path: the path that may lie inside.
      folder: the folder.

    Returns:
      True when `path` is `folder` or under it.
    """
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def listdir(path: str) -> list[str]:
    """The names in the directory `path`; none when it is missing or unreadable."""
    try:
        return os.listdir(path)
    except OSError:
        return []


def write_file_atomic(path: str, text: str) -> None:
    """Write `text` to `path` through a temporary sibling and a rename (only over a regular file).

    OutputWriteError (exit 4) naming `path` when it is not a regular file or the write fails (a full
    disk, a read-only file system); the temporary file is removed then.
    """
    problem = not_replaceable(path)
    if problem:
        raise OutputWriteError(path, problem)
    tmp = f"{path}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(tmp, "x", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise OutputWriteError(path, e.strerror or str(e)) from e


def finite(value: Any, what: str, name: str = "") -> Any:
    """`value` with every NaN or infinite float replaced by None, a warning naming each (`what` and
    its key)."""
    if isinstance(value, float) and not math.isfinite(value):
        log.warning(
            "%s %s is %s: written as null (JSON has no NaN or infinity)",
            what,
            name or "value",
            value,
        )
        return None
    if isinstance(value, Mapping):
        return {k: finite(v, what, f"{name}.{k}" if name else str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v, what, f"{name}[{i}]") for i, v in enumerate(value)]
    return value


def dumps_strict(value: Any, what: str, **kwargs: Any) -> str:
    """`json.dumps` that never writes NaN / Infinity (`finite`): what KFP's launcher and any JSON
    parser read."""
    return json.dumps(finite(value, what), allow_nan=False, **kwargs)
