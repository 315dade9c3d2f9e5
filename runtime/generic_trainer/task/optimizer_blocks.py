"""The blocks of `trainer.optimizer_config`'s one-ofs, as Model Garden names them (no TensorFlow
here).

One dataclass per optimizer, learning-rate schedule and warm-up, and the one-of holders that pick
one by `type` (`OptimizerTypeConfig`, `LearningRateConfig`, `WarmupConfig`), plus `EMAConfig`. Field
names and defaults follow Model Garden's `official/modeling/optimization/configs`; a field's `_rule`
says what `optimization_checks.check_block` requires of it.
"""

from __future__ import annotations

import dataclasses
from typing import Any


def _rule(default: Any = None, *, required: str | None = None, minimum: int | None = None) -> Any:
    """A field whose value `check` reads a rule from: `required` (what to set) when the block is
    chosen,
    `minimum` (1: a positive integer, 0: 0 or more) when it is set."""
    metadata = {k: v for k, v in (("required", required), ("minimum", minimum)) if v is not None}
    return dataclasses.field(default=default, metadata=metadata)


_NEED = "a value"

# ---- optimizers ------------------------------------------------------------------------------


@dataclasses.dataclass
class BaseOptimizerConfig:
    """Gradient clipping every optimizer takes (at most one of them)."""

    clipnorm: float | None = None
    clipvalue: float | None = None
    global_clipnorm: float | None = None


@dataclasses.dataclass
class SGDConfig(BaseOptimizerConfig):
    name: str = "SGD"
    decay: float = 0.0  # refused when non-zero (use a learning_rate schedule)
    nesterov: bool = False
    momentum: float = 0.0


@dataclasses.dataclass
class SGDExperimentalConfig(BaseOptimizerConfig):
    name: str = "SGD"
    nesterov: bool = False
    momentum: float = 0.0
    jit_compile: bool = False


@dataclasses.dataclass
class AdamConfig(BaseOptimizerConfig):
    name: str = "Adam"
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-07
    amsgrad: bool = False


@dataclasses.dataclass
class AdamExperimentalConfig(AdamConfig):
    jit_compile: bool = False


@dataclasses.dataclass
class AdamWeightDecayConfig(BaseOptimizerConfig):
    """Adam with decoupled weight decay (`var -= lr * weight_decay_rate * var`) on the variables
    chosen by regex."""

    name: str = "AdamWeightDecay"
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-07
    amsgrad: bool = False
    weight_decay_rate: float = 0.0
    include_in_weight_decay: list[str] | None = None  # regexes (re.search on the variable path)
    exclude_from_weight_decay: list[str] | None = None
    gradient_clip_norm: float = (
        1.0  # Model Garden's default: the global gradient norm is clipped to 1.0
    )


@dataclasses.dataclass
class AdamWeightDecayExperimentalConfig(BaseOptimizerConfig):
    name: str = "AdamWeightDecayExperimental"
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-07
    amsgrad: bool = False
    weight_decay: float = 0.0
    global_clipnorm: float | None = 1.0
    jit_compile: bool = False


@dataclasses.dataclass
class LAMBConfig(BaseOptimizerConfig):
    name: str = "LAMB"
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-6
    weight_decay_rate: float = 0.0
    exclude_from_weight_decay: list[str] | None = None
    exclude_from_layer_adaptation: list[str] | None = None


@dataclasses.dataclass
class RMSPropConfig(BaseOptimizerConfig):
    name: str = "RMSprop"
    rho: float = 0.9
    momentum: float = 0.0
    epsilon: float = 1e-7
    centered: bool = False


@dataclasses.dataclass
class LARSConfig(BaseOptimizerConfig):
    name: str = "LARS"
    momentum: float = 0.9
    eeta: float = 0.001
    weight_decay_rate: float = 0.0
    nesterov: bool = False
    classic_momentum: bool = True
    exclude_from_weight_decay: list[str] | None = None
    exclude_from_layer_adaptation: list[str] | None = (
        None  # None: the same as exclude_from_weight_decay
    )


@dataclasses.dataclass
class AdagradConfig(BaseOptimizerConfig):
    name: str = "Adagrad"
    initial_accumulator_value: float = 0.1
    epsilon: float = 1e-07


@dataclasses.dataclass
class OptimizerTypeConfig:
    """`optimizer`: `type` names the block in use."""

    type: str | None = "adam"
    sgd: SGDConfig = dataclasses.field(default_factory=SGDConfig)
    sgd_experimental: SGDExperimentalConfig = dataclasses.field(
        default_factory=SGDExperimentalConfig
    )
    adam: AdamConfig = dataclasses.field(default_factory=AdamConfig)
    adam_experimental: AdamExperimentalConfig = dataclasses.field(
        default_factory=AdamExperimentalConfig
    )
    adamw: AdamWeightDecayConfig = dataclasses.field(default_factory=AdamWeightDecayConfig)
    adamw_experimental: AdamWeightDecayExperimentalConfig = dataclasses.field(
        default_factory=AdamWeightDecayExperimentalConfig
    )
    lamb: LAMBConfig = dataclasses.field(default_factory=LAMBConfig)
    rmsprop: RMSPropConfig = dataclasses.field(default_factory=RMSPropConfig)
    lars: LARSConfig = dataclasses.field(default_factory=LARSConfig)
    adagrad: AdagradConfig = dataclasses.field(default_factory=AdagradConfig)


