"""keras-tuner internals: a tuner's trial hooks, an oracle's retry queue, the oracle client's wait.

Assumes (keras-tuner 1.4): `BaseTuner.run_trial` is surrounded by `self.on_trial_begin(trial)` /
`self.on_trial_end(trial)` looked up on the tuner at call time; `Oracle._retry_queue` is the list of
trial ids `create_trial` pops (from the end) to run again before new ones; a worker's
`keras_tuner.src.distribute.oracle_client.TIMEOUT` is the seconds each gRPC call to the chief waits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from generic_trainer.compat.base import Patch, Versions, log

KERAS_TUNER = Versions("keras-tuner", "1.4", "1.5")


class TrialHooks(Patch):
    """`tuner.on_trial_begin` / `on_trial_end` become `begin(trial, original)` / `end(trial, original)`."""

    versions = (KERAS_TUNER,)
    lost = "a worker's trials are not logged and send no heartbeat (the chief may drop a slow worker)"
    required = True

    def __init__(self, tuner: Any, begin: Callable[[Any, Callable], Any], end: Callable[[Any, Callable], Any]):
        super().__init__()
        self.tuner, self.begin, self.end = tuner, begin, end

    def missing(self) -> list[str]:
        return [f"Tuner.{name}" for name in ("on_trial_begin", "on_trial_end")
                if not callable(getattr(self.tuner, name, None))]

    def replacements(self) -> list[tuple[Any, str, Any]]:
        on_begin, on_end = self.tuner.on_trial_begin, self.tuner.on_trial_end
        return [(self.tuner, "on_trial_begin", lambda trial: self.begin(trial, on_begin)),
                (self.tuner, "on_trial_end", lambda trial: self.end(trial, on_end))]


def retry_queue(oracle: Any) -> list[str]:
    """The oracle's queue of trial ids to run again (the list itself: appending queues one). Without one
    (another keras-tuner): a warning and a list nobody reads."""
    queue = getattr(oracle, "_retry_queue", None)
    if isinstance(queue, list):
        return queue
    log.warning("keras-tuner %s has no Oracle._retry_queue list (written for %s): trials a killed attempt left "
                "running are not run again", KERAS_TUNER.installed(), KERAS_TUNER)
    return []


class ClientWait(Patch):
    """A worker's gRPC calls to the chief's oracle give up after `seconds` (keras-tuner waits an hour)."""

    versions = (KERAS_TUNER,)
    lost = "a worker waits an hour for an unreachable oracle"

    def __init__(self, seconds: float):
        super().__init__()
        self.seconds = max(1, int(seconds))

    def missing(self) -> list[str]:
        from keras_tuner.src.distribute import oracle_client

        return [] if isinstance(getattr(oracle_client, "TIMEOUT", None), (int, float)) else ["oracle_client.TIMEOUT"]

    def replacements(self) -> list[tuple[Any, str, Any]]:
        from keras_tuner.src.distribute import oracle_client

        return [(oracle_client, "TIMEOUT", self.seconds)]
