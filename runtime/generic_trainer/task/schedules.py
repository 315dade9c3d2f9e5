"""Learning-rate schedules and warm-ups of `trainer.optimizer_config` as Keras 3 schedules.

The formulas are Model Garden's (`official/modeling/optimization/lr_schedule.py`, which wraps
the Keras schedules with a step `offset`): the step a schedule sees is the number of optimizer
updates done so far. A warm-up ramps to the schedule's own value at `warmup_steps`, then hands
over to the schedule:

    linear:     warmup_learning_rate
                + step / warmup_steps * (schedule(warmup_steps) - warmup_learning_rate)
    polynomial: schedule(warmup_steps) * (max(step, 1) / warmup_steps) ** power

A `cosine` or `polynomial` schedule without `decay_steps` decays over `trainer.train_steps -
offset`.
"""

from __future__ import annotations

import math
from typing import Any

from generic_trainer.task.optimization_config import OptimizationConfig, one_of

PREFIX = "trainer.optimizer_config"


def _keras_schedule_base():
    import keras

    return keras.optimizers.schedules.LearningRateSchedule


def _float(step: Any) -> Any:
    import keras

    return keras.ops.cast(step, "float32")


def _make_classes() -> dict[str, type]:
    """The schedule classes, made on first use (they subclass a Keras class; Keras loads lazily)."""
    import keras

    base = _keras_schedule_base()
    return {**_decay_classes(base), "warmup": _warmup_class(base, keras.ops)}


def _stepwise(p: dict[str, Any], step: Any) -> Any:
    """Piecewise constant: `values[i]` once the step passed `boundaries[i - 1]`."""
    import keras

    ops = keras.ops
    s = _float(step) - p["offset"]
    boundaries = ops.convert_to_tensor([float(b) for b in p["boundaries"]], "float32")
    index = ops.sum(ops.cast(ops.greater(s, boundaries), "int32"))
    return ops.take(ops.convert_to_tensor([float(v) for v in p["values"]], "float32"), index)


def _exponential(p: dict[str, Any], step: Any) -> Any:
    """`initial_learning_rate * decay_rate ** (step / decay_steps)` (floored with staircase)."""
    import keras

    ops = keras.ops
    exponent = (_float(step) - p["offset"]) / float(p["decay_steps"])
    if p["staircase"]:
        exponent = ops.floor(exponent)
    return p["initial_learning_rate"] * ops.power(float(p["decay_rate"]), exponent)


def _polynomial(p: dict[str, Any], step: Any) -> Any:
    """From `initial_learning_rate` to `end_learning_rate` over decay_steps (or cycles of it)."""
    import keras

    ops = keras.ops
    s = _float(step) - p["offset"]
    decay_steps = float(p["decay_steps"])
    if p["cycle"]:
        multiplier = ops.where(ops.equal(s, 0.0), 1.0, ops.ceil(s / decay_steps))
        fraction = s / (decay_steps * multiplier)
    else:
        fraction = ops.minimum(s, decay_steps) / decay_steps
    span = p["initial_learning_rate"] - p["end_learning_rate"]
    return span * ops.power(1.0 - fraction, float(p["power"])) + p["end_learning_rate"]


def _cosine(p: dict[str, Any], step: Any) -> Any:
    """A half cosine from `initial_learning_rate` down to `alpha` times it over decay_steps."""
    import keras

    ops = keras.ops
    s = _float(step) - p["offset"]
    fraction = ops.minimum(s, float(p["decay_steps"])) / float(p["decay_steps"])
    cosine = 0.5 * (1.0 + ops.cos(math.pi * fraction))
    return p["initial_learning_rate"] * ((1.0 - p["alpha"]) * cosine + p["alpha"])


def _power(p: dict[str, Any], step: Any) -> Any:
    """`initial_learning_rate * max(step, 1) ** power`."""
    import keras

    ops = keras.ops
    return p["initial_learning_rate"] * ops.power(ops.maximum(_float(step), 1.0), float(p["power"]))


