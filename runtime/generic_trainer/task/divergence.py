"""A loss blow-up in a Task run: restore the last checkpoint and train again, or stop.

Model Garden's rule: a NaN/inf loss, or one above `trainer.loss_upper_bound` once the run passed
`trainer.recovery_begin_steps`, restores the latest checkpoint, at most
`trainer.recovery_max_trials` times; then the run stops (exit 3) saying what to change.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from generic_trainer.errors import UserCodeError
from generic_trainer.task.state import TaskState

log = logging.getLogger("generic_trainer.task")


class Recovery:
    """The loss check after each inner loop, and the recoveries made so far.

    Args:
      state: the run's state (its checkpoint is restored on a recovery).
      schedule: `experiment.trainer` (the bounds and the number of recoveries allowed).
      checkpoint_dir: the chief's checkpoint dir, read by every worker.
    """

    def __init__(self, state: TaskState, schedule: Any, checkpoint_dir: str):
        self.state, self.schedule, self.checkpoint_dir = state, schedule, checkpoint_dir
        self.count = 0  # loss blow-ups recovered from

    def recovered(self, loss: float, step: int, steps: int) -> bool:
        """Check the mean loss of the last loop.

        Args:
          loss: the mean training loss of the loop that ended at `step`.
          step: the global step after the loop.
          steps: the steps the loop ran.

        Returns:
          True when the last checkpoint was restored (train again from there); False when the
          loss is fine.

        Raises:
          UserCodeError: the run diverged more than trainer.recovery_max_trials times.
        """
        import tensorflow as tf

        t = self.schedule
        if math.isfinite(loss) and (loss <= t.loss_upper_bound or step < t.recovery_begin_steps):
            return False
        latest = tf.train.latest_checkpoint(self.checkpoint_dir)
        bound = (
            f" (above trainer.loss_upper_bound={t.loss_upper_bound:g})"
            if math.isfinite(loss)
            else ""
        )
        if self.count < t.recovery_max_trials and latest:
            self.count += 1
            self.state.checkpoint.restore(latest).assert_existing_objects_matched()
            log.warning(
                "training loss is %s at step %d%s: restored %s (step %d) and training again "
                "(recovery %d of trainer.recovery_max_trials=%d)",
                loss,
                step,
                bound,
                latest,
                self.state.step,
                self.count,
                t.recovery_max_trials,
            )
            return True
        raise self._diverged(loss, step, steps, bound, latest)

    def _diverged(
        self, loss: float, step: int, steps: int, bound: str, latest: str | None
    ) -> UserCodeError:
        """The error that stops a run whose loss blew up with no recovery left."""
        t = self.schedule
        tried = (
            f" after {self.count} recoveries (trainer.recovery_max_trials={t.recovery_max_trials})"
            if t.recovery_max_trials
            else ""
        )
        return UserCodeError(
            f"training loss is {loss} at step {step} (mean of steps {step - steps + 1}-{step}): "
            f"the run diverged{bound}{tried}. Lower the learning rate "
            "(trainer.optimizer_config.learning_rate), clip gradients "
            "(trainer.optimizer_config.optimizer.<type>.global_clipnorm), allow recoveries "
            "(trainer.recovery_max_trials), or check the inputs for NaN/inf. "
            f"Nothing was saved for these steps; the last checkpoint is {latest or 'none'}."
        )
