"""When a backup callback saves, and how several workers agree on it.

`SaveSchedule` is the timing half of `checkpointing.BackupCallback` (a mixin: it uses the
callback's strategy, its save settings and counters). The chief saves every `save_every_steps`
steps and every `save_interval_s` seconds; on several workers the replicas agree (one small
all-reduce) whether any got SIGTERM and whether a save is due, about every AGREE_EVERY_S: the
chief sets the number of steps to the next agreement from its step time, so fast steps do not
each pay for one.
"""

from __future__ import annotations

import time

AGREE_EVERY_S = 1.0
MAX_AGREE_INTERVAL = 1000


class SaveSchedule:
    """When to save (see the module docstring)."""

    def _periodic_save_due(self) -> bool:
        if not self.is_chief:
            return False  # the chief decides; _agree tells the others
        if self.save_every_steps:
            last = (
                self._last_saved_step
                if self._last_saved_step is not None
                else (self.resumed_from or 0)
            )
            if self._global_step() - last >= self.save_every_steps:
                return True
        return (
            self.save_interval_s is not None
            and time.monotonic() - self._last_save >= self.save_interval_s
        )

    def _agree_interval(self) -> int:
        """Steps to the next agreement: about AGREE_EVERY_S at the chief's recent step rate."""
        now, steps = time.monotonic(), self.steps_this_run - self._last_agree_step
        elapsed = now - self._last_agree_time
        self._last_agree_time, self._last_agree_step = now, self.steps_this_run
        if not self.multi_worker or steps <= 0 or elapsed <= 0:
            return 1
        return int(min(MAX_AGREE_INTERVAL, max(1.0, AGREE_EVERY_S * steps / elapsed)))

    def _agree(self, preempt: bool, due: bool, interval: int = 0) -> tuple[bool, bool, int]:
        """Whether any worker got SIGTERM, whether the chief wants a save, and the chief's next
        interval: the same answers on every worker (each worker calls this at the same steps)."""
        if not self.multi_worker:
            return preempt, due, interval
        import tensorflow as tf

        flags = self.strategy.reduce(
            "SUM", tf.constant([float(preempt), float(due), float(interval)]), axis=None
        ).numpy()
        return bool(flags[0]), bool(flags[1]), int(round(float(flags[2])))
