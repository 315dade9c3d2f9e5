"""Parsing a batch of serialized records per the schema and the payload format, as tfx_bsl does.

tf.Example: `tf.io.parse_example` with schemas.parser_config's spec (tfx_bsl's TFExampleRecord).
tf.SequenceExample: `tf.io.parse_sequence_example` with tfx_bsl's own
`CreateTfSequenceExampleParserConfig(schema)` (context and sequence features, keyed by tensor
name), the two dicts merged, as tfx_bsl's TFSequenceExampleRecord.TensorFlowDataset parses them.
TensorFlow and tfx_bsl are imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from generic_trainer.errors import UserInputError
from generic_trainer.records.example_protos import FORMAT_TF_SEQUENCE_EXAMPLE
from generic_trainer.records.schemas import parser_config

if TYPE_CHECKING:
    import tensorflow as tf
    from tensorflow_metadata.proto.v0 import schema_pb2

Parse = Callable[["tf.Tensor"], dict[str, Any]]


def batch_parser(schema: schema_pb2.Schema, payload_format: str) -> tuple[Parse, set[str]]:
    """(serialized batch -> {tensor name: tensor}, the tensor names) for the payload format."""
    import tensorflow as tf

    if payload_format == FORMAT_TF_SEQUENCE_EXAMPLE:
        return sequence_parser(schema)
    spec, renames = parser_config(schema)

    def parse(serialized: tf.Tensor) -> dict[str, Any]:
        parsed = tf.io.parse_example(serialized, spec)
        for value in parsed.values():
            if isinstance(value, tf.SparseTensor):  # keep the static batch size, as tfx_bsl does
                value.set_shape(serialized.shape.concatenate([None] * (value.shape.rank - 1)))
        return {renames.get(key, key): value for key, value in parsed.items()}

    return parse, {renames.get(key, key) for key in spec}


def sequence_parser(schema: schema_pb2.Schema) -> tuple[Parse, set[str]]:
    """tfx_bsl's parsing of serialized tf.SequenceExamples (see the module doc)."""
    import tensorflow as tf
    from tfx_bsl.tfxio import tensor_representation_util

    try:
        context, sequence = tensor_representation_util.CreateTfSequenceExampleParserConfig(schema)
    except (ValueError, KeyError, NotImplementedError) as e:
        raise UserInputError(
            "--schema", f"cannot read tf.SequenceExamples with this schema: {e}"
        ) from None

    def parse(serialized: tf.Tensor) -> dict[str, Any]:
        parsed_context, parsed_sequence, _ = tf.io.parse_sequence_example(
            serialized, context, sequence
        )
        return {**parsed_context, **parsed_sequence}

    return parse, set(context) | set(sequence)
