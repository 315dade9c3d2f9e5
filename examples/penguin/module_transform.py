"""TFX module for the Palmer penguins example with tensorflow-transform (Transform + Trainer).

Written as a TFX user writes a module file; the only change for generic-trainer is the import
line `from tfx import v1 as tfx` -> `from generic_trainer import tfx`. It defines:

  preprocessing_fn(inputs): the Transform step (z-score of numeric features, vocabularies of
                            string features); `generic-trainer transform` runs it on Beam.
  run_fn(fn_args):          reads the transformed features, as TFX's Trainer modules do: it asks
                            the data accessor for `transformed_metadata.schema`. Fed Transform's
                            transformed examples (TFX's wiring, and the penguin pipeline's), it
                            reads them as they are; fed raw examples with `--transform-graph`,
                            the accessor applies the graph in the input pipeline. It trains a
                            Keras 3 classifier and exports a SavedModel whose `serving_default`
                            takes raw serialized tf.Example (`examples`), applies the transform
                            graph and returns class probabilities.
  tuner_fn(fn_args):        a keras-tuner RandomSearch of the same model on the same inputs.

Optional `custom_config` keys: `epochs` (default 5), `batch_size` (default 32).

The serving model converts to TFLite with TFLite's built-in ops (`--export-tflite`): a string the
vocabulary lacks gets the id -1 (tf.Transform's `default_value`, looked up in the vocabulary's
table) rather than a hash bucket (`num_oov_buckets`: a string hash, which TFLite's built-in ops
lack), and the model's one-hot encoding turns -1 into all zeros.
"""

from __future__ import annotations

from typing import Any

import keras
import keras_tuner
import tensorflow as tf
import tensorflow_transform as tft
from generic_trainer import tfx
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
_OOV_ID = -1  # the id of a string not in the vocabulary (one-hot: all zeros)

_DEFAULT_TRAIN_STEPS = 500
_DEFAULT_EVAL_STEPS = 10
_DEFAULT_EPOCHS = 5
_DEFAULT_BATCH_SIZE = 32


def preprocessing_fn(inputs: dict[str, Any]) -> dict[str, Any]:
    """tf.Transform callback: raw features in, model-ready features out."""
    outputs = {}
    for key in _NUMERIC_FEATURE_KEYS:
        outputs[key] = tft.scale_to_z_score(tf.cast(inputs[key], tf.float32))
    for key in _STRING_FEATURE_KEYS:
        outputs[key] = tft.compute_and_apply_vocabulary(
            inputs[key], default_value=_OOV_ID, vocab_filename=key
        )
    outputs[_LABEL_KEY] = inputs[_LABEL_KEY]
    return outputs


def _get_hyperparameters() -> keras_tuner.HyperParameters:
    hp = keras_tuner.HyperParameters()
    hp.Choice("learning_rate", [1e-2, 3e-3, 1e-3], default=1e-2)
    hp.Choice("units", [8, 16, 32], default=16)
    hp.Int("num_layers", 1, 3, default=2)
    return hp


def _input_fn(
    file_pattern: list[str],
    data_accessor: tfx.components.DataAccessor,
    tf_transform_output: tft.TFTransformOutput,
    batch_size: int,
) -> tf.data.Dataset:
    """(transformed features, label) batches, repeating forever."""
    return data_accessor.tf_dataset_factory(
        file_pattern,
        tfxio.TensorFlowDatasetOptions(batch_size=batch_size, label_key=_LABEL_KEY),
        tf_transform_output.transformed_metadata.schema,
    )


def _build_keras_model(
    hp: keras_tuner.HyperParameters, tf_transform_output: tft.TFTransformOutput
) -> keras.Model:
    """An MLP over the transformed features: z-scores as they are, vocabulary ids one-hot (_OOV_ID:
    zeros)."""
    inputs = {
        key: keras.Input(shape=(1,), name=key, dtype="float32") for key in _NUMERIC_FEATURE_KEYS
    }
    inputs.update(
        {key: keras.Input(shape=(1,), name=key, dtype="int64") for key in _STRING_FEATURE_KEYS}
    )
    encoded = [inputs[key] for key in _NUMERIC_FEATURE_KEYS]
    for key in _STRING_FEATURE_KEYS:
        num_tokens = tf_transform_output.vocabulary_size_by_name(key)
        encoded.append(
            keras.layers.CategoryEncoding(num_tokens=num_tokens, output_mode="one_hot")(inputs[key])
        )
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


