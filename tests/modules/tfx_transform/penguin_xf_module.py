"""A penguin module in the idioms of TFX's Transform + Trainer modules (written here, not copied).

Transform renames what it outputs (`<key>_xf`), and the Trainer side asks the data accessor for
the *transformed* schema (`tf_transform_output.transformed_metadata.schema`) with the label
`species_xf`, as a TFX module does because TFX feeds it Transform's materialised examples. Under
generic-trainer it gets raw examples and `--transform-graph`: the accessor applies the graph.

custom_config: `label_key` (default species_xf) to ask for another label, `epochs` (default 1).
"""

from __future__ import annotations

import keras
import keras_tuner
import tensorflow as tf
import tensorflow_transform as tft
from absl import logging
from generic_trainer import tfx
from tfx_bsl.public import tfxio

_FEATURE_KEYS = ["bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g"]
_LABEL_KEY = "species"
_BATCH_SIZE = 20


def _transformed_name(key: str) -> str:
    return key + "_xf"


def preprocessing_fn(inputs):
    """tf.Transform callback: z-scores of the measurements, the label passed through, renamed
    *_xf."""
    outputs = {}
    for key in _FEATURE_KEYS:
        outputs[_transformed_name(key)] = tft.scale_to_z_score(inputs[key])
    outputs[_transformed_name(_LABEL_KEY)] = inputs[_LABEL_KEY]
    return outputs


def _input_fn(file_pattern, data_accessor, tf_transform_output, label_key, batch_size=_BATCH_SIZE):
    return data_accessor.tf_dataset_factory(
        file_pattern,
        tfxio.TensorFlowDatasetOptions(batch_size=batch_size, label_key=label_key),
        tf_transform_output.transformed_metadata.schema,
    ).repeat()


def _get_hyperparameters() -> keras_tuner.HyperParameters:
    hp = keras_tuner.HyperParameters()
    hp.Choice("learning_rate", [1e-2, 3e-3], default=1e-2)
    hp.Int("num_layers", 1, 2, default=1)
    return hp


def _make_keras_model(hparams: keras_tuner.HyperParameters) -> keras.Model:
    inputs = {
        _transformed_name(key): keras.layers.Input(shape=(1,), name=_transformed_name(key))
        for key in _FEATURE_KEYS
    }
    d = keras.layers.concatenate(list(inputs.values()))
    for _ in range(int(hparams.get("num_layers"))):
        d = keras.layers.Dense(8, activation="relu")(d)
    outputs = keras.layers.Dense(3)(d)
    model = keras.Model(inputs=inputs, outputs=outputs)
    model.compile(
        optimizer=keras.optimizers.Adam(hparams.get("learning_rate")),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy()],
    )
    return model


def _export(model, tf_transform_output, export_dir):
    """serving_default: raw serialized tf.Example -> the transform graph -> the model's logits."""
    tft_layer = tf_transform_output.transform_features_layer()
    feature_spec = tf_transform_output.raw_feature_spec()
    feature_spec.pop(_LABEL_KEY)

    @tf.function(input_signature=[tf.TensorSpec(shape=[None], dtype=tf.string, name="examples")])
    def serve_tf_examples_fn(serialized_tf_examples):
        transformed = tft_layer(tf.io.parse_example(serialized_tf_examples, feature_spec))
        return {
            "outputs": model(
                {_transformed_name(k): transformed[_transformed_name(k)] for k in _FEATURE_KEYS}
            )
        }

    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.track(tft_layer)
    archive.add_endpoint("serving_default", serve_tf_examples_fn)
    archive.write_out(export_dir)


def tuner_fn(fn_args: tfx.components.FnArgs) -> tfx.components.TunerFnResult:
    tf_transform_output = tft.TFTransformOutput(fn_args.transform_graph_path)
    label_key = (fn_args.custom_config or {}).get("label_key", _transformed_name(_LABEL_KEY))
    tuner = keras_tuner.RandomSearch(
        _make_keras_model,
        max_trials=2,
        hyperparameters=_get_hyperparameters(),
        allow_new_entries=False,
        objective=keras_tuner.Objective("val_sparse_categorical_accuracy", "max"),
        directory=fn_args.working_dir,
        project_name="penguin_xf_tuning",
    )
    return tfx.components.TunerFnResult(
        tuner=tuner,
        fit_kwargs={
            "x": _input_fn(
                fn_args.train_files, fn_args.data_accessor, tf_transform_output, label_key
            ),
            "validation_data": _input_fn(
                fn_args.eval_files, fn_args.data_accessor, tf_transform_output, label_key
            ),
            "steps_per_epoch": fn_args.train_steps,
            "validation_steps": fn_args.eval_steps,
        },
    )


def run_fn(fn_args: tfx.components.FnArgs) -> None:
    tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
    label_key = (fn_args.custom_config or {}).get("label_key", _transformed_name(_LABEL_KEY))
    train_dataset = _input_fn(
        fn_args.train_files, fn_args.data_accessor, tf_transform_output, label_key
    )
    eval_dataset = _input_fn(
        fn_args.eval_files, fn_args.data_accessor, tf_transform_output, label_key
    )
    if fn_args.hyperparameters:
        hparams = keras_tuner.HyperParameters.from_config(fn_args.hyperparameters)
    else:
        hparams = _get_hyperparameters()
    logging.info("HyperParameters for training: %s", hparams.get_config())
    model = _make_keras_model(hparams)
    epochs = int((fn_args.custom_config or {}).get("epochs", 1))
    tensorboard_callback = keras.callbacks.TensorBoard(
        log_dir=fn_args.model_run_dir, update_freq="epoch"
    )
    model.fit(
        train_dataset,
        epochs=epochs,
        steps_per_epoch=fn_args.train_steps // epochs,
        validation_data=eval_dataset,
        validation_steps=fn_args.eval_steps,
        callbacks=[tensorboard_callback],
    )
    _export(model, tf_transform_output, fn_args.serving_model_dir)
