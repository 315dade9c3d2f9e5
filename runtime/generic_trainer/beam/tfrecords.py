"""TFRecord files of tf.Example for import-examples: framing, the Example message, facts for schema inference.

No Beam and no TensorFlow here (import-examples runs these functions inside its Beam workers):

- `iter_records` reads a TFRecord file, gzipped or plain (told apart by its first bytes, never by its
  name), checking every length and payload against its masked CRC32C, as TensorFlow's reader does.
- `canonical` parses a payload as a tf.Example with a message class built here from the Example
  proto's field numbers (protobuf's own parser, no TensorFlow), refuses what is not one (a parse
  error, or fields a tf.Example does not have: a tf.SequenceExample, random bytes), and returns the
  deterministic serialization: the bytes TFX's ImportExampleGen hashes to pick a split, and writes.
- `record_facts` gives per feature its type level and value count, the facts tabular.merge_inference
  merges; `check_against_schema` compares a record with a given schema.

Every problem is a ValueError whose message names the file and the record (counting from 1).
"""

from __future__ import annotations

import functools
import gzip
import struct
import zlib
from collections.abc import Iterator, Mapping
from typing import Any

from generic_trainer.beam import tabular

GZIP_MAGIC = b"\x1f\x8b"
KIND_LEVELS = {"int64_list": 0, "float_list": 1, "bytes_list": 2}  # tabular.TYPE_LEVELS' order
KIND_NAMES = {0: "int64_list (INT)", 1: "float_list (FLOAT)", 2: "bytes_list (BYTES)"}


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC32C of `data` (google-crc32c's C implementation, a google-cloud-storage dependency)."""
    import google_crc32c

    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _read_exact(f: Any, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = f.read(left)
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def iter_records(path: str, opener: tabular.Opener) -> Iterator[bytes]:
    """The payloads of a TFRecord file, gzipped or plain (by content); ValueError at damage, naming file and record."""
    with opener(path) as raw:
        gzipped = raw.read(2) == GZIP_MAGIC
        raw.seek(0)
        f = gzip.GzipFile(fileobj=raw, mode="rb") if gzipped else raw
        what = "gzipped TFRecord" if gzipped else "TFRecord (plain, not gzip)"
        n = 0
        try:
            while True:
                header = _read_exact(f, 12)
                if not header:
                    return
                n += 1
                if len(header) < 12:
                    raise ValueError(
                        f"{path} record {n}: the file ends inside a record header "
                        f"(cut short, or not {what} data)"
                    )
                (length,) = struct.unpack("<Q", header[:8])
                if masked_crc32c(header[:8]) != struct.unpack("<I", header[8:])[0]:
                    raise ValueError(
                        f"{path} record {n}: the record header fails its checksum (not {what} data)"
                    )
                data = _read_exact(f, length)
                footer = _read_exact(f, 4)
                if len(data) < length or len(footer) < 4:
                    raise ValueError(
                        f"{path} record {n}: the file ends inside the record (cut short)"
                    )
                if masked_crc32c(data) != struct.unpack("<I", footer)[0]:
                    raise ValueError(
                        f"{path} record {n}: the record fails its checksum (damaged data)"
                    )
                yield data
        except (OSError, EOFError, zlib.error) as e:  # gzip: truncated, garbage appended, bad CRC
            raise ValueError(
                f"{path} record {n + 1}: not readable as {what}: {type(e).__name__}: {e}"
            ) from None


def has_records(path: str, opener: tabular.Opener) -> bool:
    """True when the file holds at least one record (damage is left to the full read to report)."""
    try:
        return next(iter_records(path, opener), None) is not None
    except ValueError:
        return True


@functools.lru_cache(maxsize=1)
def example_class() -> Any:
    """tf.train.Example as a protobuf message class, built from tensorflow/core/example/*.proto's field numbers.

    Its own descriptor pool, so it never clashes with TensorFlow's registration of the same names.
    """
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    f = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(
        name="generic_trainer/example.proto", package="tensorflow", syntax="proto3"
    )

    def message(
        name: str, *fields: tuple[str, int, int, int, str]
    ) -> descriptor_pb2.DescriptorProto:
        m = file.message_type.add(name=name)
        for field_name, number, label, kind, type_name in fields:
            field = m.field.add(name=field_name, number=number, label=label, type=kind)
            if type_name:
                field.type_name = type_name
        return m

    repeated, optional = f.LABEL_REPEATED, f.LABEL_OPTIONAL
    message("BytesList", ("value", 1, repeated, f.TYPE_BYTES, ""))
    message("FloatList", ("value", 1, repeated, f.TYPE_FLOAT, ""))
    message("Int64List", ("value", 1, repeated, f.TYPE_INT64, ""))
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
    entry = features.nested_type.add(name="FeatureEntry")
    entry.field.add(name="key", number=1, label=optional, type=f.TYPE_STRING)
    entry.field.add(
        name="value", number=2, label=optional, type=f.TYPE_MESSAGE, type_name=".tensorflow.Feature"
    )
    entry.options.map_entry = True
    message("Example", ("features", 1, optional, f.TYPE_MESSAGE, ".tensorflow.Features"))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tensorflow.Example"))


def canonical(payload: bytes, where: str) -> tuple[bytes, Any]:
    """(deterministic serialization, parsed message) of a tf.Example payload; ValueError when it is not one."""
    from google.protobuf.message import DecodeError

    try:
        example = example_class().FromString(payload)
    except DecodeError as e:
        raise ValueError(f"{where}: not a tf.Example (the bytes do not parse: {e})") from None
    size = example.ByteSize()
    example.DiscardUnknownFields()
    if example.ByteSize() != size:
        raise ValueError(
            f"{where}: not a tf.Example (it holds fields a tf.Example has not, e.g. a "
            "tf.SequenceExample or other bytes)"
        )
    return example.SerializeToString(deterministic=True), example


def record_facts(example: Any) -> dict[str, tuple[int, int]]:
    """Feature -> (type level, number of values); a feature with no value list set counts as missing."""
    out = {}
    for name, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        if kind is not None:
            out[name] = (KIND_LEVELS[kind], len(getattr(feature, kind).value))
    return out


def add_facts(facts: dict[str, Any], found: Mapping[str, tuple[int, int]], where: str) -> None:
    """Count one record's features into a file's facts (inference.py's form, with where each type was first seen)."""
    facts["rows"] += 1
    columns, seen = facts["columns"], facts["seen"]
    for name, (level, count) in found.items():
        column = columns.get(name)
        if column is None:
            columns[name] = [level, 1, count, count]
            seen[name] = {level: where}
            continue
        column[0], column[1] = max(column[0], level), column[1] + 1
        column[2], column[3] = min(column[2], count), max(column[3], count)
        seen[name].setdefault(level, where)


def fixed_sizes(schema: Any) -> dict[str, int]:
    """Feature -> values per example, for a schema's features with a fixed shape."""
    sizes = {}
    for feature in schema.feature:
        if feature.HasField("shape"):
            size = 1
            for dim in feature.shape.dim:
                size *= dim.size
            sizes[feature.name] = size
    return sizes


def file_records(
    path: str,
    opener: tabular.Opener,
    rules: tuple[Mapping[str, str], Mapping[str, int]] | None,
    facts: dict[str, Any],
) -> Iterator[bytes]:
    """The canonical records of a TFRecord file, checked against a schema's (types, fixed sizes) when given;
    counts each into `facts`. ValueError names the file and record."""
    for n, payload in enumerate(iter_records(path, opener), 1):
        where = f"{path} record {n}"
        record, example = canonical(payload, where)
        found = record_facts(example)
        if any(not name.strip() for name in example.features.feature):
            raise ValueError(f"{where}: a feature has an empty name; every feature needs one")
        if rules is not None:
            check_against_schema(found, *rules, where)
        add_facts(facts, found, where)
        yield record


def check_against_schema(
    facts: Mapping[str, tuple[int, int]],
    kinds: Mapping[str, str],
    shapes: Mapping[str, int],
    where: str,
) -> None:
    """Refuse a record whose features the schema does not have, whose types differ, or whose fixed size differs."""
    for name, (level, count) in facts.items():
        if name not in kinds:
            raise ValueError(f"{where}: feature {name!r} is not in the schema")
        if tabular.TYPE_LEVELS[level] != kinds[name]:
            raise ValueError(
                f"{where}: feature {name!r} is {KIND_NAMES[level]}, the schema says {kinds[name]}"
            )
        if name in shapes and count != shapes[name]:
            raise ValueError(
                f"{where}: feature {name!r} has {count} values, its shape in the schema is "
                f"[{shapes[name]}]"
            )
    missing = sorted(n for n in shapes if n not in facts)
    if missing:
        raise ValueError(
            f"{where}: feature(s) {', '.join(map(repr, missing))} missing; the schema gives "
            "them a fixed shape (present in every example)"
        )