def _export_serving_model(
    model: keras.Model, tf_transform_output: tft.TFTransformOutput, tft_layer: Any, export_dir: str
) -> None:
    """SavedModel: raw serialized tf.Example -> transform graph -> model -> probabilities.

    The transform layer is a tf_keras model: it is tracked by the archive (so its graph and
    vocabularies are saved with the model), not wired into the Keras 3 graph.
    """
    raw_feature_spec = tf_transform_output.raw_feature_spec()
    raw_feature_spec.pop(_LABEL_KEY)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve_tf_examples(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
        transformed = tft_layer(tf.io.parse_example(serialized, raw_feature_spec))
        return {"outputs": model({key: transformed[key] for key in _FEATURE_KEYS})}

    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.track(tft_layer)
    archive.add_endpoint("serving_default", serve_tf_examples)
    archive.write_out(export_dir)


def run_fn(fn_args: tfx.components.FnArgs) -> None:
    """Train on transformed features and export a raw-tf.Example serving model (TFX Trainer entry
    point)."""
    custom_config = fn_args.custom_config or {}
    batch_size = int(custom_config.get("batch_size", _DEFAULT_BATCH_SIZE))
    epochs = int(custom_config.get("epochs", _DEFAULT_EPOCHS))
    train_steps = int(fn_args.train_steps or _DEFAULT_TRAIN_STEPS)
    eval_steps = int(fn_args.eval_steps or _DEFAULT_EVAL_STEPS)
    epochs = max(1, min(epochs, train_steps))

    tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
    tft_layer = tf_transform_output.transform_features_layer()
    train_ds = _input_fn(
        fn_args.train_files, fn_args.data_accessor, tf_transform_output, batch_size
    )
    eval_ds = _input_fn(fn_args.eval_files, fn_args.data_accessor, tf_transform_output, batch_size)

    hp = _get_hyperparameters()
    if fn_args.hyperparameters:
        hp.values.update(keras_tuner.HyperParameters.from_config(fn_args.hyperparameters).values)
    model = _build_keras_model(hp, tf_transform_output)
    model.summary()

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
    _export_serving_model(model, tf_transform_output, tft_layer, export_dir)


def tuner_fn(fn_args: tfx.components.FnArgs) -> tfx.components.TunerFnResult:
    """A RandomSearch over _get_hyperparameters() on the transformed features (TFX Tuner entry
    point)."""
    custom_config = fn_args.custom_config or {}
    batch_size = int(custom_config.get("batch_size", _DEFAULT_BATCH_SIZE))
    train_steps = int(fn_args.train_steps or _DEFAULT_TRAIN_STEPS)
    eval_steps = int(fn_args.eval_steps or _DEFAULT_EVAL_STEPS)
    tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)

    tuner = keras_tuner.RandomSearch(
        lambda hp: _build_keras_model(hp, tf_transform_output),
        max_trials=int(custom_config.get("max_trials", 4)),
        hyperparameters=_get_hyperparameters(),
        allow_new_entries=False,
        objective=keras_tuner.Objective("val_accuracy", "max"),
        directory=fn_args.working_dir,
        project_name="penguin_transform_tuning",
    )
    return tfx.components.TunerFnResult(
        tuner=tuner,
        fit_kwargs={
            "x": _input_fn(
                fn_args.train_files, fn_args.data_accessor, tf_transform_output, batch_size
            ),
            "validation_data": _input_fn(
                fn_args.eval_files, fn_args.data_accessor, tf_transform_output, batch_size
            ),
            "steps_per_epoch": train_steps,
            "validation_steps": eval_steps,
        },
    )
