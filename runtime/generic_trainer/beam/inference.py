"""Schema inference for import-examples, every format alike: facts per file, merged, then a Schema.

The facts of a file (or of several, merged): `{"rows": examples, "columns": {feature: [type level,
examples holding it, fewest values, most values]}, "values": {feature: distinct strings or None}}`,
type levels in tabular.TYPE_LEVELS' order (-1: no value seen). A table cell holds one value; a
tf.Example feature any number. TFRecord facts also carry `"seen": {feature: {level: "FILE record
N"}}`, where each type was first met: a feature whose type differs between records is bad input
(tfx_bsl cannot decode it), while a CSV column's type only widens (INT -> FLOAT -> BYTES). Facts of
tf.SequenceExamples carry their sequence features in `"sequence"` (as `"columns"`, counting steps).

The Schema is what TFX's SchemaGen infers (TFDV's `infer_schema`):
- `infer_feature_shape=True` (the default): a feature present in every example with the same
  number of values in each gets that fixed `shape` (a table column [1], MNIST's `image_floats`
  [784]); any other gets `presence` and a `value_count` and no shape (read var-len).
  `infer_feature_shape=False`: no feature gets a shape (every feature is read sparse).
- String domains (TFDV's rule for categorical strings): a BYTES feature whose values are all valid
  UTF-8 and hold at least 1 and at most `MAX_STRING_DOMAIN_SIZE` (TFDV's `max_string_domain_size`,
  100) distinct values gets a `string_domain` named after it, its values sorted, and
  `domain: "<name>"`; one whose values are one or two of TFDV's true/false words gets a
  `bool_domain` instead. StatisticsGen's rank histogram (1000 buckets, frequency threshold 1) holds
  every distinct value below that size, so every value counts.
- tf.SequenceExample: the sequence features go in a STRUCT feature `##SEQUENCE##` (tfx_bsl's name)
  with a `struct_domain`, each with its type and a `value_count` of steps, and the schema gets the
  tensor representations tfx_bsl reads them by (context: dense or var-len; sequence: ragged), as
  TFX's testdata schema_gen_sequence has them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from generic_trainer.beam.tabular import MAX_STRING_DOMAIN_SIZE, TYPE_LEVELS

_ABSENT = (-1, 0, None, None)
SEQUENCE_FEATURE = "##SEQUENCE##"  # tfx_bsl's name of a SequenceExample's sequence features
_TRUE_WORDS = {"TRUE", "true", "SET", "set", "1", ""}  # TFDV bool_domain_util's GetTrueValues
_FALSE_WORDS = {"FALSE", "false", "CLEAR", "clear", "0"}


def _merge_columns(merged: dict[str, Any], columns: Mapping[str, Sequence[Any]]) -> None:
    for name, (level, present, low, high) in columns.items():
        old_level, old_present, old_low, old_high = merged.get(name, _ABSENT)
        merged[name] = [
            max(old_level, level),
            old_present + present,
            low if old_low is None else old_low if low is None else min(low, old_low),
            high if old_high is None else old_high if high is None else max(high, old_high),
        ]


def merge_values(merged: dict[str, Any], values: Mapping[str, Any]) -> None:
    """Union distinct strings per feature into `merged`; None (too many, or not UTF-8) wins."""
    for name, found in values.items():
        if name in merged and merged[name] is None:
            continue
        union = None if found is None else set(merged.get(name) or ()) | set(found)
        merged[name] = None if union is None or len(union) > MAX_STRING_DOMAIN_SIZE else union


def merge_inference(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Combine the facts of files (and earlier merges)."""
    merged: dict[str, Any] = {"rows": 0, "columns": {}, "seen": {}, "values": {}, "sequence": {}}
    for part in parts:
        merged["rows"] += part["rows"]
        _merge_columns(merged["columns"], part["columns"])
        _merge_columns(merged["sequence"], part.get("sequence", {}))
        merge_values(merged["values"], part.get("values", {}))
        for name, places in part.get("seen", {}).items():
            kept = merged["seen"].setdefault(name, {})
            for level, where in places.items():
                kept.setdefault(level, where)
    return merged


