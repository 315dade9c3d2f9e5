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
    """(weight-decay, layer-adaptation) exclusion regexes; the second defaults to the first."""
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


def _norm(x):
    """The L2 norm of a tensor's values."""
    import keras

    return keras.ops.norm(keras.ops.reshape(x, [-1]))


def _decayed(optimizer: Any, variable: Any, value):
    """`value + weight_decay_rate * variable`, unless the variable is excluded from the decay."""
    if optimizer.weight_decay_rate and not matches(
        variable, optimizer.exclude_from_weight_decay_patterns
    ):
        return value + optimizer.weight_decay_rate * variable
    return value


def _config(optimizer: Any, config: dict[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """A layer-wise optimizer's get_config: the base's, its `names`, and its exclusion lists."""
    config.update({name: getattr(optimizer, name) for name in names})
    config["exclude_from_weight_decay"] = optimizer.exclude_from_weight_decay_patterns
    config["exclude_from_layer_adaptation"] = optimizer.exclude_from_layer_adaptation_patterns
    return config


def _lamb_update(optimizer: Any, variable: Any, gradient, m, v, t):
    """LAMB's step at step `t`: the moments `m`, `v` updated; (the trust ratio, the update)."""
    import keras

    ops = keras.ops
    optimizer.assign(m, optimizer.beta_1 * m + (1.0 - optimizer.beta_1) * gradient)
    optimizer.assign(v, optimizer.beta_2 * v + (1.0 - optimizer.beta_2) * ops.square(gradient))
    m_hat = m / (1.0 - ops.power(optimizer.beta_1, t))
    v_hat = v / (1.0 - ops.power(optimizer.beta_2, t))
    update = _decayed(optimizer, variable, m_hat / (ops.sqrt(v_hat) + optimizer.epsilon))
    if matches(variable, optimizer.exclude_from_layer_adaptation_patterns):
        return 1.0, update
    w_norm = _norm(variable)
    return _trust_ratio(w_norm, w_norm, _norm(update)), update


def _lars_step(optimizer: Any, velocity, grad, variable: Any, lr):
    """LARS's step: (the next velocity, what to subtract from the variable)."""
    adapt = not matches(variable, optimizer.exclude_from_layer_adaptation_patterns)
    w_norm = _norm(variable)

    def trust(other):
        return _trust_ratio(optimizer.eeta * w_norm, w_norm, _norm(other)) if adapt else 1.0

    momentum, nesterov = optimizer.momentum, optimizer.nesterov
    if optimizer.classic_momentum:
        scaled_lr = lr * trust(grad)
        next_v = momentum * velocity + scaled_lr * grad
        return next_v, momentum * next_v + scaled_lr * grad if nesterov else next_v
    next_v = momentum * velocity + grad
    update = momentum * next_v + grad if nesterov else next_v
    return next_v, trust(update) * lr * update


def _make_lamb() -> type:
    """The LAMB optimizer class (Keras is imported here)."""
    import keras

    ops = keras.ops

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
            ratio, update = _lamb_update(self, variable, gradient, self.m[index], self.v[index], t)
            self.assign_sub(variable, ratio * lr * update)

        def get_config(self):
            names = ("beta_1", "beta_2", "epsilon", "weight_decay_rate")
            return _config(self, super().get_config(), names)

    return LAMB


def _make_lars() -> type:
    """The LARS optimizer class (Keras is imported here)."""
    import keras

    ops = keras.ops

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
            grad = _decayed(self, variable, ops.cast(gradient, variable.dtype))
            velocity = self.velocities[self._get_variable_index(variable)]
            next_v, delta = _lars_step(self, velocity, grad, variable, lr)
            self.assign(velocity, next_v)
            self.assign_sub(variable, delta)

        def get_config(self):
            names = ("momentum", "eeta", "weight_decay_rate", "nesterov", "classic_momentum")
            return _config(self, super().get_config(), names)

    return LARS


def _make_adamw() -> type:
    import keras

    class AdamWeightDecay(keras.optimizers.AdamW):
        """Keras AdamW whose decayed variables Model Garden's include/exclude regexes choose."""

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
    """Model Garden's AdamWeightDecay rule: an `include` match decays; an `exclude` match not."""
    if include and matches(variable, include):
        return True
    return not (exclude and matches(variable, exclude))


_CLASSES: dict[str, type] = {}


def classes() -> dict[str, type]:
    """`lamb`, `lars` and `adamw` (regex-aware AdamW) optimizer classes."""
    if not _CLASSES:
        _CLASSES.update({"lamb": _make_lamb(), "lars": _make_lars(), "adamw": _make_adamw()})
    return _CLASSES
