"""When a transform graph is applied to the examples a module reads (`transform_plan`): the plan
data.DataAccessor follows, decided from the schemas and the first record of the files, as TFX feeds
a module raw or Transform's materialised examples. No TensorFlow here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

from generic_trainer.errors import UserInputError

if TYPE_CHECKING:
    from tensorflow_metadata.proto.v0 import schema_pb2


_KINDS = {
    1: "bytes_list",
    2: "int64_list",
    3: "float_list",
}  # schema_pb2 BYTES, INT, FLOAT -> tf.train.Feature
_MATERIALISED = (
    "transformed_examples"  # how TFX's Transform names the files of its transformed examples
)


class Plan(NamedTuple):
    """What `transform_plan` decided: apply the transform graph or not, why, and which of the
    features
    asked for come out of the transform graph (the others are parsed from the files as they are)."""

    apply: bool
    reason: str
    from_transform: tuple[str, ...] = ()


def transform_plan(
    requested: schema_pb2.Schema,
    label_key: str | None,
    raw: schema_pb2.Schema,
    transformed: schema_pb2.Schema,
    record: dict[str, str | None] | None,
    files: Sequence[str],
    where: tuple[str, str, str] = ("--examples", "the raw schema", "the transform graph's output"),
) -> Plan:
    """Whether a dataset asked for with `requested` (and `label_key`) needs the transform graph
    applied to the examples, why, and which features it gives.

    As tfx_bsl, the features of `requested` are read from the files (`record`: feature name ->
    tf.train.Feature kind of their first record). A feature asked for that the files lack (or
    hold with another type), and that the transform graph outputs with that type, comes from the
    transform graph applied to the examples (parsed with the raw schema). When `requested` is the
    transformed schema itself, the examples are judged whole: raw (every feature from the graph)
    or Transform's output (read as they are); when its features have the names and types of raw
    ones, files named like Transform's materialised output (`transformed_examples-*`) are taken
    as transformed, others as raw. A required feature in neither the files nor the graph's output
    is a UserInputError naming it. `where` names (examples, raw schema, transformed schema).
    """
    if record is None:
        return Plan(False, "the examples hold no records")
    xf_types = {f.name: f.type for f in transformed.feature}

    def refuse(what: str, unknown: list[str]) -> UserInputError:
        return UserInputError(
            where[0],
            f"the module asks for {what}{', '.join(map(repr, unknown))}, which is neither "
            f"in the examples (the first record of {files[0]} holds {', '.join(sorted(record))}) "
            f"nor a transformed feature ({where[2]}: {', '.join(sorted(xf_types))})",
        )

    if requested == transformed and requested != raw:
        if label_key is not None and label_key not in record and label_key not in xf_types:
            raise refuse("label_key ", [label_key])
        return _whole_schema_plan(requested, label_key, raw, transformed, record, files)
    return _feature_plan(requested, label_key, raw, xf_types, record, refuse)


def _feature_plan(
    requested: schema_pb2.Schema,
    label_key: str | None,
    raw: schema_pb2.Schema,
    xf_types: dict[str, int],
    record: dict[str, str | None],
    refuse: Callable[[str, list[str]], UserInputError],
) -> Plan:
    """Feature by feature: those the files hold (with the type asked for) are read as they are,
    the others come from the transform graph when it outputs them."""
    asked = {f.name: f for f in requested.feature}
    names = list(asked) + ([label_key] if label_key is not None and label_key not in asked else [])

    def in_files(name: str) -> bool:
        return name in record and (
            name not in asked or record[name] == _KINDS.get(asked[name].type)
        )

    missing = [n for n in names if not in_files(n)]
    from_xf = tuple(
        n for n in missing if n in xf_types and (n not in asked or asked[n].type == xf_types[n])
    )
    unknown = [
        n for n in missing if n not in from_xf and (n not in asked or required_feature(asked[n]))
    ]
    if unknown:
        raise refuse("label_key " if unknown == [label_key] else "feature(s) ", unknown)
    if from_xf:
        return Plan(
            True,
            f"the module asks for transformed features the examples lack ({', '.join(from_xf)})",
            from_xf,
        )
    if requested == raw:
        return Plan(False, "the module asks for the raw schema")
    return Plan(False, "the examples hold every feature the module asks for")


def required_feature(feature: schema_pb2.Feature) -> bool:
    """A feature tfx_bsl parses as a FixedLenFeature without default: every example must hold it."""
    return feature.HasField("shape") and feature.presence.min_fraction == 1


def _whole_schema_plan(
    requested: schema_pb2.Schema,
    label_key: str | None,
    raw: schema_pb2.Schema,
    transformed: schema_pb2.Schema,
    record: dict[str, str | None],
    files: Sequence[str],
) -> Plan:
    """The module asks for the transformed schema itself: the examples are Transform's output or raw
    ones."""
    raw_types = {f.name: f.type for f in raw.feature}
    xf_types = {f.name: f.type for f in transformed.feature}
    names = list(xf_types) + (
        [label_key] if label_key is not None and label_key not in xf_types else []
    )
    every = tuple(n for n in names if n in xf_types)
    only = [
        n for n in names if n in xf_types and (n not in raw_types or raw_types[n] != xf_types[n])
    ]
    if only:
        if all(record.get(n) == _KINDS.get(xf_types[n]) for n in only):
            return Plan(False, f"the examples hold the transformed features {', '.join(only)}")
        return Plan(
            True,
            f"the module asks for transformed features ({', '.join(only)}); the examples are raw",
            every,
        )
    extra = sorted(set(record) - set(xf_types))
    if extra:
        return Plan(
            True,
            f"the module asks for the transformed schema; the examples hold raw features "
            f"({', '.join(extra)})",
            every,
        )
    if files and all(os.path.basename(f).startswith(_MATERIALISED) for f in files):
        return Plan(
            False,
            f"the module asks for the transformed schema; files named {_MATERIALISED}-* are "
            "Transform's output",
        )
    return Plan(
        True,
        "the module asks for the transformed schema, whose features have the names and types of "
        "the "
        "raw ones; the examples are taken as raw (Transform's materialised examples are named "
        f"{_MATERIALISED}-*)",
        every,
    )
