"""Reading and writing a run_fn backup's checkpoints: save, keep two, restore, set aside.

Layout: `ckpt-<global step>.index/.data-*` (a `tf.train.Checkpoint`) and `state.json`
(`backup_state.py`), written last and atomically, so the latest state always names a complete
checkpoint. A damaged newest checkpoint falls back to the one before it; a damaged or edited
state.json starts afresh (warned). The runtime deletes the backup once the outputs are published:
the same command after a success trains afresh.

`BackupFiles` is the storage half of `checkpointing.BackupCallback` (a mixin: it uses the
callback's model, strategy, dirs, position in the fit, `_global_step` and `_start_at`). A save
writes `ckpt-<global step>` and then `state.json` atomically (`backup_state.py`) and keeps the
latest two; a restore reads the newest readable checkpoint of this fit, else the one before it,
else sets the backup aside (`backup.superseded`) and starts afresh.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from typing import Any

from generic_trainer.artifacts import storage
from generic_trainer.compat import keras_resume
from generic_trainer.errors import UserCodeError
from generic_trainer.fit import backup_state
from generic_trainer.fit.backup_state import STATE_FILE, backup_dir
from generic_trainer.fit.checkpoint_files import checkpoint_steps, remove_checkpoints

log = logging.getLogger("generic_trainer.fit.checkpointing")

SUPERSEDED_SUBDIR = "backup.superseded"
KEEP = 2  # checkpoints kept: the latest and the one before it


def optimizer_variables(optimizer) -> list:
    """The optimizer's variables (a list, also from tf_keras' legacy optimizers)."""
    variables = getattr(optimizer, "variables", None)
    if callable(variables):  # tf_keras legacy optimizers
        variables = variables()
    return list(variables or [])


def clear(checkpoint_dir: str) -> None:
    """Remove the backup (after a finished run's outputs are published)."""
    path = backup_dir(checkpoint_dir)
    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
        log.info("training finished: removed the backup %s", path)


def numpy_value(variable):
    """A variable's value as a numpy array."""
    import numpy as np

    return np.asarray(variable.numpy())


def weights_fingerprint(model) -> str:
    """sha256 of the model's weights (the same on every worker when they are in sync)."""
    digest = hashlib.sha256()
    for variable in model.weights:
        digest.update(numpy_value(variable).tobytes())
    return digest.hexdigest()[:16]


class BackupFiles:
    """The checkpoint files of a backup callback (see the module docstring)."""

    def _fit_signature(self) -> dict[str, Any]:
        """What this fit must share with a backup to resume it: epochs, steps per epoch, variable
        shapes."""
        params = self.params or {}
        variables = [
            f"{tuple(v.shape)}:{getattr(v.dtype, 'name', v.dtype)}" for v in self.model.weights
        ]
        optimizer = getattr(self.model, "optimizer", None)
        return {
            "epochs": params.get("epochs"),
            "steps_per_epoch": params.get("steps"),
            "variables": backup_state.digest([type(optimizer).__name__, variables]),
        }

    def _supersede(self, why: str) -> None:
        """Start this fit afresh: the backup cannot be resumed (`why`); it is kept aside, not
        deleted."""
        kept = os.path.join(self.checkpoint_dir, SUPERSEDED_SUBDIR)
        log.warning(
            "backup: %s %s: training starts afresh; the old backup is kept in %s",
            self.restore_dir,
            why,
            kept,
        )
        if self.is_chief:
            shutil.rmtree(kept, ignore_errors=True)
            try:
                os.rename(self.restore_dir, kept)
            except OSError:  # another file system layout (e.g. FUSE without dir rename): drop it
                shutil.rmtree(self.restore_dir, ignore_errors=True)

    def _variables(self) -> dict[str, Any]:
        variables = {f"model_{i:05d}": v for i, v in enumerate(self.model.weights)}
        optimizer = getattr(self.model, "optimizer", None)
        if optimizer is not None:
            variables.update(
                {f"optimizer_{i:05d}": v for i, v in enumerate(optimizer_variables(optimizer))}
            )
        return variables

    def _checkpoint(self):
        import tensorflow as tf

        return tf.train.Checkpoint(**self._variables())

    def _save(self) -> None:
        step = self._global_step()
        if step == self._last_saved_step:
            return
        os.makedirs(self.save_dir, exist_ok=True)
        started = time.monotonic()
        prefix = self._checkpoint().write(os.path.join(self.save_dir, f"ckpt-{step}"))
        self._last_save, self._last_saved_step = time.monotonic(), step
        if (
            not self.is_chief
        ):  # a worker writes too (reading some variables is collective), but nobody reads it
            shutil.rmtree(self.save_dir, ignore_errors=True)
            return
        state = {
            "prefix": os.path.basename(prefix),
            "global_step": step,
            "epoch": self.epoch,
            "step_in_epoch": self.step_in_epoch,
            "fit_index": self.fit_index,
            "time": time.time(),
            "settings": self.settings,
            "fit": self._fit_signature(),
            "previous": backup_state.previous_states(self.checkpoint_dir),
        }
        storage.write_file_atomic(os.path.join(self.save_dir, STATE_FILE), json.dumps(state) + "\n")
        self._remove_old(os.path.basename(prefix))
        log.info(
            "backup: saved global step %d (%s) to %s in %.1f s",
            step,
            backup_state.position(self.epoch, self.step_in_epoch),
            prefix,
            time.monotonic() - started,
        )

    def _remove_old(self, latest: str) -> None:
        keep = [f"ckpt-{step}" for step in checkpoint_steps(self.save_dir, "ckpt")[-KEEP:]] + [
            latest
        ]
        remove_checkpoints(self.save_dir, "ckpt", keep)

    def _restore(self, state: dict[str, Any]) -> None:
        """Restore the newest readable checkpoint of this fit: the state's, else the one before it
        (warned); none readable: start afresh, the backup kept aside. A checkpoint of another model
        is exit 3."""
        keras_resume.build_optimizer(self.model)
        params = self.params or {}
        saved = [
            v.numpy() for v in self._variables().values()
        ]  # put back when no checkpoint restores
        candidates = [state] + [
            c
            for c in (state.get("previous") or [])[:1]
            if isinstance(c, dict) and c.get("fit_index", 0) == state.get("fit_index", 0)
        ]
        damaged = []
        for candidate in candidates:
            prefix = os.path.join(self.restore_dir, str(candidate.get("prefix")))
            problem = backup_state.state_problem(
                candidate, self.restore_dir, params.get("epochs"), params.get("steps")
            )
            if problem is None:
                problem = self._read_checkpoint(prefix, int(candidate["global_step"]))
            if problem is None:
                if damaged:
                    log.warning(
                        "backup: %s; resuming from the older checkpoint %s",
                        "; ".join(damaged),
                        prefix,
                    )
                epoch, step = int(candidate["epoch"]), int(candidate["step_in_epoch"])
                self.resumed_from = self._last_saved_step = int(candidate["global_step"])
                log.info(
                    "backup: resuming from %s: global step %d (%s)",
                    prefix,
                    self.resumed_from,
                    backup_state.position(epoch, step),
                )
                self._start_at(epoch, step)
                return
            damaged.append(f"checkpoint {prefix} cannot be resumed: {problem}")
        for variable, value in zip(self._variables().values(), saved, strict=True):
            variable.assign(value)
        self._supersede("holds no checkpoint that can be resumed (" + "; ".join(damaged) + ")")

    def _read_checkpoint(self, prefix: str, global_step: int) -> str | None:
        """Read the checkpoint `prefix` into the model and optimizer; why it cannot be resumed, or
        None."""
        try:
            self._checkpoint().read(prefix).assert_existing_objects_matched()
        except (AssertionError, ValueError) as e:
            raise UserCodeError(
                f"the backup {prefix} does not fit this model (was the module changed?): "
                f"{str(e)[:500]}. "
                f"Delete {self.restore_dir} or use another --checkpoint-dir to start afresh."
            ) from None
        except (
            Exception
        ) as e:  # NotFoundError, DataLossError: a damaged (truncated, garbled) checkpoint file
            return f"its files are damaged ({type(e).__name__}: {' '.join(str(e).split())[:300]})"
        if self._global_step() != global_step:
            return (
                f"it holds global step {self._global_step()}, not the {global_step} of {STATE_FILE}"
            )
        return None
