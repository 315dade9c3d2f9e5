"""A small regression Task for tests (not the bundled example): features x1, x2 -> target.

Its schema, label, loss and metrics differ from the penguin example's; it uses the default
train/validation steps and the default serving export (`model.export`).
"""

from __future__ import annotations

import dataclasses

from generic_trainer.task import (
    DataConfig,
    ExperimentConfig,
    OptimizerConfig,
    Task,
    TaskConfig,
    TrainerConfig,
)

FEATURES = ("x1", "x2")
LABEL = "target"


@dataclasses.dataclass
class LinearModelConfig:
    hidden_units: int = 0  # 0: a linear model


@dataclasses.dataclass
class LinearTaskConfig(TaskConfig):
    model: LinearModelConfig = dataclasses.field(default_factory=LinearModelConfig)


class LinearTask(Task):
    config_cls = LinearTaskConfig

    @classmethod
    def default_experiment(cls) -> ExperimentConfig:
        return ExperimentConfig(
            task=LinearTaskConfig(
                train_data=DataConfig(global_batch_size=16),
                validation_data=DataConfig(
                    global_batch_size=16, is_training=False, drop_remainder=False
                ),
            ),
            trainer=TrainerConfig(
                train_steps=60,
                steps_per_loop=10,
                validation_interval=30,
                checkpoint_interval=20,
                summary_interval=10,
                optimizer_config=OptimizerConfig(type="sgd", learning_rate=0.05),
            ),
        )

    def build_inputs(self, params, input_context=None):
        return self.examples_dataset(params, input_context, label_key=LABEL)

    def build_model(self):
        import keras

        inputs = {name: keras.Input(shape=(1,), name=name, dtype="float32") for name in FEATURES}
        x = keras.layers.Concatenate()([inputs[name] for name in FEATURES])
        if self.params.model.hidden_units:
            x = keras.layers.Dense(self.params.model.hidden_units, activation="relu")(x)
        return keras.Model(inputs, keras.layers.Dense(1)(x))

    def build_losses(self, labels, model_outputs, aux_losses=None):
        import tensorflow as tf

        return tf.reduce_mean(tf.square(tf.cast(labels, tf.float32) - model_outputs))

    def build_metrics(self, training=True):
        import keras

        return [
            keras.metrics.MeanAbsoluteError(name="mae"),
            keras.metrics.MeanSquaredError(name="mse"),
        ]


class IncompleteTask(Task):
    """Forgets build_losses (and does not override the steps): must be refused before training."""

    def build_model(self):
        raise AssertionError("never called")

    def build_inputs(self, params, input_context=None):
        raise AssertionError("never called")


class RaisingInitTask(LinearTask):
    """A Task whose constructor raises: the run fails with nothing left installed."""

    def __init__(self, params, logging_dir=None, name=None):
        raise RuntimeError("the Task's constructor failed")
