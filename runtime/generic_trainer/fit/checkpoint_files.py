"""TensorFlow checkpoint files on disk, for both checkpoint owners of the runtime.

A `tf.train.Checkpoint` written as `<dir>/<name>-<step>` is the files `<name>-<step>.index` and
`<name>-<step>.data-*`, complete once the `.index` exists; a JSON file beside it (the run_fn
backup's `state.json`, the best-checkpoint exporter's `info.json`) says which one counts. This
module lists those checkpoints, removes the ones no longer kept, and reads the JSON beside them.
Its users: `checkpointing.py` (the run_fn path's backup) and `task/checkpoints.py` (the Task
path's best-checkpoint export and warm starts). No TensorFlow here.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any

from generic_trainer.artifacts import bounded_parse
from generic_trainer.errors import UserInputError


def _files(directory: str, name: str) -> list[tuple[str, int, str]]:
    """(file name, step, prefix) of every `<name>-<step>.*` file in `directory`."""
    pattern = re.compile(rf"^({re.escape(name)}-(\d+))\.")
    out = []
    for f in os.listdir(directory) if os.path.isdir(directory) else []:
        match = pattern.match(f)
        if match:
            out.append((f, int(match.group(2)), match.group(1)))
    return out


def checkpoint_steps(directory: str, name: str) -> list[int]:
    """The steps of the complete checkpoints `<name>-<step>` (an `.index` file exists) in
    `directory`, sorted."""
    return sorted({step for f, step, _ in _files(directory, name) if f.endswith(".index")})


def remove_checkpoints(directory: str, name: str, keep: Iterable[str]) -> None:
    """Remove the files of every checkpoint `<name>-<step>` in `directory` whose prefix is not in
    `keep`.

    Best effort: a file that cannot be removed (gone meanwhile, a directory) is left.
    """
    kept = {os.path.basename(k) for k in keep}
    for f, _, prefix in _files(directory, name):
        if prefix not in kept:
            try:
                os.remove(os.path.join(directory, f))
            except OSError:
                pass


class DamagedState(ValueError):
    """A checkpoint's JSON file that cannot be read: truncated, not JSON, not an object, too large
    or deep."""


MAX_STATE_BYTES = 1024 * 1024


def read_json(path: str) -> dict[str, Any] | None:
    """The JSON object in `path`, or None when there is no such file; DamagedState (naming it) when
    it is not one."""
    if not os.path.lexists(path):
        return None
    try:
        value = bounded_parse.load_json(bounded_parse.read_text(path, path, MAX_STATE_BYTES), path)
    except UserInputError as e:
        raise DamagedState(str(e)) from None
    if not isinstance(value, dict):
        raise DamagedState(f"{path}: holds a {type(value).__name__}, expected a JSON object")
    return value
