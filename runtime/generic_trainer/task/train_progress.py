"""The progress lines of a Task run's training: step, percent, steps/s, ETA, the loop's logs.

A line after the first loop, after the last, and at most `interval_s` apart in between. The rate
counts the loops after the first one (which includes tracing).
"""

from __future__ import annotations

import logging
import time

from generic_trainer.fit.progress import fmt_eta
from generic_trainer.task.state import format_logs

progress_log = logging.getLogger("generic_trainer.progress")


class TrainProgress:
    """Logs training progress loop by loop.

    Args:
      start: the global step training starts from.
      target: the step it trains to.
      interval_s: at most this many seconds between lines.
    """

    def __init__(self, start: int, target: int, interval_s: float):
        self.start, self.target, self.interval_s = start, target, interval_s
        self.last_log = 0.0
        self.rate_start: tuple[int, float] | None = None
        self.rate = 0.0

    def loop_done(self, steps: int, step: int, loop_start: float, logs: dict[str, float]) -> None:
        """Count a finished inner loop and log a line when one is due.

        Args:
          steps: the steps the loop ran.
          step: the global step after it.
          loop_start: `time.monotonic()` when it started.
          logs: its logs.
        """
        now = time.monotonic()
        if self.rate_start is None:
            self.rate = steps / max(now - loop_start, 1e-9)
            self.rate_start = (step, now)
        elif step > self.rate_start[0]:
            self.rate = (step - self.rate_start[0]) / max(now - self.rate_start[1], 1e-9)
        due = now - self.last_log >= self.interval_s
        if step >= self.target or step == self.start + steps or due:
            self.last_log = now
            eta = fmt_eta((self.target - step) / max(self.rate, 1e-9))
            progress_log.info(
                "step %d/%d (%.0f%%)  %.1f steps/s  ETA %s  %s",
                step,
                self.target,
                100.0 * step / self.target,
                self.rate,
                eta,
                format_logs(logs),
            )
