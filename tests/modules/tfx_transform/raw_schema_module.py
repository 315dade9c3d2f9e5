"""A module that passes its own raw schema (`fn_args.schema_path`) to the data accessor while a
transform graph is given, as a TFX module may: the schema holds `tags`, a feature the transform
graph does not know.

TFX's data accessor reads the features of the schema it is given from the files: `tags` is read as
it is. The label is the transform graph's `species_xf` (custom_config `label_key`), which the raw
examples lack: it comes from the transform graph applied in the input pipeline. run_fn checks both,
then trains briefly.
"""

from __future__ import annotations

import keras
import tensorflow as tf
from generic_trainer import tfx
from tensorflow_metadata.proto.v0 import schema_pb2

_FEATURE_KEYS = ["bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g"]


def _options(label_key: str):
    from generic_trainer.data import DatasetOptions

    return DatasetOptions(batch_size=16, label_key=label_key)


def run_fn(fn_args: tfx.components.FnArgs) -> None:
    label_key = (fn_args.custom_config or {}).get("label_key", "species_xf")
    schema = tfx.utils.parse_pbtxt_file(fn_args.schema_path, schema_pb2.Schema())
    train = fn_args.data_accessor.tf_dataset_factory(
        fn_args.train_files, _options(label_key), schema
    )
    features, label = next(iter(train))
    tags = features["tags"]
    tags = (
        tf.sparse.to_dense(tags, default_value=b"") if isinstance(tags, tf.SparseTensor) else tags
    )
    if tags.dtype != tf.string or not all(t.startswith(b"tag-") for t in tags.numpy().ravel() if t):
        raise ValueError(f"tags read wrongly: {tags}")
    if label.dtype != tf.int64:
        raise ValueError(f"label {label_key} has dtype {label.dtype}")
    print(f"RAW_SCHEMA_MODULE features={sorted(features)} label={label_key}")

    def numeric(features, label):
        return tf.concat([features[k] for k in _FEATURE_KEYS], axis=1) / 100.0, label

    model = keras.Sequential(
        [keras.Input(shape=(4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(3)]
    )
    model.compile(
        optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    model.fit(train.map(numeric), steps_per_epoch=fn_args.train_steps, epochs=1)
    model.export(fn_args.serving_model_dir)
