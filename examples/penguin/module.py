"""TFX Trainer module for the Palmer penguins example: a Keras 3 classifier on raw features.

Written as a TFX user writes a module file. It imports `from generic_trainer import tfx`; TFX's own
`from tfx import v1 as tfx` works as well (the runtime resolves it). It defines:

  run_fn(fn_args):   trains the classifier and exports a SavedModel whose `serving_default`
                     takes serialized tf.Example (`examples`) and returns class probabilities.
  tuner_fn(fn_args): a keras-tuner RandomSearch over learning_rate / units / num_layers.

The model normalizes the numeric features (mean and variance computed from the train split)
and one-hot encodes the string features (vocabulary from the train split).
Optional `custom_config` keys: `epochs` (default 5), `batch_size` (default 32), `max_trials`
(tuner_fn, default 4).
"""

from __future__ import annotations

import math
from typing import Any

import keras
import keras_tuner
import numpy as np
import tensorflow as tf
from generic_trainer import tfx
from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_transform.tf_metadata import schema_utils
from tfx_bsl.public import tfxio

_NUMERIC_FEATURE_KEYS = [
    "bill_length_mm",
    "bill_depth_mm",
    "flipper_length_mm",
    "body_mass_g",
    "year",
]
_STRING_FEATURE_KEYS = ["island", "sex"]
_FEATURE_KEYS = _NUMERIC_FEATURE_KEYS + _STRING_FEATURE_KEYS
_LABEL_KEY = "species"
_NUM_CLASSES = 3

# Used when the pipeline passes no schema (TFX's penguin example does the same).
_FEATURE_SPEC = {
    **{
        key: tf.io.FixedLenFeature([1], tf.float32)
        for key in _NUMERIC_FEATURE_KEYS
        if key != "year"
    },
    "year": tf.io.FixedLenFeature([1], tf.int64),
    **{key: tf.io.FixedLenFeature([1], tf.string) for key in _STRING_FEATURE_KEYS},
    _LABEL_KEY: tf.io.FixedLenFeature([1], tf.int64),
}

_DEFAULT_TRAIN_STEPS = 500
_DEFAULT_EVAL_STEPS = 10
_DEFAULT_EPOCHS = 5
_DEFAULT_BATCH_SIZE = 32
_STATS_MAX_BATCHES = 100


def _get_hyperparameters() -> keras_tuner.HyperParameters:
    """The search space; its defaults are what run_fn uses without tuned hyperparameters."""
    hp = keras_tuner.HyperParameters()
    hp.Choice("learning_rate", [1e-2, 3e-3, 1e-3], default=1e-2)
    hp.Choice("units", [8, 16, 32], default=16)
    hp.Int("num_layers", 1, 3, default=2)
    return hp


def _load_schema(fn_args: tfx.components.FnArgs) -> schema_pb2.Schema:
    if fn_args.schema_path:
        return tfx.utils.parse_pbtxt_file(fn_args.schema_path, schema_pb2.Schema())
    return schema_utils.schema_from_feature_spec(_FEATURE_SPEC)


def _input_fn(
    file_pattern: list[str],
    data_accessor: tfx.components.DataAccessor,
    schema: schema_pb2.Schema,
    batch_size: int,
    num_epochs: int | None = None,
) -> tf.data.Dataset:
    """(features, label) batches of the examples; repeats forever unless num_epochs is set."""
    return data_accessor.tf_dataset_factory(
        file_pattern,
        tfxio.TensorFlowDatasetOptions(
            batch_size=batch_size, label_key=_LABEL_KEY, num_epochs=num_epochs
        ),
        schema,
    )


def _numeric(features: dict[str, tf.Tensor]) -> tf.Tensor:
    return tf.concat([tf.cast(features[key], tf.float32) for key in _NUMERIC_FEATURE_KEYS], axis=-1)


def _compute_stats(dataset: tf.data.Dataset) -> dict[str, Any]:
    """Mean and variance of the numeric features and the vocabularies of the string features."""
    numeric, strings = [], {key: set() for key in _STRING_FEATURE_KEYS}
    for features, _ in dataset.take(_STATS_MAX_BATCHES):
        numeric.append(_numeric(features).numpy())
        for key in _STRING_FEATURE_KEYS:
            strings[key].update(v.decode() for v in features[key].numpy().ravel())
    values = np.concatenate(numeric)
    return {
        "mean": values.mean(axis=0),
        "variance": values.var(axis=0),
        "vocabularies": {key: sorted(vocab) for key, vocab in strings.items()},
    }


