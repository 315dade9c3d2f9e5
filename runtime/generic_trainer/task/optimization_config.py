"""`trainer.optimizer_config` in TF Model Garden's one-of form (no TensorFlow here).

    optimizer_config:
      optimizer: {type: sgd, sgd: {momentum: 0.9}}
      learning_rate: {type: stepwise, stepwise: {boundaries: [100, 200],
                                                 values: [0.1, 0.01, 0.001]}}
      warmup: {type: linear, linear: {warmup_steps: 50, warmup_learning_rate: 0.0}}
      ema: {average_decay: 0.999}

Each one-of (`optimizer`, `learning_rate`, `warmup`) has a `type` naming the block in use; the
other blocks are kept (an experiment file may carry them) but ignored. The blocks themselves are in
`optimizer_blocks.py`, their checks in `optimization_checks.py`; `optimizers.py`, `schedules.py`
and `ema.py` build what they describe.

The flat form of earlier releases (`type`, `learning_rate: 0.01`, `learning_rate_schedule`,
`warmup_steps`, `momentum`, `weight_decay`, `clipnorm`, `global_clipnorm`) is still read, with a
deprecation warning naming the new keys (`upgrade_flat`).
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from generic_trainer.errors import UserInputError
from generic_trainer.task.optimizer_blocks import (
    ConstantLrConfig,
    EMAConfig,
    LearningRateConfig,
    OptimizerTypeConfig,
    WarmupConfig,
)

log = logging.getLogger("generic_trainer.task")

PREFIX = "trainer.optimizer_config"


@dataclasses.dataclass
class OptimizationConfig:
    """`trainer.optimizer_config`: optimizer, learning-rate schedule, warm-up, and EMA."""

    optimizer: OptimizerTypeConfig = dataclasses.field(default_factory=OptimizerTypeConfig)
    ema: EMAConfig | None = None
    learning_rate: LearningRateConfig = dataclasses.field(
        default_factory=lambda: LearningRateConfig(constant=ConstantLrConfig(learning_rate=0.001))
    )
    warmup: WarmupConfig = dataclasses.field(default_factory=WarmupConfig)

    def upgrade_keys(self, values: Mapping[str, Any], source: str) -> Mapping[str, Any]:
        """`values` in the one-of form (the flat form of earlier releases converted, warned)."""
        return upgrade_flat(values, source, self)

    def with_base_learning_rate(self, learning_rate: float) -> OptimizationConfig:
        """A copy whose schedule starts from `learning_rate` (stepwise values are scaled alike)."""
        out = copy.deepcopy(self)
        kind = out.learning_rate.type
        block = getattr(out.learning_rate, kind or "", None)
        if block is None:
            raise UserInputError(f"{PREFIX}.learning_rate.type", f"unknown schedule {kind!r}")
        if kind == "constant":
            block.learning_rate = float(learning_rate)
        elif kind == "stepwise":
            if block.values:
                ratio = float(learning_rate) / block.values[0] if block.values[0] else 0.0
                block.values = [v * ratio for v in block.values]
        else:
            block.initial_learning_rate = float(learning_rate)
        return out


def one_of(config: Any, kind: str | None, where: str) -> Any:
    """The block `config.<kind>` of a one-of config, or an error listing the types there are."""
    names = [f.name for f in dataclasses.fields(config) if f.name != "type"]
    if kind in names:
        return getattr(config, kind)
    import difflib

    close = difflib.get_close_matches(str(kind), names, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise UserInputError(
        f"{where}.type", f"unknown type {kind!r}{hint}; expected one of {', '.join(names)}"
    )


def unused_blocks(
    config: OptimizationConfig, before: OptimizationConfig | None = None
) -> list[str]:
    """Blocks changed from `before` (the defaults) but not chosen by their one-of's `type`.

    Args:
      config: the resolved config.
      before: the config it was changed from (None: the defaults).

    Returns:
      Their keys (each worth a warning).
    """
    out = []
    before = before if isinstance(before, OptimizationConfig) else OptimizationConfig()
    for part in ("optimizer", "learning_rate", "warmup"):
        one, default = getattr(config, part), getattr(before, part)
        for f in dataclasses.fields(one):
            if (
                f.name != "type"
                and f.name != one.type
                and getattr(one, f.name) != getattr(default, f.name)
            ):
                out.append(f"{PREFIX}.{part}.{f.name}")
    return out


# ---- the flat form of earlier releases --------------------------------------------------------

FLAT_MOMENTUM_TYPES = ("sgd", "rmsprop", "lars")  # the types the flat `momentum` applies to
FLAT_WEIGHT_DECAY_TYPES = ("adamw", "lamb", "lars")  # ... and `weight_decay` (weight_decay_rate)
FLAT_KEYS = (
    "type",
    "learning_rate_schedule",
    "warmup_steps",
    "momentum",
    "weight_decay",
    "clipnorm",
    "global_clipnorm",
)


def is_flat(values: Mapping[str, Any]) -> bool:
    """Whether a trainer.optimizer_config mapping is in the flat form of earlier releases."""
    lr = values.get("learning_rate")
    return any(k in values for k in FLAT_KEYS) or (lr is not None and not isinstance(lr, Mapping))


def upgrade_flat(
    values: Mapping[str, Any], source: str, current: OptimizationConfig | None = None
) -> Mapping[str, Any]:
    """Convert the flat form to the one-of form (same behaviour), warning with the new keys.

    Args:
      values: a trainer.optimizer_config mapping; returned as it is unless in the flat form.
      source: where it came from (errors and the warning name it).
      current: the config being overridden: keys the flat mapping leaves out keep its values.

    Returns:
      The mapping in the one-of form.

    Raises:
      UserInputError: a flat key the optimizer type does not take, or an unknown schedule.
    """
    if not isinstance(values, Mapping) or not is_flat(values):
        return values
    current = current or OptimizationConfig()
    flat = dict(values)
    kind = str(flat.pop("type", None) or current.optimizer.type or "adam").lower()
    new: dict[str, Any] = {"optimizer": _flat_optimizer(flat, kind, source, current)}
    lr = flat.pop("learning_rate", None)
    warmup = flat.pop("warmup_steps", None)
    learning_rate = _flat_learning_rate(
        flat.pop("learning_rate_schedule", None), lr, warmup, source, current
    )
    if learning_rate is not None:
        new["learning_rate"] = learning_rate
    if warmup is not None:
        new["warmup"] = (
            {"type": "linear", "linear": {"warmup_steps": int(warmup), "warmup_learning_rate": 0.0}}
            if int(warmup) > 0
            else {"type": None}
        )
    new.update(flat)  # one-of keys given beside the flat ones (checked by the caller)
    log.warning(
        "%s: the flat %s form (type, learning_rate: <number>, learning_rate_schedule, "
        "warmup_steps, momentum, weight_decay, clipnorm, global_clipnorm) is deprecated and will "
        "be removed in the next release; write it as %s.optimizer.type / .optimizer.<type>.*, "
        ".learning_rate.type / .learning_rate.<type>.*, .warmup.type / .warmup.<type>.*: %s",
        source,
        PREFIX,
        PREFIX,
        new,
    )
    return new


def _flat_optimizer(
    flat: dict[str, Any], kind: str, source: str, current: OptimizationConfig
) -> dict[str, Any]:
    """The one-of `optimizer` of the flat keys (momentum, weight_decay, clipnorms: taken out)."""
    block: dict[str, Any] = {}
    momentum = flat.pop("momentum", None)
    if momentum is not None:
        if kind not in FLAT_MOMENTUM_TYPES:
            raise UserInputError(
                source,
                f"{PREFIX}.momentum: not an option of {kind} ({', '.join(FLAT_MOMENTUM_TYPES)} "
                "only)",
            )
        block["momentum"] = momentum
    weight_decay = flat.pop("weight_decay", None)
    if weight_decay is not None:
        if kind not in FLAT_WEIGHT_DECAY_TYPES:
            raise UserInputError(
                source,
                f"{PREFIX}.weight_decay: {kind} takes no weight decay; use "
                f"{PREFIX}.optimizer.type: adamw with adamw.weight_decay_rate",
            )
        block["weight_decay_rate"] = weight_decay
    if kind == "adamw" and current.optimizer.type != "adamw":
        block["gradient_clip_norm"] = 0.0  # the flat form did not clip by default
    for name in ("clipnorm", "global_clipnorm"):
        if flat.get(name) is not None:
            block[name] = flat[name]
        flat.pop(name, None)
    return {"type": kind, kind: block}


def _flat_learning_rate(
    schedule: Any, lr: Any, warmup: Any, source: str, current: OptimizationConfig
) -> dict[str, Any] | None:
    """The one-of `learning_rate` of the flat schedule and rate (None: neither given)."""
    if schedule is not None:
        schedule = str(schedule).lower()
        base = float(lr) if lr is not None else 0.001
        if schedule == "constant":
            return {"type": "constant", "constant": {"learning_rate": base}}
        if schedule == "cosine":  # decays over trainer.train_steps - warmup, after the warm-up
            return {
                "type": "cosine",
                "cosine": {
                    "initial_learning_rate": base,
                    "offset": int(warmup or 0),
                    "decay_steps": None,
                },
            }
        raise UserInputError(
            source,
            f"{PREFIX}.learning_rate_schedule: expected constant or cosine, got {schedule!r}",
        )
    if lr is None:
        return None
    rescaled = current.with_base_learning_rate(float(lr)).learning_rate
    return {
        "type": rescaled.type,
        rescaled.type: dataclasses.asdict(getattr(rescaled, rescaled.type)),
    }


@dataclasses.dataclass
class OptimizerConfig:
    """Deprecated: the flat optimizer config of earlier releases. Use `OptimizationConfig`.

    Still accepted as `TrainerConfig(optimizer_config=OptimizerConfig(...))` (converted, with a
    deprecation warning) for one release.
    """

    type: str = "adam"
    learning_rate: float = 0.001
    learning_rate_schedule: str = "constant"
    warmup_steps: int = 0
    momentum: float | None = None
    weight_decay: float | None = None
    clipnorm: float | None = None
    global_clipnorm: float | None = None

    def as_one_of(self) -> Mapping[str, Any]:
        """The same settings as a mapping in the one-of form (for `config.override`)."""
        values = {k: v for k, v in dataclasses.asdict(self).items() if v is not None}
        return upgrade_flat(values, "OptimizerConfig(...)")
