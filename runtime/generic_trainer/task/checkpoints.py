"""The Task path's checkpoint helpers: finding a checkpoint, warm starts, and the best-checkpoint
exporter.

What this module owns: reading a checkpoint into a model from outside the run
(`task.init_checkpoint`: a prefix, a checkpoint dir, a best-checkpoint export or a `.weights.h5`)
and keeping the best checkpoint by a validation metric (an eval action of the controller). The
run's own checkpoints are saved and restored by the controller (`controller.py`); the run_fn
path's backup of `model.fit` is `checkpointing.py`; listing and removing checkpoint files is
shared (`checkpoint_files.py`).

The runtime's checkpoints are `tf.train.Checkpoint(model=..., optimizer=..., global_step=...)`
written by a CheckpointManager (`ckpt-<step>`). The best-checkpoint exporter keeps the checkpoint
with the best validation metric as `<export_dir>/best_ckpt-<step>` with an `info.json` beside it
(Model Garden's layout: the eval metrics plus `best_ckpt_global_step`).
"""

from __future__ import annotations

import glob
import json
import logging
import math
import os
from collections.abc import Mapping
from typing import Any

from generic_trainer.artifacts import storage
from generic_trainer.errors import UserInputError
from generic_trainer.fit.checkpoint_files import DamagedState, read_json, remove_checkpoints

log = logging.getLogger(__name__)

INFO_FILE = "info.json"


def resolve_checkpoint(path: str, input_name: str = "task.init_checkpoint") -> str:
    """A checkpoint prefix from a prefix, a checkpoint dir, or a best-checkpoint export dir."""
    import tensorflow as tf

    if os.path.isdir(path):
        try:
            ckpt = (read_json(os.path.join(path, INFO_FILE)) or {}).get("best_ckpt_path")
        except DamagedState as e:
            raise UserInputError(
                input_name, f"{e} (a best-checkpoint export's {INFO_FILE})"
            ) from None
        if isinstance(ckpt, str) and ckpt:
            return os.path.join(path, os.path.basename(ckpt))
        latest = tf.train.latest_checkpoint(path)
        if latest:
            return latest
        raise UserInputError(input_name, f"{path} holds no checkpoint")
    if glob.glob(path + ".index"):
        return path
    raise UserInputError(
        input_name,
        f"{path} is not a checkpoint (no {os.path.basename(path)}.index) "
        "nor a directory holding one",
    )


def restore_model(model: Any, path: str, input_name: str = "task.init_checkpoint") -> str:
    """Load the model's weights from a TF checkpoint (under `model`) or a `.weights.h5` file."""
    import tensorflow as tf

    if path.endswith(".weights.h5"):
        if not os.path.isfile(path):
            raise UserInputError(input_name, f"{path} does not exist")
        model.load_weights(path)
        log.info("initialized the model from %s", path)
        return path
    prefix = resolve_checkpoint(path, input_name)
    status = tf.train.Checkpoint(model=model).read(prefix)
    try:
        status.expect_partial().assert_existing_objects_matched()
    except AssertionError as e:
        raise UserInputError(
            input_name, f"{prefix} does not match the model: {str(e)[:500]}"
        ) from None
    log.info("initialized the model from %s", prefix)
    return prefix


def _is_better(value: float, best: float | None, comp: str) -> bool:
    if best is None or not math.isfinite(best):
        return True
    return value > best if comp == "higher" else value < best


class BestCheckpointExporter:
    """Keeps the checkpoint with the best `metric_name` (compared `higher`/`lower`) and its
    info.json.

    Every worker calls `maybe_export` (writing a checkpoint can be collective); only the chief's
    `export_dir` is the real one, other workers pass a private directory.
    """

    def __init__(self, export_dir: str, metric_name: str, metric_comp: str, is_chief: bool = True):
        self.export_dir = export_dir
        self.metric_name = metric_name
        self.metric_comp = metric_comp
        self.is_chief = is_chief
        self.best: float | None = None
        os.makedirs(export_dir, exist_ok=True)
        try:
            info = self.read_info(export_dir)
        except DamagedState as e:
            log.warning(
                "%s: the best checkpoint so far is not known; the next evaluation is exported", e
            )
            info = None
        if info is not None and isinstance(info.get(metric_name), (int, float)):
            self.best = float(info[metric_name])
            log.info(
                "best checkpoint so far: %s=%.4g at step %s",
                metric_name,
                self.best,
                info.get("best_ckpt_global_step"),
            )

    @staticmethod
    def read_info(export_dir: str) -> dict[str, Any] | None:
        """The info.json of the best checkpoint in `export_dir`, or None."""
        return read_json(os.path.join(export_dir, INFO_FILE))

    def maybe_export(
        self, checkpoint: Any, eval_logs: Mapping[str, float], global_step: int
    ) -> bool:
        """Write `checkpoint` as the best one when `eval_logs[metric_name]` beats the best so
        far."""
        if self.metric_name not in eval_logs:
            raise UserInputError(
                "trainer.best_checkpoint_eval_metric",
                f"{self.metric_name!r} is not a validation metric; there are: "
                f"{', '.join(sorted(eval_logs))}",
            )
        value = float(eval_logs[self.metric_name])
        if not math.isfinite(value) or not _is_better(value, self.best, self.metric_comp):
            return False
        prefix = checkpoint.write(os.path.join(self.export_dir, f"best_ckpt-{global_step}"))
        self.best = value
        if self.is_chief:
            info = {k: float(v) for k, v in eval_logs.items()}
            info.update(
                {
                    "best_ckpt_global_step": int(global_step),
                    "best_ckpt_path": os.path.basename(prefix),
                    "best_ckpt_metric": self.metric_name,
                    "best_ckpt_metric_comp": self.metric_comp,
                }
            )
            storage.write_file_atomic(
                os.path.join(self.export_dir, INFO_FILE), json.dumps(info, indent=2) + "\n"
            )
            log.info(
                "new best checkpoint: %s=%.4g at step %d -> %s",
                self.metric_name,
                value,
                global_step,
                prefix,
            )
        remove_checkpoints(self.export_dir, "best_ckpt", keep=[prefix])
        return True
