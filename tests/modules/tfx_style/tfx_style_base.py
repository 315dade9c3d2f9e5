"""Shared helpers of the TFX-style test modules, imported by its own name as a sibling file.

Written in the idioms of TFX's `penguin_utils_base.py`: TFX's own import paths
(`tfx.components.trainer.fn_args_utils`, `tfx.utils.io_utils`), `absl.logging`, tfx_bsl's
dataset options. The schema, features and label come from the caller.
"""

import tensorflow as tf
from absl import logging
from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_transform.tf_metadata import schema_utils
from tfx.components.trainer.fn_args_utils import DataAccessor
from tfx.utils import io_utils
from tfx_bsl.public import tfxio

FEATURE_KEYS = ["bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g"]
LABEL_KEY = "species"
TRAIN_BATCH_SIZE = 20
EVAL_BATCH_SIZE = 10


def load_schema(path: str) -> schema_pb2.Schema:
    schema = schema_pb2.Schema()
    io_utils.parse_pbtxt_file(path, schema)
    logging.info("tfx-style base: schema with %d features", len(schema.feature))
    return schema


def input_fn(
    file_pattern: list[str], data_accessor: DataAccessor, schema: schema_pb2.Schema, batch_size: int
) -> tf.data.Dataset:
    """(features, label) batches, forever, with only the numeric features (as penguin_simple)."""
    dataset = data_accessor.tf_dataset_factory(
        file_pattern,
        tfxio.TensorFlowDatasetOptions(batch_size=batch_size, label_key=LABEL_KEY),
        schema,
    )
    return dataset.map(
        lambda features, label: ({k: features[k] for k in FEATURE_KEYS}, label)
    ).repeat()


def serve_examples_fn(model, schema: schema_pb2.Schema):
    """The serving function TFX modules export: serialized tf.Example in, class scores out."""
    feature_spec = schema_utils.schema_as_feature_spec(schema).feature_spec
    feature_spec = {k: feature_spec[k] for k in FEATURE_KEYS}

    @tf.function(input_signature=[tf.TensorSpec(shape=[None], dtype=tf.string, name="examples")])
    def serve_tf_examples_fn(serialized_tf_examples):
        parsed = tf.io.parse_example(serialized_tf_examples, feature_spec)
        return {"outputs": tf.nn.softmax(model(parsed))}

    return serve_tf_examples_fn
