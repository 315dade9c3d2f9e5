"""The Palmer penguins classifier as a generic_trainer Task (the Task API; no run_fn).

    generic-trainer train --task examples/penguin/task.py:PenguinTask \\
        --examples examples/penguin/data --schema examples/penguin/schema.pbtxt \\
        --model-dir /tmp/penguin --params-override trainer.train_steps=300

The Task says *what* to train: a small MLP over normalized numeric features and one-hot string
features (statistics and vocabularies read from the training files), sparse categorical
cross-entropy, accuracy and one-vs-rest AUC, and a serving endpoint that takes serialized
tf.Example. The runtime owns *how*: strategy (one process or several workers), loop,
checkpoints, summaries, export. Host-side `aggregate_logs` adds the macro F1 score over the
whole validation set, gathered from every worker.

Tuned hyperparameters (keras-tuner's best_hyperparameters.txt via --hyperparameters) override
`model.units`, `model.num_layers` and the learning rate.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from generic_trainer.task import (
    DataConfig,
    ExperimentConfig,
    Task,
    TaskConfig,
    TrainerConfig,
    build_optimization_config,
    register_experiment,
    register_task,
)

NUMERIC_FEATURES = ["bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g", "year"]
STRING_FEATURES = ["island", "sex"]
LABEL = "species"
NUM_CLASSES = 3


@dataclasses.dataclass
class PenguinModelConfig:
    units: int = 16
    num_layers: int = 2
    stats_max_batches: int = 100  # batches of training data read for normalization and vocabularies


@dataclasses.dataclass
class PenguinTaskConfig(TaskConfig):
    model: PenguinModelConfig = dataclasses.field(default_factory=PenguinModelConfig)


@register_task
class PenguinTask(Task):
    config_cls = PenguinTaskConfig

    @classmethod
    def default_experiment(cls) -> ExperimentConfig:
        return penguin_experiment()

    def _hparam(self, name: str, default: Any) -> Any:
        hp = self.params.hyperparameters or {}
        values = hp.get("values", hp) if isinstance(hp, dict) else {}
        return values.get(name, default)

    # ---- inputs -----------------------------------------------------------------------------

    def build_inputs(self, params: DataConfig, input_context: Any = None):
        return self.examples_dataset(params, input_context, label_key=LABEL)

    def _feature_stats(self) -> dict[str, Any]:
        """Mean/variance of the numeric features and string vocabularies, from the training
        files."""
        import tensorflow as tf

        stats_data = dataclasses.replace(
            self.params.train_data, is_training=False, drop_remainder=False, global_batch_size=256
        )
        numeric, vocab = [], {key: set() for key in STRING_FEATURES}
        for features, _ in self.build_inputs(stats_data).take(self.params.model.stats_max_batches):
            numeric.append(
                tf.concat([tf.cast(features[k], tf.float32) for k in NUMERIC_FEATURES], -1).numpy()
            )
            for key in STRING_FEATURES:
                vocab[key].update(v.decode() for v in features[key].numpy().ravel())
        values = np.concatenate(numeric)
        return {
            "mean": values.mean(0),
            "variance": values.var(0),
            "vocab": {k: sorted(v) for k, v in vocab.items()},
        }

    # ---- model, loss, metrics ---------------------------------------------------------------

    def build_model(self):
        import keras

        stats = self._feature_stats()
        inputs = {
            k: keras.Input(shape=(1,), name=k, dtype="int64" if k == "year" else "float32")
            for k in NUMERIC_FEATURES
        }
        inputs.update({k: keras.Input(shape=(1,), name=k, dtype="string") for k in STRING_FEATURES})
        numeric = keras.layers.Concatenate()(
            [keras.ops.cast(inputs[k], "float32") for k in NUMERIC_FEATURES]
        )
        parts = [
            keras.layers.Normalization(mean=stats["mean"], variance=stats["variance"])(numeric)
        ]
        for key in STRING_FEATURES:
            parts.append(
                keras.layers.StringLookup(vocabulary=stats["vocab"][key], output_mode="one_hot")(
                    inputs[key]
                )
            )
        x = keras.layers.Concatenate()(parts)
        for _ in range(int(self._hparam("num_layers", self.params.model.num_layers))):
            x = keras.layers.Dense(
                int(self._hparam("units", self.params.model.units)), activation="relu"
            )(x)
        outputs = keras.layers.Dense(NUM_CLASSES, activation="softmax", dtype="float32")(x)
        return keras.Model(inputs=inputs, outputs=outputs)

    def build_optimizer(self, optimizer_config=None, runtime_config=None):
        optimizer_config = optimizer_config or self.experiment.trainer.optimizer_config
        learning_rate = self._hparam("learning_rate", None)
        if learning_rate is not None:
            optimizer_config = optimizer_config.with_base_learning_rate(float(learning_rate))
        return super().build_optimizer(optimizer_config, runtime_config)

    def build_losses(self, labels, model_outputs, aux_losses=None):
        import keras
        import tensorflow as tf

        loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(labels, model_outputs))
        if aux_losses:
            loss += tf.add_n(aux_losses)
        return loss

    def build_metrics(self, training: bool = True) -> list:
        import keras

        return [
            keras.metrics.SparseCategoricalAccuracy(name="accuracy"),
            keras.metrics.AUC(name="auc"),
        ]

    def process_metrics(self, metrics, labels, model_outputs, **kwargs) -> None:
        import tensorflow as tf

        for metric in metrics or []:
            if metric.name == "auc":  # one-vs-rest over the flattened one-hot labels
                metric.update_state(
                    tf.one_hot(tf.reshape(labels, [-1]), NUM_CLASSES), model_outputs
                )
            else:
                metric.update_state(labels, model_outputs)

    # ---- host-side metrics over the whole validation set -------------------------------------

    def validation_step(self, inputs, model, metrics=None):
        """The default step's loss and metrics, plus labels and predicted classes for
        aggregate_logs."""
        import tensorflow as tf

        features, labels = inputs
        outputs = model(features, training=False)
        self.process_metrics(metrics, labels, outputs)
        return {
            "loss": self.build_losses(labels, outputs),
            "labels": tf.reshape(labels, [-1]),
            "predictions": tf.argmax(outputs, axis=-1),
        }

    def aggregate_logs(self, state=None, step_outputs=None):
        state = state or {"labels": [], "predictions": []}
        state["labels"].append(step_outputs["labels"])
        state["predictions"].append(step_outputs["predictions"])
        return state

    def reduce_aggregated_logs(self, aggregated_logs, global_step=None):
        if not aggregated_logs:
            return {}
        return {
            "macro_f1": macro_f1(
                np.concatenate(aggregated_logs["labels"]),
                np.concatenate(aggregated_logs["predictions"]),
                NUM_CLASSES,
            )
        }

    # ---- serving ----------------------------------------------------------------------------

    def build_serving_signatures(self, model):
        import tensorflow as tf

        feature_spec = {
            k: tf.io.FixedLenFeature([1], tf.int64 if k == "year" else tf.float32)
            for k in NUMERIC_FEATURES
        }
        feature_spec.update({k: tf.io.FixedLenFeature([1], tf.string) for k in STRING_FEATURES})

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
        def serve_tf_examples(serialized):
            features = tf.io.parse_example(serialized, feature_spec)
            return {"outputs": model(features)}

        return {"serving_default": serve_tf_examples}


def macro_f1(labels: np.ndarray, predictions: np.ndarray, num_classes: int) -> float:
    """Mean over classes of F1 = 2TP / (2TP + FP + FN); classes absent from both count as 0."""
    scores = []
    for c in range(num_classes):
        tp = np.sum((predictions == c) & (labels == c))
        denom = (
            2 * tp
            + np.sum((predictions == c) & (labels != c))
            + np.sum((predictions != c) & (labels == c))
        )
        scores.append(2 * tp / denom if denom else 0.0)
    return float(np.mean(scores))


@register_experiment("penguin")
def penguin_experiment() -> ExperimentConfig:
    """Defaults sized for the bundled data (about 270 training and 66 validation examples)."""
    return ExperimentConfig(
        task=PenguinTaskConfig(
            train_data=DataConfig(global_batch_size=32, is_training=True),
            validation_data=DataConfig(
                global_batch_size=32, is_training=False, drop_remainder=False
            ),
        ),
        trainer=TrainerConfig(
            train_steps=500,
            steps_per_loop=50,
            validation_interval=250,
            checkpoint_interval=250,
            summary_interval=50,
            best_checkpoint_export_subdir="best_ckpt",
            best_checkpoint_eval_metric="accuracy",
            best_checkpoint_metric_comp="higher",
            optimizer_config=build_optimization_config(
                {
                    "optimizer": {"type": "adam"},
                    "learning_rate": {"type": "constant", "constant": {"learning_rate": 0.01}},
                }
            ),
        ),
    )
