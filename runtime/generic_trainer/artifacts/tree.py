"""Walking a directory tree the user gave (a model to push, to copy): iterative and bounded.

`walk` never recurses (a tree thousands of directories deep is refused with a message, not a
RecursionError) and stops at a bound of depth and entries; it lists directories and regular files
only, and refuses anything else (a symlink, which would reach outside the tree; a FIFO or device,
which would block or never end), naming the path and what it is (files.describe).
`fingerprint` and `changed` tell whether files changed while they were copied.
"""

from __future__ import annotations

import dataclasses
import os
import stat
from collections.abc import Callable
from typing import Any

from generic_trainer.artifacts import files
from generic_trainer.errors import UserInputError

MAX_DEPTH = 64  # directories below the root; a SavedModel uses 2
MAX_ENTRIES = 200_000  # files and directories; a large SavedModel holds a few thousand


@dataclasses.dataclass
class Tree:
    """A tree's directories and regular files, relative to its root, parents before children."""

    dirs: list[str]
    files: list[str]
    skipped: list[str] = dataclasses.field(default_factory=list)  # lenient walks: left out


def walk(
    root: str,
    input_name: str,
    max_depth: int = MAX_DEPTH,
    max_entries: int = MAX_ENTRIES,
    lenient: bool = False,
) -> Tree:
    """The directories and regular files under `root`, sorted per directory.

    UserInputError naming `input_name` for an entry that is neither, a tree deeper than `max_depth`
    directories or holding more than `max_entries` entries, or an entry that cannot be read.
    `lenient` (a view of a run's own logs, never a reason to fail it): such entries, and what lies
    beyond the bounds, are left out and listed in `skipped` instead.
    """
    tree = Tree([], [])
    pending = [("", 0)]

    def attempt(where: str, check: Callable[..., Any], *args: Any) -> Any:
        try:
            return check(*args)
        except UserInputError:
            if not lenient:
                raise
            tree.skipped.append(where)
            return None

    while pending:
        rel, depth = pending.pop()
        room = max_entries - len(tree.dirs) - len(tree.files)
        names = attempt(rel or ".", _names, root, rel, input_name, (room, max_entries)) or []
        subdirs = []
        for name in names:
            child = os.path.join(rel, name) if rel else name
            too_deep = max_depth if depth >= max_depth else None
            kind = attempt(child, _kind, root, child, input_name, too_deep)
            if kind == "dir":
                tree.dirs.append(child)
                subdirs.append((child, depth + 1))
            elif kind == "file":
                tree.files.append(child)
        pending.extend(reversed(subdirs))
    return tree


def _names(root: str, rel: str, input_name: str, room: tuple[int, int]) -> list[str]:
    """The sorted names in `<root>/<rel>`; UserInputError when unreadable or more than the room
    left (`room`: entries left, the bound)."""
    path = os.path.join(root, rel) if rel else root
    try:
        names = sorted(os.listdir(path))
    except OSError as e:
        raise UserInputError(input_name, f"{path} cannot be read: {e.strerror or e}") from None
    if len(names) > room[0]:
        raise UserInputError(input_name, f"{root} holds more than {room[1]:,} entries; refused")
    return names


def _kind(root: str, rel: str, input_name: str, too_deep: int | None) -> str:
    """The kind of `<root>/<rel>`, "dir" or "file"; UserInputError for anything else, saying what
    it is, and for a directory below the depth bound (`too_deep`: the bound, when `rel` is at
    it)."""
    path = os.path.join(root, rel)
    try:
        mode = os.lstat(path).st_mode
    except OSError as e:
        raise UserInputError(input_name, f"{path} cannot be read: {e.strerror or e}") from None
    if stat.S_ISDIR(mode) and too_deep is not None:
        raise UserInputError(
            input_name,
            f"{root} nests directories deeper than {too_deep} levels (at {path[:300]}...); refused",
        )
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    raise UserInputError(
        input_name,
        f"{path} is {files.describe(path)}; only directories and regular files are copied",
    )


# (inode, size, modification time in ns) of a file: what changes when it is rewritten or replaced.
Stamp = tuple[int, int, int]


def fingerprint(root: str, rel_files: list[str]) -> dict[str, Stamp | None]:
    """Each file's stamp (None: gone), to compare after reading them (`changed`)."""
    stamps: dict[str, Stamp | None] = {}
    for rel in rel_files:
        try:
            st = os.lstat(os.path.join(root, rel))
            stamps[rel] = (st.st_ino, st.st_size, st.st_mtime_ns)
        except OSError:
            stamps[rel] = None
    return stamps


def changed(root: str, before: dict[str, Stamp | None]) -> list[str]:
    """The files of `before` whose stamp differs now (rewritten, replaced or removed)."""
    now = fingerprint(root, list(before))
    return [rel for rel in before if now[rel] != before[rel]]
