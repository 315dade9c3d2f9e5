"""Backup and restore for `model.fit` that knows the chief: `fn_args.backup_and_restore` (run_fn
path).

What this module owns: the checkpoints of a user's own `fit` (the run_fn path), kept in
`<checkpoint_dir>/backup` only to resume an interrupted run and deleted once its outputs are
published. The Task path's checkpoints are not here: the Task controller saves the run's own
checkpoints (`task/controller.py`) and `task/checkpoints.py` owns warm starts and the
best-checkpoint export. Listing and removing checkpoint files is shared (`checkpoint_files.py`).

Put the callback in `model.fit(callbacks=[...])` (Keras 3 or tf_keras). It saves the training
state (the model's weights, trainable or not, and the optimizer's variables, with the global step)
at every epoch end, every `save_interval_s` seconds, every `save_every_steps` steps when set, and
when SIGTERM arrives (then it raises `Preempted`: exit code 143). Every worker saves at the same
step (reading some variables is collective), but only the chief writes into
`<checkpoint_dir>/backup`; the other workers write into private directories that are removed.
When `fit` starts and a backup exists, every worker restores the chief's and training continues
at the step where it was saved: completed epochs are skipped, and so are the completed steps of
the epoch it was in (tf_keras skips them itself; on Keras 3 those steps run no computation).
Where fit starts and the skipped steps are `compat.keras_resume`'s patches of Keras' internals,
applied through `compat.patched` (their version checks) and undone when the fit ends: at
`on_train_end`, or, when `fit` raises, by `end_fit` (the runtime's `Model.fit` wrapper,
`fit_hooks.py`, calls it in a `finally`), so a failed fit leaves the user's model unpatched.

Its files (layout, save, restore, set aside) are `backup_files.py`'s; when to save, and how
several workers agree on it, `backup_schedule.py`'s.

A backup is resumed only by a run with the same settings: the run's (`settings`: train steps,
hyperparameters, custom config, the module file's hash, as the runtime passes them) and the fit's
(`fit`: epochs, steps per epoch, which follow from the batch size on finite data, and the
shapes and dtypes of the model's and optimizer's variables). When they differ the run starts
afresh, logs what differed, and the old backup is kept as `<checkpoint_dir>/backup.superseded`.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

from generic_trainer import compat
from generic_trainer.compat import keras_resume
from generic_trainer.errors import UserCodeError
from generic_trainer.fit import backup_state
from generic_trainer.fit.backup_state import STATE_FILE, backup_dir, read_state, run_settings

__all__ = [
    "BackupAndRestore",
    "BackupCallback",
    "STATE_FILE",
    "backup_dir",
    "clear",
    "read_state",
    "run_settings",
]
from generic_trainer.fit.backup_files import (
    BackupFiles,
    clear,
    numpy_value,
    weights_fingerprint,
)
from generic_trainer.fit.backup_schedule import SaveSchedule
from generic_trainer.fit.preemption import WATCHER, Watcher

log = logging.getLogger(__name__)


class BackupCallback(BackupFiles, SaveSchedule, keras_resume.TfKerasCallback):
    """The body of `BackupAndRestore`, the `keras.callbacks.Callback` made from it when first asked
    for (so importing this module does not import Keras).

    Chief-aware backup and restore of a `fit` run; works with Keras 3 and tf_keras models.
    Attributes a module may change before `fit`: `save_interval_s` (seconds between time-based
    saves; None: off), `save_every_steps` (None: off). Epoch ends and SIGTERM always save.
    """

    def __init__(
        self,
        checkpoint_dir: str,
        *,
        strategy=None,
        is_chief: bool = True,
        multi_worker: bool = False,
        private_dir: str | None = None,
        save_interval_s: float | None = 600.0,
        save_every_steps: int | None = None,
        watcher: Watcher = WATCHER,
        settings: dict[str, Any] | None = None,
    ):
        super().__init__()
        self.settings = (
            settings  # the run's settings a backup must share (run_settings); None: not compared
        )
        self.checkpoint_dir = checkpoint_dir
        self.restore_dir = backup_dir(checkpoint_dir)
        self.save_dir = (
            self.restore_dir if is_chief else (private_dir or self.restore_dir + ".worker")
        )
        self.strategy = strategy
        self.is_chief = is_chief
        self.multi_worker = multi_worker
        self.save_interval_s = save_interval_s
        self.save_every_steps = save_every_steps
        self.watcher = watcher
        self.fit_index = -1  # fit calls this callback took part in, in this process
        self.global_step: int | None = None  # after fit: the optimizer's step count
        self.resumed_from: int | None = None
        self.steps_this_run = 0
        self._resume = contextlib.ExitStack()  # the resume point of the fit under way (patched)
        self._skipping: contextlib.ExitStack | None = None  # its skipped steps (Keras 3)

    # --- fit hooks ---------------------------------------------------------------------------

    def on_train_begin(self, logs=None):
        self.fit_index += 1
        self.epoch, self.step_in_epoch, self.steps_this_run = 0, 0, 0
        self.end_fit()  # what an earlier fit that raised outside the runtime's wrapper left
        self._skip = 0
        self._last_save = self._last_agree_time = time.monotonic()
        self._last_saved_step = None
        self._next_agree, self._last_agree_step = 1, 0
        self._tf_keras = type(self.model).__module__.startswith("tf_keras") or any(
            c.__module__.startswith("tf_keras") for c in type(self.model).__mro__
        )
        if not self.model.weights:
            raise UserCodeError(
                "fn_args.backup_and_restore needs a built model before fit (give it a "
                "keras.Input, or call model.build(input_shape) or model(batch) first)"
            )
        self.watcher.enter()
        try:
            state = read_state(self.checkpoint_dir)
            problem = (
                backup_state.state_problem(state, self.restore_dir) if state is not None else None
            )
        except backup_state.DamagedState as e:
            state, problem = {}, str(e)
        if state is None:
            return
        if problem:
            self._supersede(f"cannot be resumed: {STATE_FILE} is damaged or was edited ({problem})")
            return
        self._go_on_from(state)

    def _go_on_from(self, state: dict[str, Any]) -> None:
        """Go on from a readable `state`: this fit's checkpoint restored, a finished fit skipped,
        or, when the state belongs to other settings or another fit, the backup set aside."""
        saved_fit = int(state.get("fit_index", 0))
        differs = backup_state.differences(state.get("settings"), self.settings)
        if not differs and saved_fit == self.fit_index:
            differs = backup_state.differences(state.get("fit"), self._fit_signature())
        if differs:
            self._supersede(f"was made by a run with other settings ({', '.join(differs)})")
            return
        params = self.params or {}
        done = self._global_step() + int(params.get("epochs") or 0) * int(params.get("steps") or 0)
        if (
            saved_fit > self.fit_index and state["global_step"] < done
        ):  # the steps of this fit are not in it
            self._supersede(
                f"cannot be resumed: {STATE_FILE} says fit #{self.fit_index + 1} finished, but its "
                f"checkpoint is at global step {state['global_step']}, before that fit's end "
                f"({done})"
            )
            return
        if saved_fit > self.fit_index:
            log.info("backup: fit #%d finished before the restart; skipping it", self.fit_index + 1)
            self._start_at(int(params.get("epochs") or 0), 0)
            return
        if saved_fit < self.fit_index:
            return
        self._restore(state)

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch
        self.step_in_epoch = 0

    def on_train_batch_begin(self, batch, logs=None):
        if self._skip > 0:
            if self._skipping is None:
                self._skipping = contextlib.ExitStack()
                self._skipping.enter_context(compat.patched(keras_resume.SkipSteps(self.model)))
            self._skip -= 1
        elif self._skipping is not None:
            self._unskip()

    def on_train_batch_end(self, batch, logs=None):
        self.step_in_epoch = batch + 1
        if self._skipping is not None:
            return  # a skipped step: nothing trained
        self.steps_this_run += 1
        if self.steps_this_run < self._next_agree:
            return
        preempt, due, interval = self._agree(
            self.watcher.requested,
            self._periodic_save_due(),
            self._agree_interval() if self.is_chief else 0,
        )
        self._next_agree = self.steps_this_run + max(1, interval)
        if due or preempt:
            self._save()
        if preempt:
            self._preempted()

    def on_epoch_end(self, epoch, logs=None):
        self._unskip()
        self.epoch, self.step_in_epoch = epoch + 1, 0
        self._save()
        preempt, _, _ = self._agree(self.watcher.requested, False)
        if preempt:
            self._preempted()

    def on_train_end(self, logs=None):
        self._unskip()
        preempt, _, _ = self._agree(self.watcher.requested, False)
        if preempt:
            self._save()
            self._preempted()
        self.watcher.leave()
        self._resume.close()
        self.global_step = self._global_step()
        resumed = (
            f", resumed from step {self.resumed_from}" if self.resumed_from is not None else ""
        )
        log.info(
            "backup: fit done at global step %d (%d steps in this run%s)",
            self.global_step,
            self.steps_this_run,
            resumed,
        )
        if self.multi_worker:
            log.info(
                "final weights fingerprint %s (the same on every worker)",
                weights_fingerprint(self.model),
            )

    # --- internals ---------------------------------------------------------------------------

    def _global_step(self) -> int:
        optimizer = getattr(self.model, "optimizer", None)
        iterations = getattr(optimizer, "iterations", None)
        return int(numpy_value(iterations)) if iterations is not None else 0

    def _start_at(self, epoch: int, step: int) -> None:
        # raises compat.Unsupported when this Keras has no resume point (a required patch)
        patch = keras_resume.ResumeAt(self.model, epoch, step, tf_keras=self._tf_keras)
        self._resume.enter_context(compat.patched(patch))
        if not self._tf_keras:
            self._skip = step  # tf_keras skips the steps itself

    def _unskip(self) -> None:
        if self._skipping is not None:
            self._skipping.close()
            self._skipping = None
        self._skip = 0

    def end_fit(self) -> None:
        """Undo this fit's patches (the resume point, skipped steps); a no-op when none is left."""
        self._unskip()
        self._resume.close()

    def _preempted(self) -> None:
        self.watcher.leave()
        self._unskip()
        step = self._global_step()
        if self.is_chief:
            raise self.watcher.error(
                f"SIGTERM received; saved global step {step} to {self.restore_dir}"
            )
        raise self.watcher.error(f"SIGTERM received; the chief saved global step {step}")


if TYPE_CHECKING:
    import keras

    class BackupAndRestore(BackupCallback, keras.callbacks.Callback):
        """What `__getattr__` makes."""


def __getattr__(name: str):
    """`BackupAndRestore`: `BackupCallback` as a `keras.callbacks.Callback`, made once, when first
    used."""
    if name != "BackupAndRestore":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import keras

    cls = type(
        "BackupAndRestore",
        (BackupCallback, keras.callbacks.Callback),
        {"__module__": __name__, "__doc__": BackupCallback.__doc__},
    )
    globals()["BackupAndRestore"] = cls
    return cls