def _build_keras_model(hp: keras_tuner.HyperParameters, stats: dict[str, Any]) -> keras.Model:
    """A small MLP over normalized numeric features and one-hot string features."""
    inputs = {
        key: keras.Input(shape=(1,), name=key, dtype=_FEATURE_SPEC[key].dtype.name)
        for key in _FEATURE_KEYS
    }
    numeric = keras.layers.Concatenate()(
        [keras.ops.cast(inputs[key], "float32") for key in _NUMERIC_FEATURE_KEYS]
    )
    encoded = [keras.layers.Normalization(mean=stats["mean"], variance=stats["variance"])(numeric)]
    for key in _STRING_FEATURE_KEYS:
        lookup = keras.layers.StringLookup(
            vocabulary=stats["vocabularies"][key], output_mode="one_hot"
        )
        encoded.append(lookup(inputs[key]))
    x = keras.layers.Concatenate()(encoded)
    for _ in range(int(hp.get("num_layers"))):
        x = keras.layers.Dense(int(hp.get("units")), activation="relu")(x)
    outputs = keras.layers.Dense(_NUM_CLASSES, activation="softmax")(x)
    model = keras.Model(inputs=inputs, outputs=outputs)
    model.compile(
        optimizer=keras.optimizers.Adam(float(hp.get("learning_rate"))),
        loss=keras.losses.SparseCategoricalCrossentropy(),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
    )
    return model


def _steps(fn_args: tfx.components.FnArgs, batch_size: int) -> tuple[int, int]:
    """Total train steps and eval steps: the pipeline's, else from example counts, else defaults."""
    num_examples = getattr(fn_args, "num_examples", None) or {}
    train_steps = fn_args.train_steps or _DEFAULT_TRAIN_STEPS
    eval_steps = fn_args.eval_steps
    if not eval_steps:
        eval_count = num_examples.get("eval")
        eval_steps = math.ceil(eval_count / batch_size) if eval_count else _DEFAULT_EVAL_STEPS
    return int(train_steps), int(eval_steps)


def _export_serving_model(model: keras.Model, schema: schema_pb2.Schema, export_dir: str) -> None:
    """SavedModel whose serving_default parses serialized tf.Example and returns probabilities."""
    feature_spec = schema_utils.schema_as_feature_spec(schema).feature_spec

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve_tf_examples(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
        features = tf.io.parse_example(serialized, feature_spec)
        return {"outputs": model({key: features[key] for key in _FEATURE_KEYS})}

    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint("serving_default", serve_tf_examples)
    archive.write_out(export_dir)


def run_fn(fn_args: tfx.components.FnArgs) -> None:
    """Train the penguin classifier and export it for serving (TFX Trainer entry point)."""
    custom_config = fn_args.custom_config or {}
    batch_size = int(custom_config.get("batch_size", _DEFAULT_BATCH_SIZE))
    epochs = int(custom_config.get("epochs", _DEFAULT_EPOCHS))
    schema = _load_schema(fn_args)

    train_ds = _input_fn(fn_args.train_files, fn_args.data_accessor, schema, batch_size)
    eval_ds = _input_fn(fn_args.eval_files, fn_args.data_accessor, schema, batch_size)
    stats = _compute_stats(
        _input_fn(fn_args.train_files, fn_args.data_accessor, schema, batch_size, 1)
    )

    hp = _get_hyperparameters()
    if fn_args.hyperparameters:
        hp.values.update(keras_tuner.HyperParameters.from_config(fn_args.hyperparameters).values)
    model = _build_keras_model(hp, stats)
    model.summary()

    train_steps, eval_steps = _steps(fn_args, batch_size)
    epochs = max(1, min(epochs, train_steps))
    callbacks = []
    if fn_args.model_run_dir:
        callbacks.append(keras.callbacks.TensorBoard(log_dir=fn_args.model_run_dir))
    if getattr(fn_args, "backup_and_restore", None):
        callbacks.append(fn_args.backup_and_restore)
    model.fit(
        train_ds,
        epochs=epochs,
        steps_per_epoch=train_steps // epochs,
        validation_data=eval_ds,
        validation_steps=eval_steps,
        callbacks=callbacks,
        verbose=2,
    )

    export_dir = (
        fn_args.export_dir("serving")
        if hasattr(fn_args, "export_dir")
        else fn_args.serving_model_dir
    )
    _export_serving_model(model, schema, export_dir)


def tuner_fn(fn_args: tfx.components.FnArgs) -> tfx.components.TunerFnResult:
    """A RandomSearch over _get_hyperparameters() (TFX Tuner entry point)."""
    custom_config = fn_args.custom_config or {}
    batch_size = int(custom_config.get("batch_size", _DEFAULT_BATCH_SIZE))
    schema = _load_schema(fn_args)
    stats = _compute_stats(
        _input_fn(fn_args.train_files, fn_args.data_accessor, schema, batch_size, 1)
    )
    train_steps, eval_steps = _steps(fn_args, batch_size)

    tuner = keras_tuner.RandomSearch(
        lambda hp: _build_keras_model(hp, stats),
        max_trials=int(custom_config.get("max_trials", 4)),
        hyperparameters=_get_hyperparameters(),
        allow_new_entries=False,
        objective=keras_tuner.Objective("val_accuracy", "max"),
        directory=fn_args.working_dir,
        project_name="penguin_tuning",
    )
    return tfx.components.TunerFnResult(
        tuner=tuner,
        fit_kwargs={
            "x": _input_fn(fn_args.train_files, fn_args.data_accessor, schema, batch_size),
            "validation_data": _input_fn(
                fn_args.eval_files, fn_args.data_accessor, schema, batch_size
            ),
            "steps_per_epoch": train_steps,
            "validation_steps": eval_steps,
        },
    )
