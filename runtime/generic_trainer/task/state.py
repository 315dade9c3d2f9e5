"""What one Task run trains and checkpoints, built once inside the strategy scope.

`TaskState` holds the Task's model (built under `runtime.mixed_precision_dtype` and
`runtime.seed`), its optimizer (only when the run trains), the train and eval loss and metrics
(made in the strategy scope, so reading a result sums the metric state over every replica of every
worker), the EMA of the weights (`trainer.optimizer_config.ema`, `ema.py`), the global step and
the `tf.train.Checkpoint` over them. The inner loops (`train_loop.py`, `eval_loop.py`) step it;
the controller (`controller.py`) restores and saves it.

`call_user` is how every part of the loop calls a Task method: an exception there becomes a
UserCodeError naming the method.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

from generic_trainer.errors import UserCodeError
from generic_trainer.fit import user_code
from generic_trainer.task import ema
from generic_trainer.task.base import Task
from generic_trainer.task.config import DataConfig, ExperimentConfig

log = logging.getLogger("generic_trainer.task")

MIXED_DTYPES = ("float16", "bfloat16", "mixed_float16", "mixed_bfloat16")


def call_user(task: Task, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call the Task method `fn` (named `name`), turning its exceptions into a UserCodeError naming
    it."""
    return user_code.call(fn, *args, what=f"{type(task).__name__}.{name}", **kwargs)


def format_logs(logs: dict[str, float]) -> str:
    """`loss=0.1234 mae=0.5` (for progress lines)."""
    return " ".join(f"{k}={v:.4g}" for k, v in logs.items())


def host_logs(results: dict[str, Any]) -> dict[str, float]:
    """Metric results as floats; non-scalar results (e.g. per-class) are left to summaries."""
    logs = {}
    for k, v in results.items():
        try:
            logs[k] = float(v)
        except (TypeError, ValueError):
            continue
    return logs


class TaskState:
    """The model, optimizer, metrics, EMA and global step of a run, and the checkpoint over them.

    Args:
      task: the Task whose `build_*` methods make the objects.
      experiment: the resolved experiment config (`runtime` for precision and seed,
        `trainer.optimizer_config.ema` for the EMA).
      strategy: the tf.distribute strategy; the objects are made in its scope.
      training: whether the run trains (an optimizer is built, and the model must have
        trainable variables).
    """

    def __init__(self, task: Task, experiment: ExperimentConfig, strategy: Any, training: bool):
        import keras
        import tensorflow as tf

        self.task, self.experiment, self.strategy, self.training = (
            task,
            experiment,
            strategy,
            training,
        )
        with strategy.scope():
            self.model = self._build_model()
            self.optimizer = None
            if training:
                self.optimizer = self.call("build_optimizer", task.build_optimizer)
                self.optimizer.build(
                    self.model.trainable_variables
                )  # before the first step (multi-replica)
            self.global_step = tf.Variable(
                0,
                dtype=tf.int64,
                trainable=False,
                name="global_step",
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
            )
            self.train_loss = keras.metrics.Mean(name=task.loss_key)
            self.eval_loss = keras.metrics.Mean(name=task.loss_key)
            self.train_metrics = list(
                self.call("build_metrics", task.build_metrics, training=True) or []
            )
            self.eval_metrics = list(
                self.call("build_metrics", task.build_metrics, training=False) or []
            )
            ema_config = getattr(experiment.trainer.optimizer_config, "ema", None)
            self.ema = ema.WeightAverage(self.model, ema_config) if ema_config is not None else None
        objects = {"model": self.model, "global_step": self.global_step}
        if self.optimizer is not None:
            objects["optimizer"] = self.optimizer
        if self.ema is not None:
            objects["ema"] = self.ema.trackable
        self.checkpoint = tf.train.Checkpoint(**objects)

    def call(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """`call_user` for this state's Task."""
        return call_user(self.task, name, fn, *args, **kwargs)

    def _build_model(self) -> Any:
        import keras

        runtime, task = self.experiment.runtime, self.task
        if runtime.seed is not None:
            keras.utils.set_random_seed(runtime.seed)
        policy = keras.mixed_precision.global_policy()
        dtype = runtime.mixed_precision_dtype
        if dtype in MIXED_DTYPES:
            keras.mixed_precision.set_global_policy(
                dtype if dtype.startswith("mixed_") else f"mixed_{dtype}"
            )
        try:
            model = self.call("build_model", task.build_model)
        finally:
            keras.mixed_precision.set_global_policy(policy)
        if model is None:
            raise UserCodeError(
                f"{type(task).__name__}.build_model returned None; return a Keras model"
            )
        if dtype in MIXED_DTYPES:
            applied = getattr(getattr(model, "dtype_policy", None), "name", "?")
            log.info(
                "mixed precision: runtime.mixed_precision_dtype=%s, the model was built with the "
                "%s policy (compute %s, variables %s)",
                dtype,
                applied,
                getattr(model, "compute_dtype", "?"),
                getattr(model, "variable_dtype", "?"),
            )
        if not getattr(model, "built", True) or (self.training and not model.trainable_variables):
            raise UserCodeError(
                f"{type(task).__name__}.build_model returned a model without variables: return a "
                "built model (a functional model, or call model.build(...) / the model once on "
                "example inputs)"
            )
        return model

    @property
    def step(self) -> int:
        """The global step (optimizer updates so far) as a Python int."""
        return int(self.global_step.numpy())

    def start_ema(self) -> None:
        """Start the EMA from the current weights (after a restore), unless the checkpoint held
        averages."""
        if self.ema is not None and self.ema.start():
            log.info(
                "EMA of the weights (average_decay=%g, %s weights) starts from the current weights",
                self.ema.config.average_decay,
                "trainable" if self.ema.config.trainable_weights_only else "all",
            )

    def averaged_weights(self) -> contextlib.AbstractContextManager:
        """A context in which the model holds the EMA weights (a no-op without
        trainer.optimizer_config.ema)."""
        return self.ema.swapped() if self.ema is not None else contextlib.nullcontext()

    def learning_rate(self) -> float | None:
        """The optimizer's current learning rate, when it has one to read."""
        try:
            return float(self.optimizer.learning_rate)
        except Exception:
            return None

    def distributed_inputs(self, data_config: DataConfig, whole_pass: bool = False) -> Any:
        """`Task.build_inputs` for every input pipeline, as a distributed dataset.

        `whole_pass`: the data is read once to its end (validation with validation_steps -1), so a
        dataset that repeats forever is refused.
        """
        import tensorflow as tf

        task = self.task

        def dataset_fn(input_context):
            dataset = self.call("build_inputs", task.build_inputs, data_config, input_context)
            if dataset is None:
                raise UserCodeError(
                    f"{type(task).__name__}.build_inputs returned None; return a tf.data.Dataset"
                )
            if whole_pass and dataset.cardinality() == tf.data.INFINITE_CARDINALITY:
                raise UserCodeError(
                    f"{type(task).__name__}.build_inputs repeats the validation data forever, and "
                    "trainer.validation_steps is -1 (one whole pass): do not repeat validation "
                    "data (params.is_training is False), or set trainer.validation_steps"
                )
            return dataset

        return self.strategy.distribute_datasets_from_function(dataset_fn)

    def function(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """`fn` as a tf.function, or as is under `runtime.run_eagerly`."""
        if self.experiment.runtime.run_eagerly:
            return fn
        import tensorflow as tf

        return tf.function(fn)
