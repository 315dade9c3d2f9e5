"""A module in the style of TFX's penguin_simple tutorial (written for these tests, not copied).

A list of named `Input`s, one per feature, auto-named Dense layers, and Keras 2's
`model.save(serving_model_dir, save_format='tf')` with no signatures: Keras 2 writes a
`serving_default` that takes one tensor per feature, named after its Input, and returns the
last Dense layer's output under that layer's name.
"""

import tensorflow as tf
from tensorflow import keras
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx import v1 as tfx
from tfx_bsl.public import tfxio

_FEATURE_KEYS = ["bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g"]
_LABEL_KEY = "species"


def _input_fn(
    file_pattern: list[str],
    data_accessor: tfx.components.DataAccessor,
    schema: schema_pb2.Schema,
    batch_size: int,
) -> tf.data.Dataset:
    options = tfxio.TensorFlowDatasetOptions(batch_size=batch_size, label_key=_LABEL_KEY)
    return data_accessor.tf_dataset_factory(file_pattern, options, schema=schema).repeat()


def _model() -> keras.Model:
    inputs = [keras.layers.Input(shape=(1,), name=key) for key in _FEATURE_KEYS]
    x = keras.layers.concatenate(inputs)
    x = keras.layers.Dense(8, activation="relu")(x)
    outputs = keras.layers.Dense(3)(x)
    model = keras.Model(inputs=inputs, outputs=outputs)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy()],
    )
    return model


def run_fn(fn_args: tfx.components.FnArgs) -> None:
    schema = tfx.utils.parse_pbtxt_file(fn_args.schema_path, schema_pb2.Schema())
    schema = schema_pb2.Schema(
        feature=[f for f in schema.feature if f.name in _FEATURE_KEYS + [_LABEL_KEY]]
    )
    train = _input_fn(fn_args.train_files, fn_args.data_accessor, schema, 16)
    evaluation = _input_fn(fn_args.eval_files, fn_args.data_accessor, schema, 16)
    model = _model()
    model.fit(
        train,
        steps_per_epoch=fn_args.train_steps,
        validation_data=evaluation,
        validation_steps=fn_args.eval_steps,
    )
    model.save(fn_args.serving_model_dir, save_format="tf")
