"""Bad data is bad input: the first records of each split decoded before user code runs, and a
decode error the input pipeline raised while it ran traced to its split, file, record and feature.

`check_first_records` (train and tune call it once TensorFlow is loaded, before the user's function)
and `decode_error` (turns tf.io.parse_example's and the TFRecord reader's errors into a
UserInputError, exit 2, or None when the records are fine and the user's own parsing is at fault).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence

from generic_trainer.errors import UserInputError
from generic_trainer.records import decode_problems
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
_LOCATE_RECORDS = 200_000  # records scanned, at most, to locate a record that did not decode


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
        if (
            spec is not None
            and decode_problems.batch_problem([r for _, _, r in chunk], spec) is None
        ):
            return None
        for path, index, record in chunk:
            problem = decode_problems.record_problem(record, spec)
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
    the first schema they fit, logged when it is not the first given)."""
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
    graph, its transformed_metadata (TFX feeds the Trainer Transform's transformed examples with
    the raw schema)."""
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
    """The bad-data error behind a decode error the input pipeline raised while user code ran.

    tf.io.parse_example's InvalidArgumentError (missing feature, wrong type or size, not a
    tf.Example) and DataLossError (damaged TFRecord) are bad data, not the user's code: the files
    are scanned (up to a bound) to name the split, file and record.

    Args:
      error: what the input pipeline raised.
      file_patterns: the split file patterns it read.
      schema_path: the schema the records are checked against (None: none).
      input_name: what the error names.
      transformed_schema_path: the transform graph's transformed_metadata schema, for the splits
        the graph was applied to.

    Returns:
      The UserInputError naming the bad data, or None when the error is no decode error or every
      record decodes (the module's own parsing is at fault: a user-code error).
    """
    import tensorflow as tf

    splits = ", ".join(repr(split_name(p)) for p in file_patterns)
    if isinstance(error, tf.errors.DataLossError):
        where = damaged_file(file_patterns) or f"one of the splits {splits}"
        return UserInputError(
            input_name, f"damaged TFRecord data in {where} (TensorFlow said: {error.message})"
        )
    what = _error_problem(error)
    if what is None:
        return None
    schema_paths = record_schemas(schema_path, transformed_schema_path)
    located, cut_short = _locate_bad_record(file_patterns, schema_paths)
    if located is None and not cut_short:
        # every record decodes against the schema: the module's own parsing disagrees with it
        return None
    where = located or f"one of the splits {splits}: {what}" + (
        f" (schema {schema_path})" if schema_path else ""
    )
    return UserInputError(
        input_name, f"bad data in {where} (found while the input pipeline read it)"
    )


def _error_problem(error: BaseException) -> str | None:
    """What a decode error says is wrong with the data (None: not a decode error)."""
    import tensorflow as tf

    if isinstance(error, UnicodeDecodeError):  # TensorFlow's text quoted non-UTF-8 record bytes
        return decode_problems.NOT_AN_EXAMPLE
    if isinstance(error, tf.errors.InvalidArgumentError):
        return decode_problems.describe_decode_error(error.message)
    return None


def _locate_bad_record(
    file_patterns: Sequence[str], schema_paths: list[str | None]
) -> tuple[str | None, list[str]]:
    """(where the first bad record is, None if none found; the patterns the scan cut short)."""
    import tensorflow as tf

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

    try:
        for pattern in file_patterns:
            located = _bad_split(pattern, schema_paths, every_record)[0]
            if located:
                return located, cut_short
    except (UserInputError, OSError, tf.errors.OpError):
        return None, ["(scan failed)"]
    return None, cut_short
