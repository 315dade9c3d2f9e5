"""tf.Example and tf.SequenceExample without TensorFlow: message classes, canonical bytes, facts.

The message classes are built here from tensorflow/core/example/{feature,example}.proto's field
numbers (protobuf's own parser, in a descriptor pool of their own, so they never clash with
TensorFlow's registration of the same names). `canonical` parses a payload as the payload format
says (TFX's `FORMAT_TF_EXAMPLE` or `FORMAT_TF_SEQUENCE_EXAMPLE`), refuses what is not one (a parse
error, or fields the message does not have: a tf.SequenceExample read as a tf.Example, random
bytes) and returns the deterministic serialization: the bytes TFX's ImportExampleGen hashes to pick
a split, and writes. `record_facts` gives per feature its type level and number of values (a
sequence feature: its number of steps), the facts inference.py merges. `partition_key` is TFX's
key for `partition_feature_name`.
"""

from __future__ import annotations

import functools
from typing import Any

FORMAT_TF_EXAMPLE = "FORMAT_TF_EXAMPLE"
FORMAT_TF_SEQUENCE_EXAMPLE = "FORMAT_TF_SEQUENCE_EXAMPLE"
PAYLOAD_FORMATS = (FORMAT_TF_EXAMPLE, FORMAT_TF_SEQUENCE_EXAMPLE)
KIND_LEVELS = {"int64_list": 0, "float_list": 1, "bytes_list": 2}  # tabular.TYPE_LEVELS' order
KIND_NAMES = {0: "int64_list (INT)", 1: "float_list (FLOAT)", 2: "bytes_list (BYTES)"}
_MESSAGE_NAMES = {FORMAT_TF_EXAMPLE: "tf.Example", FORMAT_TF_SEQUENCE_EXAMPLE: "tf.SequenceExample"}


def message_name(payload_format: str) -> str:
    """'tf.Example' or 'tf.SequenceExample'."""
    return _MESSAGE_NAMES[payload_format]


def _map_entry(parent: Any, value_type: str) -> None:
    """The nested map entry (string key) of `parent`'s first field, a map of `value_type`."""
    from google.protobuf import descriptor_pb2

    f = descriptor_pb2.FieldDescriptorProto
    entry = parent.nested_type.add(name=parent.field[0].type_name.rsplit(".", 1)[1])
    entry.field.add(name="key", number=1, label=f.LABEL_OPTIONAL, type=f.TYPE_STRING)
    entry.field.add(
        name="value", number=2, label=f.LABEL_OPTIONAL, type=f.TYPE_MESSAGE, type_name=value_type
    )
    entry.options.map_entry = True


def _file_descriptor() -> Any:
    """The FileDescriptorProto of feature.proto and example.proto, field numbers as TensorFlow's."""
    from google.protobuf import descriptor_pb2

    f = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(
        name="generic_trainer/example.proto", package="tensorflow", syntax="proto3"
    )
    repeated, optional = f.LABEL_REPEATED, f.LABEL_OPTIONAL

    def message(name: str, *fields: tuple[str, int, int, int, str]) -> Any:
        m = file.message_type.add(name=name)
        for field_name, number, label, kind, type_name in fields:
            field = m.field.add(name=field_name, number=number, label=label, type=kind)
            if type_name:
                field.type_name = type_name
        return m

    for name, kind in (("Bytes", f.TYPE_BYTES), ("Float", f.TYPE_FLOAT), ("Int64", f.TYPE_INT64)):
        message(f"{name}List", ("value", 1, repeated, kind, ""))
    feature = message(
        "Feature",
        ("bytes_list", 1, optional, f.TYPE_MESSAGE, ".tensorflow.BytesList"),
        ("float_list", 2, optional, f.TYPE_MESSAGE, ".tensorflow.FloatList"),
        ("int64_list", 3, optional, f.TYPE_MESSAGE, ".tensorflow.Int64List"),
    )
    feature.oneof_decl.add(name="kind")
    for field in feature.field:
        field.oneof_index = 0
    features = message(
        "Features", ("feature", 1, repeated, f.TYPE_MESSAGE, ".tensorflow.Features.FeatureEntry")
    )
    _map_entry(features, ".tensorflow.Feature")
    message("FeatureList", ("feature", 1, repeated, f.TYPE_MESSAGE, ".tensorflow.Feature"))
    lists = message(
        "FeatureLists",
        ("feature_list", 1, repeated, f.TYPE_MESSAGE, ".tensorflow.FeatureLists.FeatureListEntry"),
    )
    _map_entry(lists, ".tensorflow.FeatureList")
    features_type = (f.TYPE_MESSAGE, ".tensorflow.Features")
    message("Example", ("features", 1, optional, *features_type))
    lists_type = (f.TYPE_MESSAGE, ".tensorflow.FeatureLists")
    message(
        "SequenceExample",
        ("context", 1, optional, *features_type),
        ("feature_lists", 2, optional, *lists_type),
    )
    return file


