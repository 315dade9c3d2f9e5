"""The run_fn backup's `state.json`: what a saved checkpoint says about where training stood,
checked.

`checkpointing.py`'s `BackupAndRestore` writes a state with each checkpoint of
`<checkpoint_dir>/backup` (`{"prefix", "global_step", "epoch", "step_in_epoch", "fit_index",
"settings", "fit", "previous"}`; `previous`: the state of the checkpoint before it, kept too, to
fall back to when the newest one is damaged). This module reads it (a damaged file is
`DamagedState`, not a crash blamed on user code), says why a state cannot be resumed from
(`state_problem`: a truncated or hand-edited state.json, a negative step, a prefix that is not this
backup's own checkpoint file), and compares a backup's settings with the run's. No TensorFlow here.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from generic_trainer.fit.checkpoint_files import DamagedState, read_json  # noqa: F401 (DamagedState: read_state's)

BACKUP_SUBDIR = "backup"
STATE_FILE = "state.json"
CHECKPOINT_NAME = "ckpt"
MAX_STEP = 2**63 - 1


def backup_dir(checkpoint_dir: str) -> str:
    return os.path.join(checkpoint_dir, BACKUP_SUBDIR)


def read_state(checkpoint_dir: str) -> dict[str, Any] | None:
    """The latest saved state in `checkpoint_dir`, or None; DamagedState when state.json cannot be
    read."""
    return read_json(os.path.join(backup_dir(checkpoint_dir), STATE_FILE))


def previous_states(checkpoint_dir: str) -> list[dict[str, Any]]:
    """What a new state's `previous` holds: the state saved last (without its own `previous`), if
    readable."""
    try:
        last = read_state(checkpoint_dir)
    except DamagedState:
        return []
    return [{k: v for k, v in last.items() if k != "previous"}] if last else []


def _whole(state: dict[str, Any], key: str, default: Any = None) -> str | None:
    value = state.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_STEP:
        return f"{key} is {value!r}, expected a whole number >= 0"
    return None


def state_problem(
    state: Any, directory: str, epochs: int | None = None, steps: int | None = None
) -> str | None:
    """Why `state` cannot be resumed from (None: it can): its fields, its checkpoint's files in
    `directory`,
    and, when known, the fit's `epochs` and `steps` per epoch (a state past them would train
    nothing)."""
    if not isinstance(state, dict):
        return f"it holds a {type(state).__name__}, expected an object"
    problem = (
        _whole(state, "global_step")
        or _whole(state, "epoch")
        or _whole(state, "step_in_epoch")
        or _whole(state, "fit_index", 0)
    )
    if problem:
        return problem
    prefix = state.get("prefix")
    if prefix != f"{CHECKPOINT_NAME}-{state['global_step']}":
        return (
            f"prefix is {prefix!r}, expected {CHECKPOINT_NAME}-{state['global_step']} (the "
            "checkpoint of its "
            "global_step, a file in the backup dir)"
        )
    if not os.path.isfile(os.path.join(directory, prefix + ".index")):
        return f"its checkpoint {os.path.join(directory, prefix)}.index is missing"
    if epochs is not None and (
        state["epoch"] > epochs or (state["epoch"] == epochs and state["step_in_epoch"])
    ):
        return (
            f"epoch {state['epoch']} step {state['step_in_epoch']} is past the fit's {epochs} "
            "epochs"
        )
    if steps is not None and state["step_in_epoch"] > steps:
        return f"step_in_epoch {state['step_in_epoch']} is past the fit's {steps} steps per epoch"
    return None


def run_settings(
    train_steps: int | None, hyperparameters: Any, module_file: str | None
) -> dict[str, Any]:
    """The settings of a run a backup must share to be resumed (values that may be secret are
    hashed).

    Custom config is not among them: it also carries run-specific values (output paths, ids) that a
    restarted attempt may be given anew, and what the model is made of shows in the fit's signature.
    """
    module_hash = None
    if module_file and os.path.isfile(module_file):
        with open(module_file, "rb") as f:
            module_hash = hashlib.sha256(f.read()).hexdigest()[:16]
    return {
        "train_steps": train_steps,
        "hyperparameters": digest(hyperparameters),
        "module": module_hash,
    }


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def differences(saved: dict[str, Any] | None, current: dict[str, Any] | None) -> list[str]:
    """What differs between two settings dicts, readable ('train_steps 3000 -> 20', 'module
    changed')."""
    if not isinstance(saved, dict) or not current:
        return []  # a backup of an earlier version, or a caller that gives none: not compared
    out = []
    for key in sorted(set(saved) | set(current)):
        old, new = saved.get(key), current.get(key)
        if old != new:
            shown = isinstance(old, (int, float, type(None))) and isinstance(
                new, (int, float, type(None))
            )
            out.append(f"{key} {old} -> {new}" if shown else f"{key} changed")
    return out


def position(epoch: int, step_in_epoch: int) -> str:
    """'after epoch 2' or 'epoch 3 step 4' (1-based epochs, as Keras logs them)."""
    return f"epoch {epoch + 1} step {step_in_epoch}" if step_in_epoch else f"after epoch {epoch}"