_FORMULAS = {
    "stepwise": _stepwise,
    "exponential": _exponential,
    "polynomial": _polynomial,
    "cosine": _cosine,
    "power": _power,
}


def _decay_classes(base: type) -> dict[str, type]:
    """The decay schedules by type name: a class per formula, subclassing Keras' schedule `base`."""

    class Schedule(base):
        """A schedule from a formula over the (offset) step; `get_config` returns its parameters."""

        formula: Any = None

        def __init__(self, **params: Any):
            super().__init__()
            self.params = params

        def __call__(self, step):
            return self.formula(self.params, step)

        def get_config(self) -> dict[str, Any]:
            return dict(self.params)

    return {
        name: type(name.capitalize(), (Schedule,), {"formula": staticmethod(formula)})
        for name, formula in _FORMULAS.items()
    }


def _warmup_class(base: type, ops: Any) -> type:
    """The warm-up schedule (linear or polynomial) in front of another, subclassing `base`."""

    class Warmup(base):
        """A warm-up in front of `after` (a schedule or a number); hands over at `warmup_steps`."""

        def __init__(
            self,
            kind: str,
            after: Any,
            warmup_steps: int,
            warmup_learning_rate: float = 0.0,
            power: float = 1.0,
        ):
            super().__init__()
            self.kind, self.after, self.warmup_steps = kind, after, int(warmup_steps)
            self.warmup_learning_rate, self.power = float(warmup_learning_rate), float(power)

        def _after(self, step):
            return (
                self.after(step)
                if callable(self.after)
                else ops.convert_to_tensor(float(self.after), "float32")
            )

        def __call__(self, step):
            s = _float(step)
            n = float(self.warmup_steps)
            target = self._after(n)
            if self.kind == "linear":
                ramp = self.warmup_learning_rate + s / n * (target - self.warmup_learning_rate)
            else:
                ramp = target * ops.power(ops.maximum(s, 1.0) / n, self.power)
            return ops.where(ops.less(s, n), ramp, self._after(step))

        def get_config(self) -> dict[str, Any]:
            after = self.after.get_config() if hasattr(self.after, "get_config") else self.after
            return {
                "kind": self.kind,
                "after": after,
                "warmup_steps": self.warmup_steps,
                "warmup_learning_rate": self.warmup_learning_rate,
                "power": self.power,
            }

    return Warmup


_CLASSES: dict[str, type] = {}


def classes() -> dict[str, type]:
    """The schedule classes by type name (plus `warmup`)."""
    if not _CLASSES:
        _CLASSES.update(_make_classes())
    return _CLASSES


def build_learning_rate(config: OptimizationConfig, train_steps: int = 0) -> Any:
    """The learning rate `config` describes.

    Args:
      config: the checked trainer.optimizer_config.
      train_steps: trainer.train_steps, the default decay length of cosine and polynomial.

    Returns:
      A float (constant, no warm-up) or a Keras schedule.
    """
    lr = config.learning_rate
    block = one_of(lr, lr.type, f"{PREFIX}.learning_rate")
    if lr.type == "constant":
        schedule: Any = float(block.learning_rate)
    else:
        params = {k: v for k, v in vars(block).items() if k != "name"}
        if lr.type in ("polynomial", "cosine") and params.get("decay_steps") is None:
            params["decay_steps"] = max(int(train_steps) - int(params.get("offset", 0)), 1)
        if lr.type == "exponential":
            params["staircase"] = bool(params.get("staircase"))
        schedule = classes()[lr.type](**params)
    warmup = config.warmup
    if warmup.type:
        w = one_of(warmup, warmup.type, f"{PREFIX}.warmup")
        if w.warmup_steps and w.warmup_steps > 0:
            extra = (
                {"warmup_learning_rate": w.warmup_learning_rate}
                if warmup.type == "linear"
                else {"power": w.power}
            )
            schedule = classes()["warmup"](warmup.type, schedule, w.warmup_steps, **extra)
    return schedule
