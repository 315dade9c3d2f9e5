"""The checks of `trainer.optimizer_config`, before TensorFlow starts (errors name the key).

The chosen optimizer is one the runtime provides, with at most one clipping and no Keras 2 `decay`;
each chosen block is read by the rules its fields declare (`optimizer_blocks.py`); a stepwise
schedule has one more value than boundaries; a decaying schedule has something to decay over; an
EMA decay is in [0, 1).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from generic_trainer.errors import UserInputError
from generic_trainer.task.optimization_config import PREFIX, OptimizationConfig, one_of

OPTIMIZER_TYPES = (
    "sgd",
    "sgd_experimental",
    "adam",
    "adam_experimental",
    "adamw",
    "adamw_experimental",
    "lamb",
    "rmsprop",
    "lars",
    "adagrad",
)
REFUSED_OPTIMIZERS = {
    "slide": "Model Garden's SLIDE optimizer is not provided",
    "adafactor": "Model Garden's Adafactor is not provided (keras.optimizers.Adafactor differs)",
}


def check_block(block: Any, where: str) -> None:
    """Check the chosen block of a one-of by the rules its fields declare (optimizer_blocks.py).

    Args:
      block: the chosen block.
      where: its key, for the errors.

    Raises:
      UserInputError: a required field unset, or a value under its minimum.
    """
    for f in dataclasses.fields(block):
        value, key = getattr(block, f.name), f"{where}.{f.name}"
        if value is None and "required" in f.metadata:
            raise UserInputError(key, f"required by the chosen type: set {f.metadata['required']}")
        minimum = f.metadata.get("minimum")
        if value is not None and minimum is not None and value < minimum:
            expected = "a positive integer" if minimum == 1 else f"{minimum} or more"
            raise UserInputError(key, f"expected {expected}, got {value}")


def check(config: OptimizationConfig, train_steps: int = 0) -> None:
    """Check the chosen optimizer, schedule, warm-up and EMA make sense.

    Args:
      config: the resolved trainer.optimizer_config.
      train_steps: trainer.train_steps (0: not known), for a schedule's default decay steps.

    Raises:
      UserInputError: naming the key that is wrong.
    """
    if not isinstance(config, OptimizationConfig):
        raise UserInputError(
            PREFIX,
            f"expected the one-of form (optimizer, learning_rate, warmup, ema), "
            f"got {type(config).__name__}",
        )
    _check_optimizer(config)
    _check_learning_rate(config, train_steps)
    if config.warmup.type:
        check_block(
            one_of(config.warmup, config.warmup.type, f"{PREFIX}.warmup"),
            f"{PREFIX}.warmup.{config.warmup.type}",
        )
    if config.ema is not None and not 0.0 <= config.ema.average_decay < 1.0:
        raise UserInputError(
            f"{PREFIX}.ema.average_decay",
            f"expected 0 <= decay < 1, got {config.ema.average_decay}",
        )


def _check_optimizer(config: OptimizationConfig) -> None:
    """The optimizer type is provided; at most one clipping; no Keras 2 `decay`."""
    kind = config.optimizer.type
    if kind in REFUSED_OPTIMIZERS:
        raise UserInputError(
            f"{PREFIX}.optimizer.type",
            f"{REFUSED_OPTIMIZERS[kind]}; use one of {', '.join(OPTIMIZER_TYPES)}",
        )
    block = one_of(config.optimizer, kind, f"{PREFIX}.optimizer")
    where = f"{PREFIX}.optimizer.{kind}"
    clips = [
        k for k in ("clipnorm", "clipvalue", "global_clipnorm") if getattr(block, k) is not None
    ]
    if len(clips) > 1:
        raise UserInputError(
            where,
            f"set at most one of clipnorm, clipvalue, global_clipnorm (got {', '.join(clips)})",
        )
    if kind == "sgd" and block.decay:
        raise UserInputError(
            f"{where}.decay",
            "Keras 3 optimizers have no `decay`: set it to 0 and use a "
            f"{PREFIX}.learning_rate schedule",
        )
    if kind == "adamw" and block.gradient_clip_norm and clips:
        raise UserInputError(
            f"{where}.gradient_clip_norm", f"set either gradient_clip_norm or {clips[0]}, not both"
        )


def _check_learning_rate(config: OptimizationConfig, train_steps: int) -> None:
    """The schedule's block by its rules; stepwise values and boundaries; a decay length."""
    lr = config.learning_rate
    lr_block = one_of(lr, lr.type, f"{PREFIX}.learning_rate")
    where = f"{PREFIX}.learning_rate.{lr.type}"
    check_block(lr_block, where)
    if lr.type == "stepwise":
        if len(lr_block.values) != len(lr_block.boundaries) + 1:
            raise UserInputError(
                f"{where}.values",
                f"expected one more value than boundaries, got {len(lr_block.values)} values for "
                f"{len(lr_block.boundaries)}",
            )
        if list(lr_block.boundaries) != sorted(set(lr_block.boundaries)):
            raise UserInputError(
                f"{where}.boundaries",
                f"expected strictly increasing steps, got {lr_block.boundaries}",
            )
    if lr.type in ("polynomial", "cosine") and lr_block.decay_steps is None:
        if train_steps and train_steps - lr_block.offset <= 0:
            raise UserInputError(
                f"{where}.decay_steps",
                "not set, and trainer.train_steps - offset is not positive: set decay_steps",
            )