# ---- learning rate schedules -------------------------------------------------------------------


@dataclasses.dataclass
class ConstantLrConfig:
    name: str = "Constant"
    learning_rate: float = 0.1


@dataclasses.dataclass
class StepwiseLrConfig:
    """values[0] up to and including step boundaries[0], values[1] up to boundaries[1], ..."""

    name: str = "PiecewiseConstantDecay"
    boundaries: list[int] | None = _rule(required="boundaries (steps) and values")
    values: list[float] | None = _rule(required="boundaries (steps) and values")
    offset: int = 0


@dataclasses.dataclass
class ExponentialLrConfig:
    """initial_learning_rate * decay_rate ** ((step - offset) / decay_steps) (floored when
    staircase)."""

    name: str = "ExponentialDecay"
    initial_learning_rate: float | None = _rule(required=_NEED)
    decay_steps: int | None = _rule(required=_NEED, minimum=1)
    decay_rate: float | None = _rule(required=_NEED)
    staircase: bool | None = None
    offset: int = 0


@dataclasses.dataclass
class PolynomialLrConfig:
    """(initial - end) * (1 - min(step - offset, decay_steps) / decay_steps) ** power + end."""

    name: str = "PolynomialDecay"
    initial_learning_rate: float | None = _rule(required=_NEED)
    decay_steps: int | None = _rule(minimum=1)  # None here: trainer.train_steps - offset
    end_learning_rate: float = 0.0001
    power: float = 1.0
    cycle: bool = False
    offset: int = 0


@dataclasses.dataclass
class CosineLrConfig:
    """initial * ((1 - alpha) * 0.5 * (1 + cos(pi * min(step - offset, decay_steps) / decay_steps))
    + alpha)."""

    name: str = "CosineDecay"
    initial_learning_rate: float | None = _rule(required=_NEED)
    decay_steps: int | None = _rule(minimum=1)  # None here: trainer.train_steps - offset
    alpha: float = 0.0
    offset: int = 0


@dataclasses.dataclass
class DirectPowerLrConfig:
    """initial_learning_rate * max(step, 1) ** power."""

    name: str = "DirectPowerDecay"
    initial_learning_rate: float | None = _rule(required=_NEED)
    power: float = -0.5


@dataclasses.dataclass
class LearningRateConfig:
    """`learning_rate`: `type` names the schedule in use."""

    type: str | None = "constant"
    constant: ConstantLrConfig = dataclasses.field(default_factory=ConstantLrConfig)
    stepwise: StepwiseLrConfig = dataclasses.field(default_factory=StepwiseLrConfig)
    exponential: ExponentialLrConfig = dataclasses.field(default_factory=ExponentialLrConfig)
    polynomial: PolynomialLrConfig = dataclasses.field(default_factory=PolynomialLrConfig)
    cosine: CosineLrConfig = dataclasses.field(default_factory=CosineLrConfig)
    power: DirectPowerLrConfig = dataclasses.field(default_factory=DirectPowerLrConfig)


@dataclasses.dataclass
class LinearWarmupConfig:
    """warmup_learning_rate + step / warmup_steps * (schedule(warmup_steps) -
    warmup_learning_rate)."""

    name: str = "linear"
    warmup_learning_rate: float = 0.0
    warmup_steps: int | None = _rule(required=_NEED, minimum=0)


@dataclasses.dataclass
class PolynomialWarmupConfig:
    """schedule(warmup_steps) * (max(step, 1) / warmup_steps) ** power."""

    name: str = "polynomial"
    power: float = 1.0
    warmup_steps: int | None = _rule(required=_NEED, minimum=0)


@dataclasses.dataclass
class WarmupConfig:
    """`warmup`: `type` names the warm-up in use (None: no warm-up)."""

    type: str | None = None
    linear: LinearWarmupConfig = dataclasses.field(default_factory=LinearWarmupConfig)
    polynomial: PolynomialWarmupConfig = dataclasses.field(default_factory=PolynomialWarmupConfig)


@dataclasses.dataclass
class EMAConfig:
    """Exponential moving average of the weights; the averages are what is validated and
    exported."""

    name: str = "ExponentialMovingAverage"
    trainable_weights_only: bool = True
    average_decay: float = 0.99
    start_step: int = 0
    dynamic_decay: bool = (
        True  # decay = min(average_decay, (1 + t) / (10 + t)), t = step - start_step
    )
