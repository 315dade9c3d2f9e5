"""Keras optimizers from `trainer.optimizer_config` (what the default `Task.build_optimizer`
returns).

`optimizer.type` picks the optimizer and its block its arguments (Model Garden's names);
`learning_rate` and `warmup` give the schedule (`schedules.py`). Under float16 mixed precision
the optimizer is wrapped in a LossScaleOptimizer (`runtime.loss_scale`: dynamic, or the initial
scale). The EMA (`optimizer_config.ema`) is kept by the Controller (`ema.py`), not here.
"""

from __future__ import annotations

import logging
from typing import Any

from generic_trainer.errors import UserInputError
from generic_trainer.task import schedules
from generic_trainer.task.config import RuntimeConfig
from generic_trainer.task.optimization_checks import check
from generic_trainer.task.optimization_config import (
    PREFIX,
    OptimizationConfig,
    OptimizerConfig,
    one_of,
)

log = logging.getLogger("generic_trainer.task")

_CLIPS = ("clipnorm", "clipvalue", "global_clipnorm")
_ADAM = ("beta_1", "beta_2", "epsilon", "amsgrad")
_EXCLUSIONS = ("exclude_from_weight_decay", "exclude_from_layer_adaptation")
# type -> (its keras.optimizers class, the block's fields passed as they are)
_KERAS = {
    "sgd": ("SGD", ("momentum", "nesterov")),
    "sgd_experimental": ("SGD", ("momentum", "nesterov")),
    "adam": ("Adam", _ADAM),
    "adam_experimental": ("Adam", _ADAM),
    "rmsprop": ("RMSprop", ("rho", "momentum", "epsilon", "centered")),
    "adagrad": ("Adagrad", ("initial_accumulator_value", "epsilon")),
}
# type -> the block's fields passed to layerwise.py's class of that name
_LAYERWISE = {
    "lamb": ("beta_1", "beta_2", "epsilon", "weight_decay_rate", *_EXCLUSIONS),
    "lars": ("momentum", "eeta", "weight_decay_rate", "nesterov", "classic_momentum", *_EXCLUSIONS),
}


def _kwargs(block: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """The block's `names` and the clipping it sets, as optimizer keyword arguments."""
    out = {k: getattr(block, k) for k in names}
    out.update({k: getattr(block, k) for k in _CLIPS if getattr(block, k, None) is not None})
    return out


def build_optimizer(config: OptimizationConfig, learning_rate: Any) -> Any:
    """The Keras optimizer of `config.optimizer`.

    Args:
      config: the checked trainer.optimizer_config.
      learning_rate: a float or a schedule.

    Returns:
      The optimizer (not wrapped for loss scaling).

    Raises:
      UserInputError: an optimizer type the runtime does not build.
    """
    import keras

    from generic_trainer.task import layerwise

    kind = config.optimizer.type
    block = one_of(config.optimizer, kind, f"{PREFIX}.optimizer")
    if kind in _KERAS:
        name, fields = _KERAS[kind]
        optimizer_cls = getattr(keras.optimizers, name)
        return optimizer_cls(learning_rate=learning_rate, **_kwargs(block, fields))
    if kind in _LAYERWISE:
        optimizer_cls = layerwise.classes()[kind]
        return optimizer_cls(learning_rate=learning_rate, **_kwargs(block, _LAYERWISE[kind]))
    if kind == "adamw":
        kwargs = _kwargs(block, _ADAM)
        if block.gradient_clip_norm and block.gradient_clip_norm > 0:
            kwargs["global_clipnorm"] = block.gradient_clip_norm
        return layerwise.classes()["adamw"](
            learning_rate=learning_rate,
            weight_decay=block.weight_decay_rate,
            include_in_weight_decay=block.include_in_weight_decay,
            exclude_from_weight_decay=block.exclude_from_weight_decay,
            **kwargs,
        )
    if kind == "adamw_experimental":
        return keras.optimizers.AdamW(
            learning_rate=learning_rate,
            weight_decay=block.weight_decay,
            **_kwargs(block, _ADAM),
        )
    raise UserInputError(f"{PREFIX}.optimizer.type", f"unsupported optimizer {kind!r}")


def build(
    config: OptimizationConfig | OptimizerConfig,
    train_steps: int,
    runtime: RuntimeConfig | None = None,
) -> Any:
    """The Keras optimizer `config` describes, wrapped in a LossScaleOptimizer under float16.

    Args:
      config: trainer.optimizer_config (the flat form of earlier releases is converted).
      train_steps: trainer.train_steps, for the schedules' default decay steps.
      runtime: the runtime config (mixed precision, loss scale); None: none.

    Returns:
      The optimizer.

    Raises:
      UserInputError: the config does not pass its checks.
    """
    import keras

    if isinstance(config, OptimizerConfig):  # the deprecated flat form
        from generic_trainer.task.overrides import build_optimization_config

        config = build_optimization_config(config.as_one_of(), "OptimizerConfig(...)")
    check(config, train_steps)
    optimizer = build_optimizer(config, schedules.build_learning_rate(config, train_steps))
    if runtime is not None and runtime.mixed_precision_dtype in ("float16", "mixed_float16"):
        scale = runtime.loss_scale
        if scale not in (None, "dynamic"):
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer, initial_scale=float(scale))
        else:
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    elif runtime is not None and runtime.loss_scale is not None:
        log.info(
            "runtime.loss_scale=%s ignored: loss scaling is for float16 mixed precision only",
            runtime.loss_scale,
        )
    return optimizer
