"""TFRecord files of tf.Example or tf.SequenceExample for import-examples: framing, facts, checks.

No Beam and no TensorFlow here (import-examples runs these functions inside its Beam workers):

- `iter_records` reads a TFRecord file, gzipped or plain (told apart by its first bytes, never by
  its name), checking every length and payload against its masked CRC32C, as TensorFlow's reader
  does.
- `file_records` parses each payload as its payload format says (example_protos.canonical: the
  deterministic serialization TFX's ImportExampleGen hashes and writes), counts its facts for
  inference (add_facts) and, with a schema, compares it with the schema (`check_against_schema`).

Every problem is a ValueError whose message names the file and the record (counting from 1).
"""

from __future__ import annotations

import dataclasses
import gzip
import struct
import zlib
from collections.abc import Iterator, Mapping
from typing import Any

from generic_trainer.beam import tabular
from generic_trainer.records import example_protos, record_framing
from generic_trainer.records.example_protos import FORMAT_TF_EXAMPLE, KIND_NAMES

GZIP_MAGIC = b"\x1f\x8b"
SEQUENCE_FEATURE = "##SEQUENCE##"  # tfx_bsl's STRUCT feature holding the sequence features


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC32C of `data` (google-crc32c's C implementation, a google-cloud-storage
    dependency)."""
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
    """The payloads of a TFRecord file, gzipped or plain (by content); ValueError at damage, naming
    file and record."""
    with opener(path) as raw:
        gzipped = raw.read(2) == GZIP_MAGIC
        raw.seek(0)
        gzip_left = record_framing.bytes_left(raw, gzipped=True)
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
                left = gzip_left if gzipped else record_framing.bytes_left(f, gzipped=False)
                data = record_framing.read_payload(f, length, left, f"{path} record {n}")
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


def add_facts(facts: dict[str, Any], found: Mapping[str, tuple[int, int]], where: str) -> None:
    """Count one record's features into a file's facts (inference.py's form, with where each type
    was first seen)."""
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


@dataclasses.dataclass(frozen=True)
class SchemaRules:
    """What a given schema says of each record: feature types, fixed sizes, sequence feature
    types."""

    kinds: Mapping[str, str]
    shapes: Mapping[str, int]
    sequence_kinds: Mapping[str, str] = dataclasses.field(default_factory=dict)


def schema_rules(schema: Any) -> SchemaRules:
    """The rules of a Schema; the sequence features are the `##SEQUENCE##` STRUCT's."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    name_of = schema_pb2.FeatureType.Name
    kinds = {f.name: name_of(f.type) for f in schema.feature if f.name != SEQUENCE_FEATURE}
    sequence = next((f for f in schema.feature if f.name == SEQUENCE_FEATURE), None)
    sequence_kinds = (
        {f.name: name_of(f.type) for f in sequence.struct_domain.feature} if sequence else {}
    )
    return SchemaRules(kinds, fixed_sizes(schema), sequence_kinds)


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
    rules: SchemaRules | None,
    facts: dict[str, Any],
    payload_format: str = FORMAT_TF_EXAMPLE,
) -> Iterator[tuple[bytes, Any]]:
    """(canonical record, parsed message) of each record of a TFRecord file, checked against a
    schema's rules when given; counts each into `facts`. ValueError names the file and record."""
    for n, payload in enumerate(iter_records(path, opener), 1):
        where = f"{path} record {n}"
        record, message = example_protos.canonical(payload, where, payload_format)
        found = example_protos.record_facts(message)
        try:
            steps = example_protos.sequence_facts(message)
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
        if any(not name.strip() for name in (*found, *steps)):
            raise ValueError(f"{where}: a feature has an empty name; every feature needs one")
        if rules is not None:
            check_against_schema(found, rules.kinds, rules.shapes, where)
            check_sequence(steps, rules.sequence_kinds, where)
        add_facts(facts, found, where)
        add_sequence_facts(facts, steps, where)
        add_values(facts, example_protos.string_values(message))
        yield record, message


def add_sequence_facts(
    facts: dict[str, Any], found: Mapping[str, tuple[int, int]], where: str
) -> None:
    """Count one SequenceExample's sequence features (steps as values) into `facts["sequence"]`;
    where each type was first seen goes in `facts["seen"]` as `##SEQUENCE##<name>`."""
    columns = facts.setdefault("sequence", {})
    for name, (level, steps) in found.items():
        old = columns.get(name)
        columns[name] = (
            [level, 1, steps, steps]
            if old is None
            else [max(old[0], level), old[1] + 1, min(old[2], steps), max(old[3], steps)]
        )
        if level >= 0:
            facts["seen"].setdefault(f"{SEQUENCE_FEATURE}{name}", {}).setdefault(level, where)


def add_values(facts: dict[str, Any], found: Mapping[str, list[bytes]]) -> None:
    """Keep each bytes feature's distinct values as text (None past the domain size or not
    UTF-8)."""
    kept = facts.setdefault("values", {})
    for name, values in found.items():
        have = kept.get(name, set())
        if have is None:
            continue
        try:
            have |= {v.decode("utf-8") for v in values}
        except UnicodeDecodeError:
            have = None
        kept[name] = None if have is None or len(have) > tabular.MAX_STRING_DOMAIN_SIZE else have


def check_sequence(
    found: Mapping[str, tuple[int, int]], kinds: Mapping[str, str], where: str
) -> None:
    """Refuse sequence features the schema's `##SEQUENCE##` does not have, or of another type."""
    for name, (level, _) in found.items():
        if name not in kinds:
            raise ValueError(
                f"{where}: sequence feature {name!r} is not in the schema's {SEQUENCE_FEATURE}"
            )
        if level >= 0 and tabular.TYPE_LEVELS[level] != kinds[name]:
            raise ValueError(
                f"{where}: sequence feature {name!r} is {KIND_NAMES[level]}, the schema says "
                f"{kinds[name]}"
            )


def check_against_schema(
    facts: Mapping[str, tuple[int, int]],
    kinds: Mapping[str, str],
    shapes: Mapping[str, int],
    where: str,
) -> None:
    """Refuse a record whose features the schema does not have, whose types differ, or whose fixed
    size differs."""
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
