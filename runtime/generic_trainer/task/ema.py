"""Exponential moving average of a model's weights (`trainer.optimizer_config.ema`).

Model Garden's `ExponentialMovingAverage` semantics: after each optimizer update (step t, counted
from 1), `average -= (1 - decay) * (average - weight)` with

    decay = 0                                                   while t < start_step
    decay = min(average_decay, (1 + t - start_step) / (10 + t - start_step))   with dynamic_decay
    decay = average_decay                                        otherwise

over the trainable weights (or every float weight, e.g. batch-norm statistics, when
`trainable_weights_only` is false). The averages are checkpointed with the model; validation and
the serving export use them (`swapped()`), training continues on the raw weights.

One difference: the averages start from the model's weights when training starts (after the
checkpoint or `task.init_checkpoint` is restored), not from zeros.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from generic_trainer.task.optimizer_blocks import EMAConfig


def decay_at(config: EMAConfig, step: Any) -> Any:
    """The decay used by the update after step `step` (a tensor or a number; see the module
    docstring)."""
    import tensorflow as tf

    t = tf.cast(step, tf.float32) - float(config.start_step)
    if config.dynamic_decay:
        decay = tf.minimum(float(config.average_decay), (1.0 + t) / (10.0 + t))
    else:
        decay = tf.constant(float(config.average_decay))
    return tf.where(t < 0.0, 0.0, decay)


class WeightAverage:
    """Shadow copies of a model's weights, updated after each step. Create inside the strategy
    scope."""

    def __init__(self, model: Any, config: EMAConfig):
        import tensorflow as tf

        self.config = config
        source = model.trainable_variables if config.trainable_weights_only else model.variables
        self.weights = [v for v in source if "float" in str(v.dtype)]
        self.averages = [
            tf.Variable(
                tf.zeros(v.shape, dtype=_dtype(v)),
                trainable=False,
                name=f"ema_{i}",
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
            )
            for i, v in enumerate(self.weights)
        ]
        self.updates = tf.Variable(
            0,
            dtype=tf.int64,
            trainable=False,
            name="ema_updates",
            aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
        )
        self.trackable = tf.Module(name="ema")
        self.trackable.averages = self.averages
        self.trackable.updates = self.updates

    def start(self) -> bool:
        """Copy the weights into the averages unless a restored checkpoint already holds them; True
        if copied."""
        if int(self.updates.numpy()) > 0:
            return False
        for average, weight in zip(self.averages, self.weights, strict=True):
            average.assign(_read(weight))
        return True

    def update(self, step: Any) -> None:
        """Move the averages toward the weights (cross-replica context, after the step's update)."""
        import tensorflow as tf

        decay = decay_at(self.config, step)
        for average, weight in zip(self.averages, self.weights, strict=True):
            value = _read(weight)
            average.assign(average - tf.cast(1.0 - decay, average.dtype) * (average - value))
        self.updates.assign_add(1)

    def swap(self) -> None:
        """Exchange the weights and the averages (twice restores them)."""
        import tensorflow as tf

        for average, weight in zip(self.averages, self.weights, strict=True):
            raw = tf.identity(_read(weight))
            weight.assign(average.read_value())
            average.assign(raw)

    @contextlib.contextmanager
    def swapped(self) -> Iterator[None]:
        """The model holds the averages inside the block, its raw weights again after it."""
        self.swap()
        try:
            yield
        finally:
            self.swap()


def _read(variable: Any) -> Any:
    value = getattr(variable, "value", variable)
    return value.read_value() if hasattr(value, "read_value") else value


def _dtype(variable: Any) -> Any:
    import tensorflow as tf

    return tf.as_dtype(str(variable.dtype))
