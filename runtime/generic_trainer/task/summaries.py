"""A Task run's TensorBoard summaries: one writer per name (train/, validation/), chief only."""

from __future__ import annotations

import os
from typing import Any


class Summaries:
    """Scalar summaries under `summary_dir/<name>`; nothing is written when `enabled` is False.

    Args:
      summary_dir: the run's summary directory (None: no summaries).
      enabled: whether this worker writes them (the chief).
    """

    def __init__(self, summary_dir: str | None, enabled: bool):
        self.summary_dir = summary_dir if enabled else None
        self._writers: dict[str, Any] = {}

    def write(self, name: str, logs: dict[str, float], step: int) -> None:
        """Write `logs` as scalars at `step` under `name`, and flush them."""
        if not self.summary_dir:
            return
        import tensorflow as tf

        if name not in self._writers:
            self._writers[name] = tf.summary.create_file_writer(
                os.path.join(self.summary_dir, name)
            )
        writer = self._writers[name]
        with writer.as_default(step=step):
            for k, v in logs.items():
                tf.summary.scalar(k, v)
        writer.flush()

    def close(self) -> None:
        """Close the writers."""
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()
