"""Where a Task run starts: its newest readable checkpoint, else `Task.initialize`.

The checkpoints are those on disk (`ckpt-<step>.index` in the checkpoint dir, never a path the
`checkpoint` state file names); a damaged one (truncated, garbled) is skipped with a warning naming
it and the one before it restored; none readable is exit 2 naming them, and another model's
checkpoint is exit 2 too. Every worker restores the chief's checkpoints.
"""

from __future__ import annotations

import logging
import os

from generic_trainer.errors import UserInputError
from generic_trainer.fit.checkpoint_files import checkpoint_steps
from generic_trainer.task.state import TaskState

log = logging.getLogger("generic_trainer.task")


def restore_run(state: TaskState, checkpoint_dir: str) -> str | None:
    """Restore the run's newest readable checkpoint into `state`, else call Task.initialize.

    Args:
      state: the run's state; its EMA starts from what was restored.
      checkpoint_dir: the run's (the chief's) checkpoint dir.

    Returns:
      The checkpoint restored, or None when the run starts afresh.

    Raises:
      UserInputError: checkpoints are there but none can be restored, or one of another model.
    """
    damaged = []
    for step in reversed(checkpoint_steps(checkpoint_dir, "ckpt")):
        path = os.path.join(checkpoint_dir, f"ckpt-{step}")
        problem = _read_checkpoint(state, path)
        if problem:
            log.warning(
                "checkpoint %s cannot be restored (%s); trying the one before it", path, problem
            )
            damaged.append(f"{path}: {problem}")
            continue
        log.info("restored checkpoint %s (step %d)", path, state.step)
        state.start_ema()
        return path
    if damaged:
        raise UserInputError(
            "--checkpoint-dir",
            f"no checkpoint in {checkpoint_dir} can be restored ("
            + "; ".join(damaged)[:1500]
            + "); move them away to start afresh",
        )
    if state.task.params.init_checkpoint:
        log.info(
            "no checkpoint in %s: initializing from task.init_checkpoint %s",
            checkpoint_dir,
            state.task.params.init_checkpoint,
        )
    state.call("initialize", state.task.initialize, state.model)
    state.start_ema()
    return None


def _read_checkpoint(state: TaskState, path: str) -> str | None:
    """Restore `path` into `state`; why it cannot be (a damaged file), or None.

    Raises:
      UserInputError: `path` is another model's checkpoint.
    """
    try:
        status = state.checkpoint.restore(path)
        if state.training:
            status.assert_existing_objects_matched()
        else:
            status.expect_partial()
    except AssertionError as e:
        raise UserInputError(
            "--checkpoint-dir",
            f"{path} does not match this model and optimizer (use a fresh checkpoint dir for a "
            f"changed model): {str(e)[:400]}",
        ) from None
    except Exception as e:  # DataLossError, NotFoundError, IndexError: a damaged file
        return f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
    return None
