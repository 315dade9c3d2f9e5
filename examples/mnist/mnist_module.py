"""TFX module for the MNIST pipeline (pipelines/mnist_pipeline.py): Transform and Trainer, wired as
TFX wires them.

The data are TFX's MNIST layout: `image_floats` (784 floats in [-0.5, 0.5], one image) and
`image_class` (INT, 0-9). It defines:

  preprocessing_fn(inputs): the Transform step: `image_floats_xf` (the pixels rescaled to [0, 1] by
  the
                            analyzed minimum and maximum) and `image_class_xf` (the label as it is).
  run_fn(fn_args):          as the Trainer of TFX's MNIST pipeline gets them: Transform's
  *transformed* examples
                            (read with the transform graph's `transformed_metadata` schema,
                            `image_class_xf` as the label) and the transform graph; trains a small
                            Keras 3 classifier and exports a SavedModel whose `serving_default`
                            takes raw serialized tf.Examples (`examples`), applies the transform
                            graph and returns the 10 class logits (`outputs`), so the evaluator and
                            TF Serving send raw examples.

Optional `custom_config` keys: `batch_size` (default 32), `learning_rate` (default 0.002).
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf
import tensorflow_transform as tft
from generic_trainer import tfx
from tfx_bsl.public import tfxio

IMAGE_KEY = "image_floats"
LABEL_KEY = "image_class"
NUM_PIXELS = 784
NUM_CLASSES = 10


def transformed_name(key: str) -> str:
    return key + "_xf"


def preprocessing_fn(inputs: dict[str, Any]) -> dict[str, Any]:
    """tf.Transform callback: the pixels rescaled to [0, 1] over the analyzed data; the label passed
    through."""
    return {
        transformed_name(IMAGE_KEY): tft.scale_to_0_1(inputs[IMAGE_KEY]),
        transformed_name(LABEL_KEY): inputs[LABEL_KEY],
    }


def _dataset(
    files: list[str],
    data_accessor: tfx.components.DataAccessor,
    tf_transform_output: tft.TFTransformOutput,
    batch_size: int,
) -> tf.data.Dataset:
    """(transformed image, label) batches of Transform's transformed examples, repeating forever."""
    return data_accessor.tf_dataset_factory(
        files,
        tfxio.TensorFlowDatasetOptions(
            batch_size=batch_size, label_key=transformed_name(LABEL_KEY)
        ),
        tf_transform_output.transformed_metadata.schema,
    ).repeat()


def _model(learning_rate: float) -> keras.Model:
    image = keras.Input(shape=(NUM_PIXELS,), name=transformed_name(IMAGE_KEY))
    x = keras.layers.Dense(64, activation="relu")(image)
    x = keras.layers.Dropout(0.1)(x)
    logits = keras.layers.Dense(NUM_CLASSES)(x)
    model = keras.Model(image, logits)
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy()],
    )
    return model


def _export(
    model: keras.Model, tf_transform_output: tft.TFTransformOutput, export_dir: str
) -> None:
    """serving_default: raw serialized tf.Examples -> the transform graph -> the model's logits."""
    tft_layer = tf_transform_output.transform_features_layer()
    raw_spec = tf_transform_output.raw_feature_spec()
    raw_spec.pop(LABEL_KEY)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
        transformed = tft_layer(tf.io.parse_example(serialized, raw_spec))
        return {"outputs": model(transformed[transformed_name(IMAGE_KEY)])}

    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.track(
        tft_layer
    )  # a tf_keras model: tracked, so its graph is saved, not wired into the Keras 3 one
    archive.add_endpoint("serving_default", serve)
    archive.write_out(export_dir)


def run_fn(fn_args: tfx.components.FnArgs) -> None:
    """Train on Transform's transformed examples; export a raw-tf.Example serving model (TFX Trainer
    entry point)."""
    config = fn_args.custom_config or {}
    batch_size = int(config.get("batch_size", 32))
    tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
    train = _dataset(fn_args.train_files, fn_args.data_accessor, tf_transform_output, batch_size)
    evaluation = _dataset(
        fn_args.eval_files, fn_args.data_accessor, tf_transform_output, batch_size
    )
    model = _model(float(config.get("learning_rate", 0.002)))
    callbacks = [keras.callbacks.TensorBoard(log_dir=fn_args.model_run_dir, update_freq="epoch")]
    model.fit(
        train,
        steps_per_epoch=fn_args.train_steps or 100,
        validation_data=evaluation,
        validation_steps=fn_args.eval_steps or 10,
        callbacks=callbacks,
        verbose=2,
    )
    _export(model, tf_transform_output, fn_args.serving_model_dir)
