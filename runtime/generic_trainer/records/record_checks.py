"""Bad data is bad input: the first records of each split decoded before user code runs, and a
decode error the input pipeline raised while it ran traced to its split, file, record and feature.

`check_first_records` (train and tune call it once TensorFlow is loaded, before the user's function)
and `decode_error` (turns tf.io.parse_example's and the TFRecord reader's errors into a
UserInputError, exit 2, or None when the records are fine and the user's own parsing is at fault).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator, Sequence

from generic_trainer.errors import UserInputError
from generic_trainer.records.example_files import (
    damaged_file,
    read_records,
    split_files,
    split_name,
)
from generic_trainer.records.examples_properties import payload_format_of
from generic_trainer.records.record_parsing import Parse, batch_parser
from generic_trainer.records.schemas import load_schema

log = logging.getLogger(__name__)

_FIRST_RECORDS = 16  # records decoded per split before run_fn runs (plus the first of each file)
_MAX_FILES_CHECKED = 64  # files per split whose first record is decoded too
_LOCATE_RECORDS = (
    200_000  # records scanned, at most, to locate a record the input pipeline could not decode
)
NOT_AN_EXAMPLE = "it is not a serialized tf.Example"
_DECODE_PATTERNS = (
    re.compile(
        r"Feature: (?P<feature>\S+) \(data type: (?P<dtype>\w+)\) is required but could not be "
        r"found"
    ),
    re.compile(r"Key: (?P<feature>[^,\s]+), Index: \d+\.\s+(?P<detail>[^\[]*?)\s*(\[|$)"),
    re.compile(r"(?P<detail>Could not parse example input)"),
)


def _sample(pattern: str) -> Iterator[tuple[str, int, bytes]]:
    """(file, record index, record): the split's first records, then the first record of each other
    file."""
    files = split_files(pattern)
    taken = 0
    for path in files:
        for index, record in enumerate(read_records(path, _FIRST_RECORDS - taken)):
            taken += 1
            yield path, index, record
        if taken >= _FIRST_RECORDS:
            break
    for path in files[:_MAX_FILES_CHECKED]:
        for record in read_records(path, 1):
            yield path, 0, record


def _decode_problem(record: bytes, spec: Parse | None) -> str | None:
    """Why `record` does not decode (as a tf.Example, by the schema's parser when given), or
    None."""
    import tensorflow as tf
    from google.protobuf.message import DecodeError

    if spec is None:
        try:
            tf.train.Example.FromString(record)
        except DecodeError:
            return NOT_AN_EXAMPLE
        return None
    try:
        spec(tf.constant([record]))
    except tf.errors.InvalidArgumentError as e:
        return _describe_decode_error(e.message) or " ".join(e.message.split())[:300]
    except (
        UnicodeDecodeError
    ):  # TensorFlow's error text quoted the record's bytes, which are not UTF-8
        return NOT_AN_EXAMPLE
    return None


def _describe_decode_error(message: str) -> str | None:
    """`feature 'x': <what TensorFlow said>` for a tf.io.parse_example error message, or None for
    other errors."""
    for pattern in _DECODE_PATTERNS:
        match = pattern.search(message)
        if match:
            groups = match.groupdict()
            if groups.get("dtype"):
                return (
                    f"feature {groups['feature']!r} ({groups['dtype']}) is required by the "
                    "schema but missing"
                )
            detail = " ".join((groups.get("detail") or "").split()).rstrip(".")
            if detail.startswith("Could not parse"):
                return NOT_AN_EXAMPLE
            return f"feature {groups['feature']!r}: {detail}"
    return None


def _bad_record(
    file_patterns: Sequence[str],
    spec: Parse | None,
    records: Callable[[str], Iterator[tuple[str, int, bytes]]],
    batch: int = 512,
) -> str | None:
    """The first record `records(pattern)` yields that does not decode, described, or None.

    Records are decoded a batch at a time; only a batch that fails is decoded record by record.
    """

    def first_problem(pattern: str, chunk: list[tuple[str, int, bytes]]) -> str | None:
        if spec is not None and _decode_problem_batch([r for _, _, r in chunk], spec) is None:
            return None
        for path, index, record in chunk:
            problem = _decode_problem(record, spec)
            if problem:
                return f"split {split_name(pattern)!r}, {path}, record {index}: {problem}"
        return None

    for pattern in file_patterns:
        chunk: list[tuple[str, int, bytes]] = []
        for item in records(pattern):
            chunk.append(item)
            if len(chunk) == batch:
                problem = first_problem(pattern, chunk)
                if problem:
                    return problem
                chunk = []
        problem = first_problem(pattern, chunk) if chunk else None
        if problem:
            return problem
    return None


def _decode_problem_batch(records: list[bytes], spec: Parse) -> str | None:
    import tensorflow as tf

    try:
        spec(tf.constant(records))
    except tf.errors.InvalidArgumentError as e:
        return e.message
    except (
        UnicodeDecodeError
    ):  # an error text quoting bytes that are not UTF-8: some record is not a tf.Example
        return NOT_AN_EXAMPLE
    return None


def _spec(schema_path: str | None, pattern: str) -> Parse | None:
    """The parser of the schema for the payload format of the split's records (None: no schema)."""
    if not schema_path:
        return None
    return batch_parser(load_schema(schema_path), payload_format_of([pattern]))[0]


def _bad_split(
    pattern: str,
    schema_paths: Sequence[str | None],
    records: Callable[[str], Iterator[tuple[str, int, bytes]]],
) -> tuple[str | None, str | None]:
    """(why the split's records fit none of `schema_paths`, each problem naming its schema, or None;
    the first
    schema they fit, logged when it is not the first given)."""
    problems = []
    for schema_path in schema_paths:
        problem = _bad_record([pattern], _spec(schema_path, pattern), records)
        if problem is None:
            if problems:
                log.info(
                    "split %r follows the schema %s (not %s)",
                    split_name(pattern),
                    schema_path,
                    schema_paths[0],
                )
            return None, schema_path
        problems.append(problem + (f" (schema {schema_path})" if schema_path else ""))
    if len(problems) == 1:
        return problems[0], None
    return (
        "; and against ".join(problems)
        + ": the records fit neither the raw schema nor the transform graph's "
        "transformed_metadata",
        None,
    )


def record_schemas(
    schema_path: str | None, transformed_schema_path: str | None
) -> list[str | None]:
    """The schemas a split's records may follow: the raw schema (--schema), then, with a transform
    graph, its
    transformed_metadata (TFX feeds the Trainer Transform's transformed examples with the raw
    schema)."""
    if schema_path and transformed_schema_path:
        return [schema_path, transformed_schema_path]
    return [schema_path]


def check_first_records(
    file_patterns: Sequence[str],
    schema_path: str | None,
    input_name: str = "--examples",
    transformed_schema_path: str | None = None,
) -> list[str]:
    """Decode the first records of each split (and the first of each file) before user code runs.

    Each must be a tf.Example and, with a schema, parse with `tf.io.parse_example` against the
    schema's feature spec (required features present, types and sizes as declared). With
    `transformed_schema_path` (the transform graph's transformed_metadata), a split whose records
    fit it rather than the raw schema is fine too: only records that fit neither are bad input.
    Returns the patterns whose records follow the transformed schema (not the raw one). Needs
    TensorFlow.
    """
    schema_paths = record_schemas(schema_path, transformed_schema_path)
    transformed = []
    for pattern in file_patterns:
        problem, followed = _bad_split(pattern, schema_paths, _sample)
        if problem:
            raise UserInputError(input_name, f"bad data in {problem}")
        if followed is not None and followed == transformed_schema_path and followed != schema_path:
            transformed.append(pattern)
    return transformed


def decode_error(
    error: BaseException,
    file_patterns: Sequence[str],
    schema_path: str | None,
    input_name: str = "--examples",
    transformed_schema_path: str | None = None,
) -> UserInputError | None:
    """A UserInputError for a decode error the input pipeline raised while user code ran, else None.

    tf.io.parse_example's InvalidArgumentError (missing feature, wrong type or size, not a
    tf.Example) and DataLossError (damaged TFRecord) are bad data, not the user's code: the files
    are scanned (up to a bound) to name the split, file and record. When every record decodes
    against the schema (or, with `transformed_schema_path`, a split against the transform graph's
    transformed_metadata), the module's own parsing is at fault and None is returned (a user-code
    error).
    """
    import tensorflow as tf

    splits = ", ".join(repr(split_name(p)) for p in file_patterns)
    if isinstance(error, tf.errors.DataLossError):
        where = damaged_file(file_patterns) or f"one of the splits {splits}"
        return UserInputError(
            input_name, f"damaged TFRecord data in {where} (TensorFlow said: {error.message})"
        )
    what = (
        _describe_decode_error(error.message)
        if isinstance(error, tf.errors.InvalidArgumentError)
        else None
    )
    if isinstance(
        error, UnicodeDecodeError
    ):  # TensorFlow's error text quoted record bytes that are not UTF-8
        what = NOT_AN_EXAMPLE
    if what is None:
        return None
    cut_short = []

    def every_record(pattern: str) -> Iterator[tuple[str, int, bytes]]:
        budget = _LOCATE_RECORDS // max(1, len(file_patterns))
        for path in split_files(pattern):
            for index, record in enumerate(read_records(path, budget)):
                budget -= 1
                yield path, index, record
            if budget <= 0:
                cut_short.append(pattern)
                return

    schema_paths = record_schemas(schema_path, transformed_schema_path)
    try:
        located = next(
            (
                p
                for p in (
                    _bad_split(pattern, schema_paths, every_record)[0] for pattern in file_patterns
                )
                if p
            ),
            None,
        )
    except (UserInputError, OSError, tf.errors.OpError):
        located, cut_short = None, ["(scan failed)"]
    if located is None and not cut_short:
        # every record decodes against the schema: the module's own parsing disagrees with it
        return None
    where = located or f"one of the splits {splits}: {what}" + (
        f" (schema {schema_path})" if schema_path else ""
    )
    return UserInputError(
        input_name, f"bad data in {where} (found while the input pipeline read it)"
    )
