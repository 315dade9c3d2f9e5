"""Layer-wise adaptive optimizers on Keras 3 with Model Garden's semantics: LAMB and LARS.

LAMB (as tensorflow_addons'): Adam's bias-corrected update `r = m_hat / (sqrt(v_hat) + epsilon)`,
plus `weight_decay_rate * w` for decayed variables, scaled by the trust ratio `||w|| / ||r||`
(1 when either norm is 0 or the variable is excluded from layer adaptation):
`w -= lr * ratio * r`.

LARS (as Model Garden's `lars_optimizer`): with classic momentum,
`g += weight_decay_rate * w`; `v = momentum * v + lr * trust * g` with `trust = eeta * ||w|| /
||g||`; `w -= v` (or `momentum * v + lr * trust * g` with nesterov). With popular momentum the trust
ratio scales the momentum update instead.

Exclusion lists are regexes searched in the variable's path (`dense/kernel`, also tried as
`dense/kernel:0`, the TF2 name Model Garden's patterns were written for).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any


def exclusion_patterns(
    weight_decay: list[str] | None,
    layer_adaptation: list[str] | None,
) -> tuple[list[str], list[str]]:
    """(weight-decay, layer-adaptation) exclusion regexes; layer adaptation defaults to the
    weight-decay ones."""
    weight_decay = list(weight_decay or [])
    return weight_decay, list(layer_adaptation) if layer_adaptation is not None else weight_decay


def matches(variable: Any, patterns: Sequence[str] | None) -> bool:
    """Whether any regex in `patterns` is found in the variable's path (or `path:0`)."""
    path = getattr(variable, "path", None) or getattr(variable, "name", "")
    return any(re.search(p, path) or re.search(p, f"{path}:0") for p in patterns or ())


def _trust_ratio(numerator, w_norm, other_norm):
    """numerator / other_norm, or 1 when either norm is 0."""
    import keras

    ops = keras.ops
    ratio = ops.where(ops.greater(other_norm, 0.0), numerator / other_norm, 1.0)
    return ops.where(ops.greater(w_norm, 0.0), ratio, 1.0)


def _make_lamb() -> type:
    import keras

    ops = keras.ops
    trust_ratio = _trust_ratio

    class LAMB(keras.optimizers.Optimizer):
        """LAMB (Layer-wise Adaptive Moments for Batch training), tensorflow_addons' formula."""

        def __init__(
            self,
            learning_rate=0.001,
            beta_1=0.9,
            beta_2=0.999,
            epsilon=1e-6,
            weight_decay_rate=0.0,
            exclude_from_weight_decay=None,
            exclude_from_layer_adaptation=None,
            name="LAMB",
            **kwargs,
        ):
            super().__init__(learning_rate=learning_rate, name=name, **kwargs)
            self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon
            self.weight_decay_rate = weight_decay_rate
            self.exclude_from_weight_decay_patterns, self.exclude_from_layer_adaptation_patterns = (
                exclusion_patterns(exclude_from_weight_decay, exclude_from_layer_adaptation)
            )

        def build(self, var_list):
            if self.built:
                return
            super().build(var_list)
            self.m = [self.add_variable_from_reference(v, "m") for v in var_list]
            self.v = [self.add_variable_from_reference(v, "v") for v in var_list]

        def update_step(self, gradient, variable, learning_rate):
            lr = ops.cast(learning_rate, variable.dtype)
            gradient = ops.cast(gradient, variable.dtype)
            t = ops.cast(self.iterations + 1, variable.dtype)
            index = self._get_variable_index(variable)
            m, v = self.m[index], self.v[index]
            self.assign(m, self.beta_1 * m + (1.0 - self.beta_1) * gradient)
            self.assign(v, self.beta_2 * v + (1.0 - self.beta_2) * ops.square(gradient))
            m_hat = m / (1.0 - ops.power(self.beta_1, t))
            v_hat = v / (1.0 - ops.power(self.beta_2, t))
            update = m_hat / (ops.sqrt(v_hat) + self.epsilon)
            if self.weight_decay_rate and not matches(
                variable, self.exclude_from_weight_decay_patterns
            ):
                update = update + self.weight_decay_rate * variable
            ratio = 1.0
            if not matches(variable, self.exclude_from_layer_adaptation_patterns):
                w_norm, u_norm = (
                    ops.norm(ops.reshape(variable, [-1])),
                    ops.norm(ops.reshape(update, [-1])),
                )
                ratio = trust_ratio(w_norm, w_norm, u_norm)
            self.assign_sub(variable, ratio * lr * update)

        def get_config(self):
            config = super().get_config()
            config.update(
                {
                    "beta_1": self.beta_1,
                    "beta_2": self.beta_2,
                    "epsilon": self.epsilon,
                    "weight_decay_rate": self.weight_decay_rate,
                    "exclude_from_weight_decay": self.exclude_from_weight_decay_patterns,
                    "exclude_from_layer_adaptation": self.exclude_from_layer_adaptation_patterns,
                }
            )
            return config

    return LAMB


