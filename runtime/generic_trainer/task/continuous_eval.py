"""continuous_eval: evaluate each new checkpoint another process (the trainer) writes.

A checkpoint rotated away by max_to_keep before it was read is skipped; the evaluation ends at the
checkpoint of trainer.train_steps, or when no new checkpoint came for
trainer.continuous_eval_timeout seconds (none at all is exit 2).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from generic_trainer.errors import UserInputError
from generic_trainer.task.state import TaskState

log = logging.getLogger("generic_trainer.task")


def evaluate_continuously(
    state: TaskState,
    schedule: Any,
    checkpoint_dir: str,
    poll_s: float,
    evaluate: Callable[[], object],
) -> None:
    """Evaluate each new checkpoint another process writes, until train_steps or a timeout.

    Args:
      state: the run's state, each checkpoint restored into it.
      schedule: `experiment.trainer` (train_steps, continuous_eval_timeout).
      checkpoint_dir: the directory the trainer writes its checkpoints to.
      poll_s: seconds between looks for a new checkpoint.
      evaluate: evaluates the restored state (the controller's evaluation).

    Raises:
      UserInputError: no checkpoint appeared within trainer.continuous_eval_timeout.
    """
    import tensorflow as tf

    timeout, target = schedule.continuous_eval_timeout, schedule.train_steps
    evaluated = 0
    until = f", until step {target}" if target > 0 else ""
    log.info("continuous evaluation: watching %s (timeout %d s%s)", checkpoint_dir, timeout, until)
    for path in tf.train.checkpoints_iterator(
        checkpoint_dir, min_interval_secs=poll_s, timeout=timeout
    ):
        try:
            state.checkpoint.restore(path).expect_partial()
        except (tf.errors.NotFoundError, ValueError) as e:  # rotated away by max_to_keep
            log.warning(
                "could not read %s (%s); waiting for the next checkpoint", path, type(e).__name__
            )
            continue
        step = state.step
        log.info("evaluating %s (step %d)", path, step)
        evaluate()
        evaluated += 1
        if target > 0 and step >= target:
            log.info("reached trainer.train_steps=%d: continuous evaluation done", target)
            return
    if not evaluated:
        raise UserInputError(
            "--checkpoint-dir",
            f"no checkpoint appeared in {checkpoint_dir} within "
            f"trainer.continuous_eval_timeout={timeout} s",
        )
    log.info("no new checkpoint for %d s: continuous evaluation done", timeout)
