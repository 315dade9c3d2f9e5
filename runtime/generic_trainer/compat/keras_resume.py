"""Where a `fit` already under way starts: tf_keras' and Keras 3's resume points, Keras 3 steps
skipped.

Assumes: tf_keras' `Model.fit` asks `model._training_state.maybe_load_initial_counters_from_ckpt(
steps_per_epoch, initial_epoch, mode)` (when `_training_state` is not None) for the (epoch, step)
to start at, after the callbacks' `on_train_begin`; Keras 3's `fit` starts at
`model._initial_epoch or initial_epoch`, read after `on_train_begin`, and calls
`model.train_function(iterator)` anew at every step. tf_keras' `CallbackList` asks every callback
the attributes `TfKerasCallback` declares; a tf_keras optimizer creates its variables on the first
step unless built (`build`, or `_create_all_weights` for its legacy optimizers).
"""

from __future__ import annotations

from typing import Any

from generic_trainer.compat.base import Patch, Versions


class _TfKerasResumePoint:
    """What tf_keras' fit asks `model._training_state` for: the (epoch, step) to start at."""

    def __init__(self, epoch: int, step: int):
        self.epoch, self.step = epoch, step

    def maybe_load_initial_counters_from_ckpt(self, steps_per_epoch, initial_epoch, mode=None):
        if steps_per_epoch and self.step >= steps_per_epoch:
            return self.epoch + 1, 0
        return self.epoch, self.step


class ResumeAt(Patch):
    """The model's next `fit` starts at `epoch` (tf_keras: at `step` of it too; Keras 3 skips those
    steps with `SkipSteps`). Undone at the end of that fit."""

    versions = (Versions("keras", "3.0", "3.16"), Versions("tf-keras", "2.13", "2.22"))
    lost = "an interrupted fit cannot resume where its backup was saved"
    required = True

    def __init__(self, model: Any, epoch: int, step: int, tf_keras: bool):
        super().__init__()
        self.model, self.epoch, self.step, self.tf_keras = model, epoch, step, tf_keras

    def missing(self) -> list[str]:
        if self.tf_keras:
            return (
                [] if hasattr(self.model, "_training_state") else ["tf_keras Model._training_state"]
            )
        return [] if hasattr(self.model, "_initial_epoch") else ["Keras 3 Model._initial_epoch"]

    def replacements(self) -> list[tuple[Any, str, Any]]:
        if self.tf_keras:
            return [(self.model, "_training_state", _TfKerasResumePoint(self.epoch, self.step))]
        return [(self.model, "_initial_epoch", self.epoch)]


def _skipped_step(iterator: Any) -> dict:
    """Keras 3's train function for a step that was done before the restart: no data, no
    computation."""
    return {}


class SkipSteps(Patch):
    """While applied, the Keras 3 model's steps compute nothing (the steps a restart already
    did)."""

    versions = (Versions("keras", "3.0", "3.16"),)
    lost = "steps done before a restart would train again"
    required = True

    def __init__(self, model: Any):
        super().__init__()
        self.model = model

    def missing(self) -> list[str]:
        return (
            []
            if callable(getattr(self.model, "train_function", None))
            else ["Keras 3 Model.train_function"]
        )

    def replacements(self) -> list[tuple[Any, str, Any]]:
        return [(self.model, "train_function", _skipped_step)]


class TfKerasCallback:
    """Mixin of a Keras 3 callback that tf_keras models take too: what tf_keras' CallbackList asks
    of it."""

    _supports_tf_logs = False
    _chief_worker_only = False

    def _implements_train_batch_hooks(self) -> bool:
        return True

    def _implements_test_batch_hooks(self) -> bool:
        return False

    def _implements_predict_batch_hooks(self) -> bool:
        return False


def build_optimizer(model: Any) -> None:
    """Create the optimizer's variables now (tf_keras creates them on the first step) so they
    restore."""
    optimizer = getattr(model, "optimizer", None)
    if (
        optimizer is None
        or getattr(optimizer, "built", False)
        or getattr(optimizer, "_built", False)
    ):
        return
    if hasattr(optimizer, "build"):  # Keras 3, tf_keras
        optimizer.build(model.trainable_variables)
    elif hasattr(optimizer, "_create_all_weights"):  # tf_keras legacy optimizers
        optimizer._create_all_weights(model.trainable_variables)