def kind_conflict(inference: Mapping[str, Any]) -> str | None:
    """A feature that holds different types in different records (TFRecord facts), said in one line;
    or None."""
    names = {0: "int64_list (INT)", 1: "float_list (FLOAT)", 2: "bytes_list (BYTES)"}
    for name in sorted(inference.get("seen", {})):
        places = sorted(inference["seen"][name].items())
        if len(places) > 1:
            return (
                f"feature {name!r} holds {names[int(places[0][0])]} in {places[0][1]} but "
                f"{names[int(places[1][0])]} in {places[1][1]}; a feature has one type in every "
                "example"
            )
    return None


def kinds_from_inference(inference: Mapping[str, Any], columns: Sequence[str]) -> dict[str, str]:
    """Column -> INT/FLOAT/BYTES (a column with no value at all is BYTES)."""
    return {c: TYPE_LEVELS[max(inference["columns"].get(c, _ABSENT)[0], 0)] for c in columns}


def feature_names(inference: Mapping[str, Any]) -> list[str]:
    """The features the facts saw, sorted (a TFRecord input has no header to order them)."""
    return sorted(inference["columns"])


def _presence_and_shape(feature: Any, facts: Sequence[Any], rows: int, infer_shape: bool) -> None:
    _, present, low, high = facts
    feature.presence.min_count = 1 if present else 0
    if rows and present == rows:
        feature.presence.min_fraction = 1.0
        if infer_shape and low and low == high:
            feature.shape.dim.add(size=low)
            return
    else:
        feature.presence.min_fraction = present / rows if rows else 0.0
    if low:
        feature.value_count.min = 1
        if high == 1:
            feature.value_count.max = 1


def _add_domain(schema: Any, feature: Any, values: Any) -> None:
    """TFDV's domain of a BYTES feature from its distinct values (see the module doc)."""
    if not values or len(values) > MAX_STRING_DOMAIN_SIZE:
        return
    words = sorted(values, key=lambda v: v.encode("utf-8"))
    if len(words) <= 2 and _bool_words(words):
        for word in words:
            if word in _TRUE_WORDS:
                feature.bool_domain.true_value = word
            else:
                feature.bool_domain.false_value = word
        return
    schema.string_domain.add(name=feature.name, value=words)
    feature.domain = feature.name


def _bool_words(words: Sequence[str]) -> bool:
    true = [w for w in words if w in _TRUE_WORDS]
    false = [w for w in words if w in _FALSE_WORDS]
    return len(true) <= 1 and len(false) <= 1 and len(true) + len(false) == len(words)


def schema_from_inference(
    inference: Mapping[str, Any], columns: Sequence[str], infer_shape: bool = True
) -> Any:
    """A tensorflow-metadata Schema, as SchemaGen infers it (see the module doc)."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    kinds = kinds_from_inference(inference, columns)
    rows = inference["rows"]
    schema = schema_pb2.Schema()
    for name in columns:
        feature = schema.feature.add(name=name, type=getattr(schema_pb2, kinds[name]))
        _presence_and_shape(feature, inference["columns"].get(name, _ABSENT), rows, infer_shape)
        if kinds[name] == "BYTES":
            _add_domain(schema, feature, inference.get("values", {}).get(name))
    if inference.get("sequence"):
        _add_sequence(schema, inference)
    return schema


def _add_sequence(schema: Any, inference: Mapping[str, Any]) -> None:
    """The `##SEQUENCE##` STRUCT of a SequenceExample's sequence features, and the tensor
    representations tfx_bsl reads a SequenceExample by (context dense or var-len, sequence
    ragged)."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    sequence = inference["sequence"]
    struct = schema.feature.add(name=SEQUENCE_FEATURE, type=schema_pb2.STRUCT)
    for name in sorted(sequence):
        level, _, low, high = sequence[name]
        feature = struct.struct_domain.feature.add(
            name=name, type=getattr(schema_pb2, TYPE_LEVELS[max(level, 0)])
        )
        feature.value_count.min, feature.value_count.max = low or 0, high or 0
    group = schema.tensor_representation_group[""].tensor_representation
    for feature in schema.feature[:-1]:
        if feature.HasField("shape"):
            group[feature.name].dense_tensor.column_name = feature.name
            group[feature.name].dense_tensor.shape.CopyFrom(feature.shape)
        else:
            group[feature.name].varlen_sparse_tensor.column_name = feature.name
    for name in sorted(sequence):
        key = name if name not in group else f"{SEQUENCE_FEATURE}{name}"
        group[key].ragged_tensor.feature_path.step.extend([SEQUENCE_FEATURE, name])
