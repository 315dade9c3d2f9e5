"""Schema inference for import-examples, every format alike: facts per file, merged, then a Schema.

The facts of a file (or of several, merged): `{"rows": examples, "columns": {feature: [type level,
examples holding it, fewest values, most values]}}`, type levels in tabular.TYPE_LEVELS' order (-1: no
value seen). A table cell holds one value; a tf.Example feature any number. TFRecord facts also carry
`"seen": {feature: {level: "FILE record N"}}`, where each type was first met: a feature whose type
differs between records is bad input (tfx_bsl cannot decode it), while a CSV column's type only
widens (INT -> FLOAT -> BYTES).

The Schema is what TFX's SchemaGen infers with `infer_feature_shape=True`: a feature present in every
example with the same number of values in each gets that fixed `shape` (a table column [1], MNIST's
`image_floats` [784]); any other gets `presence` and a `value_count` and no shape (read var-len).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from generic_trainer.beam.tabular import TYPE_LEVELS

_ABSENT = (-1, 0, None, None)


def merge_inference(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Combine the facts of files (and earlier merges)."""
    merged: dict[str, Any] = {"rows": 0, "columns": {}, "seen": {}}
    for part in parts:
        merged["rows"] += part["rows"]
        for name, (level, present, low, high) in part["columns"].items():
            old_level, old_present, old_low, old_high = merged["columns"].get(name, _ABSENT)
            merged["columns"][name] = [
                max(old_level, level),
                old_present + present,
                low if old_low is None else old_low if low is None else min(low, old_low),
                high if old_high is None else old_high if high is None else max(high, old_high),
            ]
        for name, places in part.get("seen", {}).items():
            kept = merged["seen"].setdefault(name, {})
            for level, where in places.items():
                kept.setdefault(level, where)
    return merged


def kind_conflict(inference: Mapping[str, Any]) -> str | None:
    """A feature that holds different types in different records (TFRecord facts), said in one line; or None."""
    names = {0: "int64_list (INT)", 1: "float_list (FLOAT)", 2: "bytes_list (BYTES)"}
    for name in sorted(inference.get("seen", {})):
        places = sorted(inference["seen"][name].items())
        if len(places) > 1:
            return (
                f"feature {name!r} holds {names[int(places[0][0])]} in {places[0][1]} but "
                f"{names[int(places[1][0])]} in {places[1][1]}; a feature has one type in every example"
            )
    return None


def kinds_from_inference(inference: Mapping[str, Any], columns: Sequence[str]) -> dict[str, str]:
    """Column -> INT/FLOAT/BYTES (a column with no value at all is BYTES)."""
    return {c: TYPE_LEVELS[max(inference["columns"].get(c, _ABSENT)[0], 0)] for c in columns}


def feature_names(inference: Mapping[str, Any]) -> list[str]:
    """The features the facts saw, sorted (a TFRecord input has no header to order them)."""
    return sorted(inference["columns"])


def schema_from_inference(inference: Mapping[str, Any], columns: Sequence[str]) -> Any:
    """A tensorflow-metadata Schema, as SchemaGen(infer_feature_shape=True) infers it (see the module doc)."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    kinds = kinds_from_inference(inference, columns)
    rows = inference["rows"]
    schema = schema_pb2.Schema()
    for name in columns:
        _, present, low, high = inference["columns"].get(name, _ABSENT)
        feature = schema.feature.add(name=name, type=getattr(schema_pb2, kinds[name]))
        feature.presence.min_count = 1 if present else 0
        if rows and present == rows:
            feature.presence.min_fraction = 1.0
            if low and low == high:
                feature.shape.dim.add(size=low)
                continue
        else:
            feature.presence.min_fraction = present / rows if rows else 0.0
        if low:
            feature.value_count.min = 1
            if high == 1:
                feature.value_count.max = 1
    return schema
