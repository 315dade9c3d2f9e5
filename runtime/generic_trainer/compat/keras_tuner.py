"""keras-tuner internals: a tuner's hooks, an oracle's methods and retry queue, the oracle client's
wait.

Assumes (keras-tuner 1.4): `BaseTuner.search` calls `self.pre_create_trial()`, then the oracle's
`create_trial`, and surrounds each trial with `self.on_trial_begin(trial)` /
`self.on_trial_end(trial)` (which calls the oracle's `end_trial`), all looked up on the object at
call time; the oracle saves itself with `self.save()`; `Oracle._retry_queue` is the list of
trial ids `create_trial` pops (from the end) to run again before new ones; a worker's
`keras_tuner.src.distribute.oracle_client.TIMEOUT` is the seconds each gRPC call to the chief waits.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from generic_trainer.compat.base import Patch, Versions

KERAS_TUNER = Versions("keras-tuner", "1.4", "1.5")


class _Wrapped(Patch):
    """Methods of one keras-tuner object replaced by `functools.partial(hook, original)` (instance
    attributes)."""

    versions = (KERAS_TUNER,)
    required = True
    kind = ""

    def __init__(self, owner: Any, **hooks: Callable[..., Any]):
        super().__init__()
        self.owner, self.hooks = owner, hooks

    def missing(self) -> list[str]:
        return [
            f"{self.kind}.{name}"
            for name in self.hooks
            if not callable(getattr(self.owner, name, None))
        ]

    def replacements(self) -> list[tuple[Any, str, Any]]:
        return [
            (self.owner, name, functools.partial(hook, getattr(self.owner, name)))
            for name, hook in self.hooks.items()
        ]


class TunerHooks(_Wrapped):
    """A tuner's hooks (`on_trial_begin`, `on_trial_end`, `pre_create_trial`) become `hook(original,
    *args)`."""

    kind = "Tuner"
    lost = (
        "trials are not logged, workers send no heartbeat and the chief does not notice a gone "
        "worker"
    )


class OracleMethods(_Wrapped):
    """An oracle's `create_trial`, `end_trial`, `save` become `hook(original, *args)`; the chief's
    gRPC servicer calls them on the oracle, so trials run by workers go through them too."""

    kind = "Oracle"
    lost = "trials are not logged or recorded, and oracle.json gets no last-good copy"


class RetryQueue(Patch):
    """The oracle's `_retry_queue` with `trial_ids` queued after what it holds: `create_trial` runs
    them again before new trials. Undone after the search (the list it had is put back)."""

    versions = (KERAS_TUNER,)
    lost = "trials a killed attempt left running are not run again"

    def __init__(self, oracle: Any, trial_ids: list[str]):
        super().__init__()
        self.oracle, self.trial_ids = oracle, trial_ids

    def missing(self) -> list[str]:
        queue = getattr(self.oracle, "_retry_queue", None)
        return [] if isinstance(queue, list) else ["Oracle._retry_queue (a list)"]

    def replacements(self) -> list[tuple[Any, str, Any]]:
        queue = self.oracle._retry_queue
        return [
            (self.oracle, "_retry_queue", queue + [t for t in self.trial_ids if t not in queue])
        ]


class ClientWait(Patch):
    """A worker's gRPC calls to the chief's oracle give up after `seconds` (keras-tuner waits an
    hour)."""

    versions = (KERAS_TUNER,)
    lost = "a worker waits an hour for an unreachable oracle"

    def __init__(self, seconds: float):
        super().__init__()
        self.seconds = max(1, int(seconds))

    def missing(self) -> list[str]:
        from keras_tuner.src.distribute import oracle_client

        return (
            []
            if isinstance(getattr(oracle_client, "TIMEOUT", None), (int, float))
            else ["oracle_client.TIMEOUT"]
        )

    def replacements(self) -> list[tuple[Any, str, Any]]:
        from keras_tuner.src.distribute import oracle_client

        return [(oracle_client, "TIMEOUT", self.seconds)]