def _make_lars() -> type:
    import keras

    ops = keras.ops
    trust_ratio = _trust_ratio

    class LARS(keras.optimizers.Optimizer):
        """LARS (Layer-wise Adaptive Rate Scaling), Model Garden's formula."""

        def __init__(
            self,
            learning_rate=0.001,
            momentum=0.9,
            eeta=0.001,
            weight_decay_rate=0.0,
            nesterov=False,
            classic_momentum=True,
            exclude_from_weight_decay=None,
            exclude_from_layer_adaptation=None,
            name="LARS",
            **kwargs,
        ):
            super().__init__(learning_rate=learning_rate, name=name, **kwargs)
            self.momentum, self.eeta, self.weight_decay_rate = momentum, eeta, weight_decay_rate
            self.nesterov, self.classic_momentum = nesterov, classic_momentum
            self.exclude_from_weight_decay_patterns, self.exclude_from_layer_adaptation_patterns = (
                exclusion_patterns(exclude_from_weight_decay, exclude_from_layer_adaptation)
            )

        def build(self, var_list):
            if self.built:
                return
            super().build(var_list)
            self.velocities = [self.add_variable_from_reference(v, "momentum") for v in var_list]

        def update_step(self, gradient, variable, learning_rate):
            lr = ops.cast(learning_rate, variable.dtype)
            grad = ops.cast(gradient, variable.dtype)
            velocity = self.velocities[self._get_variable_index(variable)]
            if self.weight_decay_rate and not matches(
                variable, self.exclude_from_weight_decay_patterns
            ):
                grad = grad + self.weight_decay_rate * variable
            adapt = not matches(variable, self.exclude_from_layer_adaptation_patterns)
            w_norm = ops.norm(ops.reshape(variable, [-1]))
            if self.classic_momentum:
                trust = (
                    trust_ratio(self.eeta * w_norm, w_norm, ops.norm(ops.reshape(grad, [-1])))
                    if adapt
                    else 1.0
                )
                scaled_lr = lr * trust
                next_v = self.momentum * velocity + scaled_lr * grad
                update = self.momentum * next_v + scaled_lr * grad if self.nesterov else next_v
                self.assign(velocity, next_v)
                self.assign_sub(variable, update)
            else:
                next_v = self.momentum * velocity + grad
                update = self.momentum * next_v + grad if self.nesterov else next_v
                trust = (
                    trust_ratio(self.eeta * w_norm, w_norm, ops.norm(ops.reshape(update, [-1])))
                    if adapt
                    else 1.0
                )
                self.assign(velocity, next_v)
                self.assign_sub(variable, trust * lr * update)

        def get_config(self):
            config = super().get_config()
            config.update(
                {
                    "momentum": self.momentum,
                    "eeta": self.eeta,
                    "weight_decay_rate": self.weight_decay_rate,
                    "nesterov": self.nesterov,
                    "classic_momentum": self.classic_momentum,
                    "exclude_from_weight_decay": self.exclude_from_weight_decay_patterns,
                    "exclude_from_layer_adaptation": self.exclude_from_layer_adaptation_patterns,
                }
            )
            return config

    return LARS


def _make_adamw() -> type:
    import keras

    class AdamWeightDecay(keras.optimizers.AdamW):
        """Keras AdamW whose decayed variables are chosen by Model Garden's include/exclude
        regexes."""

        def __init__(self, include_in_weight_decay=None, exclude_from_weight_decay=None, **kwargs):
            super().__init__(**kwargs)
            self.include_patterns = list(include_in_weight_decay or [])
            self.exclude_patterns = list(exclude_from_weight_decay or [])

        def build(self, var_list):
            if self.built:
                return
            if self.include_patterns or self.exclude_patterns:
                skipped = [
                    v
                    for v in var_list
                    if not decays(v, self.include_patterns, self.exclude_patterns)
                ]
                if skipped:
                    self.exclude_from_weight_decay(var_list=skipped)
            super().build(var_list)

    return AdamWeightDecay


def decays(variable: Any, include: Sequence[str] | None, exclude: Sequence[str] | None) -> bool:
    """Model Garden's AdamWeightDecay rule: an `include` match decays; else an `exclude` match does
    not."""
    if include and matches(variable, include):
        return True
    return not (exclude and matches(variable, exclude))


_CLASSES: dict[str, type] = {}


def classes() -> dict[str, type]:
    """`lamb`, `lars` and `adamw` (regex-aware AdamW) optimizer classes."""
    if not _CLASSES:
        _CLASSES.update({"lamb": _make_lamb(), "lars": _make_lars(), "adamw": _make_adamw()})
    return _CLASSES
