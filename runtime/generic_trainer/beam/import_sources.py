"""import-examples' inputs before Beam starts: the files of each input pattern (spans, dates and
versions resolved as TFX's ExampleGen does, spans.py), the columns every table shares (checked
against the schema when given), and at least one row per pattern. Errors: UserInputError.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

from generic_trainer.beam import beam_run, example_encoding, spans, tabular, tfrecords
from generic_trainer.beam.import_fns import Splitter
from generic_trainer.errors import UserInputError
from generic_trainer.records.example_protos import FORMAT_TF_EXAMPLE, FORMAT_TF_SEQUENCE_EXAMPLE


@dataclasses.dataclass(frozen=True)
class Source:
    """One input pattern: its files, where its records go, and how errors name it."""

    files: tuple[str, ...]
    splitter: Splitter
    input_name: str
    pattern: str


def _stat(path: str) -> tuple[int, int]:
    """(bytes, mtime in whole seconds) of a local file or a URI Beam knows."""
    if "://" not in path:
        info = os.stat(path)
        return info.st_size, int(info.st_mtime_ns // 1_000_000_000)
    from apache_beam.io.filesystems import FileSystems

    meta = FileSystems.match([path])[0].metadata_list[0]
    return meta.size_in_bytes, int(meta.last_updated_in_seconds)


def resolve_sources(
    hash_pattern: str | None,
    hash_splits: Sequence[tuple[str, int]],
    input_splits: Sequence[tuple[str, str]],
    partition_feature: str | None,
    range_config: Mapping[str, Any] | None,
) -> tuple[list[Source], spans.Resolved]:
    """The sources of `--input` (hash splits) or `--input-splits`, their specs filled (spans.py)."""
    input_name = "--input" if hash_pattern else "--input-splits"
    given = [("single_split", hash_pattern)] if hash_pattern else list(input_splits)
    try:
        resolved = spans.resolve(given, range_config, beam_run.match_files, _stat)
    except ValueError as e:
        raise UserInputError(input_name, str(e)) from None
    if hash_pattern:
        [(_, pattern)] = resolved.patterns
        names = tuple(n for n, _ in hash_splits)
        cumulative = tuple(example_encoding.cumulative_buckets([b for _, b in hash_splits]))
        splitter = Splitter(names, cumulative, partition_feature)
        return [
            Source(tuple(beam_run.match_files(pattern)), splitter, input_name, pattern)
        ], resolved
    sources = [
        Source(tuple(beam_run.match_files(pattern)), Splitter((name,)), input_name, pattern)
        for name, pattern in resolved.patterns
    ]
    return sources, resolved


def _file_columns(fmt: str, input_name: str, path: str) -> list[str]:
    """A table's column names, refusing repeated and empty names and Parquet types a tf.Example
    cannot hold."""
    try:
        columns = tabular.read_columns(path, fmt, beam_run.open_binary)
    except Exception as e:
        raise UserInputError(
            input_name, f"{path}: not a readable {fmt.upper()} file: {e}"
        ) from None
    empty = [str(i) for i, c in enumerate(columns, 1) if not c.strip()]
    if empty:
        raise UserInputError(
            input_name,
            f"{path}: column {', '.join(empty)} (counting from 1) has no name; every "
            "column needs one (it becomes the feature's name)",
        )
    if len(set(columns)) != len(columns):
        dup = sorted({c for c in columns if columns.count(c) > 1})
        raise UserInputError(input_name, f"{path}: column names repeat: {', '.join(dup)}")
    if fmt == "parquet":
        bad = [c for c, k in tabular.parquet_kinds(path, beam_run.open_binary).items() if k is None]
        if bad:
            raise UserInputError(
                input_name,
                f"{path}: columns {', '.join(bad)} are neither numbers nor "
                "strings (a tf.Example feature holds int64, float or bytes)",
            )
    return columns


def _check_rows(fmt: str, files: Sequence[str], input_name: str, pattern: str) -> None:
    """Refuse an input pattern whose files hold no row (no record) at all."""
    opener = beam_run.open_binary
    if fmt == "tfrecord":
        if any(tfrecords.has_records(f, opener) for f in files):
            return
        what = "holds no records (it is empty)"
    else:
        if any(tabular.has_rows(f, fmt, opener) for f in files):
            return
        what = "has a header line but no rows" if fmt == "csv" else "holds no rows"
    if len(files) == 1:
        raise UserInputError(input_name, f"{files[0]} {what}; expected at least one example")
    raise UserInputError(
        input_name,
        f"none of the {len(files)} files matching {pattern} holds a row ({files[0]} "
        f"{what}); expected at least one example",
    )


def check_sources(
    fmt: str, sources: Sequence[Source], schema: Any, schema_path: str | None
) -> list[str] | None:
    """The columns every table shares (schema order when given; None for TFRecords without a
    schema).

    Refuses patterns matching nothing or holding no row, and tables whose columns differ.
    """
    expected = [f.name for f in schema.feature] if schema is not None else None
    reference = None
    for source in sources:
        files, input_name, pattern = source.files, source.input_name, source.pattern
        if not files:
            raise UserInputError(input_name, f"no files match {pattern}")
        if fmt != "tfrecord":
            for path in files:
                columns = _file_columns(fmt, input_name, path)
                if expected is not None:
                    missing, extra = (
                        sorted(set(expected) - set(columns)),
                        sorted(set(columns) - set(expected)),
                    )
                    if missing or extra:
                        raise UserInputError(
                            input_name,
                            f"{path}: the columns do not match the schema "
                            f"{schema_path}: "
                            + "; ".join(
                                p
                                for p in (
                                    f"missing {', '.join(missing)}" if missing else "",
                                    f"not in the schema: {', '.join(extra)}" if extra else "",
                                )
                                if p
                            ),
                        )
                elif reference is None:
                    reference = (path, columns)
                elif set(columns) != set(reference[1]):
                    raise UserInputError(
                        input_name,
                        f"{path}: columns {', '.join(columns)} differ from those of "
                        f"{reference[0]} ({', '.join(reference[1])})",
                    )
        _check_rows(fmt, files, input_name, pattern)
    if expected is not None:
        return expected
    return list(reference[1]) if reference else None


def given_kinds(schema: Any, payload_format: str = FORMAT_TF_EXAMPLE) -> dict[str, str]:
    """Feature -> INT/FLOAT/BYTES of a given schema (a SequenceExample's `##SEQUENCE##` aside)."""
    kinds = tabular.kinds_from_schema(schema)
    if payload_format == FORMAT_TF_SEQUENCE_EXAMPLE:
        kinds.pop(tfrecords.SEQUENCE_FEATURE, None)
    bad = [n for n, k in kinds.items() if k not in tabular.TYPE_LEVELS]
    if bad:
        raise UserInputError(
            "--schema",
            f"features {', '.join(bad)} have no INT, FLOAT or BYTES type; "
            "a table column becomes one of those",
        )
    return kinds


def prepare_sources(
    fmt: str,
    schema_path: str | None,
    payload_format: str,
    patterns: tuple[str | None, Sequence[tuple[str, int]], Sequence[tuple[str, str]]],
    partition_feature: str | None,
    range_config: Mapping[str, Any] | None,
) -> tuple[Any, list[Source], dict[str, Any], list[str] | None]:
    """(schema or None, sources, TFX's Examples properties, the tables' columns) of an import.

    `patterns`: (the `--input` pattern or None, its hash splits, the `--input-splits`)."""
    from generic_trainer.records import examples_properties
    from generic_trainer.records.schemas import load_schema

    schema = load_schema(schema_path) if schema_path else None
    if schema is not None:
        given_kinds(schema, payload_format)
    sources, resolved = resolve_sources(*patterns, partition_feature, range_config)
    columns = check_sources(fmt, sources, schema, schema_path)
    properties = examples_properties.properties(
        payload_format, resolved.span, resolved.version, resolved.fingerprint
    )
    return schema, sources, properties, columns