@functools.lru_cache(maxsize=2)
def message_class(payload_format: str = FORMAT_TF_EXAMPLE) -> Any:
    """tf.train.Example or tf.train.SequenceExample as a protobuf message class (see the module
    doc)."""
    from google.protobuf import descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    pool.Add(_file_descriptor())
    name = "Example" if payload_format == FORMAT_TF_EXAMPLE else "SequenceExample"
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"tensorflow.{name}"))


def example_class() -> Any:
    """tf.train.Example as a protobuf message class."""
    return message_class(FORMAT_TF_EXAMPLE)


def canonical(
    payload: bytes, where: str, payload_format: str = FORMAT_TF_EXAMPLE
) -> tuple[bytes, Any]:
    """(deterministic serialization, parsed message) of a payload; ValueError when it is not one."""
    from google.protobuf.message import DecodeError

    name = message_name(payload_format)
    try:
        message = message_class(payload_format).FromString(payload)
    except DecodeError as e:
        raise ValueError(f"{where}: not a {name} (the bytes do not parse: {e})") from None
    size = message.ByteSize()
    message.DiscardUnknownFields()
    if message.ByteSize() != size:
        other = (
            "a tf.SequenceExample (give --payload-format FORMAT_TF_SEQUENCE_EXAMPLE)"
            if payload_format == FORMAT_TF_EXAMPLE
            else "a message of another kind"
        )
        raise ValueError(
            f"{where}: not a {name} (it holds fields a {name} has not, e.g. {other} or other bytes)"
        )
    return message.SerializeToString(deterministic=True), message


def context_features(message: Any) -> Any:
    """The feature map of a tf.Example, or the context of a tf.SequenceExample."""
    return message.context.feature if hasattr(message, "context") else message.features.feature


def record_facts(message: Any) -> dict[str, tuple[int, int]]:
    """Feature -> (type level, number of values); a feature with no value list set is missing."""
    out = {}
    for name, feature in context_features(message).items():
        kind = feature.WhichOneof("kind")
        if kind is not None:
            out[name] = (KIND_LEVELS[kind], len(getattr(feature, kind).value))
    return out


def sequence_facts(message: Any) -> dict[str, tuple[int, int]]:
    """Sequence feature -> (type level, number of steps) of a tf.SequenceExample ({} for others).

    A feature list whose steps hold no value list has level -1 (its type unknown here)."""
    if not hasattr(message, "feature_lists"):
        return {}
    out = {}
    for name, feature_list in message.feature_lists.feature_list.items():
        kinds = {step.WhichOneof("kind") for step in feature_list.feature} - {None}
        level = max((KIND_LEVELS[k] for k in kinds), default=-1)
        if len(kinds) > 1:
            raise ValueError(
                f"sequence feature {name!r} holds {' and '.join(sorted(kinds))} in different "
                "steps; a feature has one type"
            )
        out[name] = (level, len(feature_list.feature))
    return out


def string_values(message: Any) -> dict[str, list[bytes]]:
    """Feature -> its bytes values (bytes_list features of a tf.Example, or a SequenceExample's
    context)."""
    return {
        name: list(feature.bytes_list.value)
        for name, feature in context_features(message).items()
        if feature.WhichOneof("kind") == "bytes_list"
    }


def partition_key(message: Any, name: str, where: str) -> bytes:
    """TFX's partition key: the feature's deterministic serialization (context of a
    SequenceExample).

    ValueError as TFX's RuntimeErrors: the feature missing, without a value, or a float_list."""
    features = context_features(message)
    if name not in features:
        raise ValueError(f"{where}: partition feature {name!r} does not exist in the record")
    feature = features[name]
    kind = feature.WhichOneof("kind")
    if kind is None:
        raise ValueError(f"{where}: partition feature {name!r} holds no value")
    if kind == "float_list":
        raise ValueError(
            f"{where}: partition feature {name!r} is a float_list; only bytes_list and "
            "int64_list features can partition (TFX's rule)"
        )
    return feature.SerializeToString(deterministic=True)
