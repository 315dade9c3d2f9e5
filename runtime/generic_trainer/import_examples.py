"""The import-examples verb: CSV or Parquet files to a TFX Examples artifact, on Apache Beam.

    <output>/Split-<name>/data_tfrecord-NNNNN-of-MMMMM.gz   gzipped TFRecords of tf.Example (ExampleGen's layout)
    <output>/schema.pbtxt                                   the schema given, or the one inferred

Before Beam starts, every input file's columns are checked (against the schema when one is given,
else against the first file). The pipeline reads each file in Arrow blocks (files are the unit of
parallelism), encodes rows as tf.Example with missing cells left out (tabular.py) and sends each
record to a split by the hash of its bytes, or by the pattern it came from (`--input-splits`).
Without a schema the files are read twice: once to infer the types (every value counts), once to
encode, so memory does not grow with the rows. Everything is written to a staging dir and renamed
into place when the pipeline has succeeded.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from generic_trainer.beam import beam_run, tabular
from generic_trainer.errors import UserInputError
from generic_trainer.intake.data_request import ImportExamplesRequest

log = logging.getLogger(__name__)

DATA_FILE_PREFIX = "data_tfrecord"  # TFX ExampleGen's file name
SCHEMA_FILE = "schema.pbtxt"
COUNTER_PREFIX = "examples_"


@dataclasses.dataclass(frozen=True)
class ImportResult:
    """What an import wrote: examples per split, the features, and whether the schema was inferred."""

    output: str
    counts: Mapping[str, int]
    feature_count: int
    schema_inferred: bool
    seconds: float

    def summary(self) -> dict[str, Any]:
        total = sum(self.counts.values())
        return {"output": self.output, "num_examples": dict(self.counts), "feature_count": self.feature_count,
                "schema": "inferred" if self.schema_inferred else "given", "seconds": round(self.seconds, 2),
                "examples_per_second": round(total / self.seconds, 1) if self.seconds else None}


# ---------------------------------------------------------------------------------------------------------------
# Beam DoFns (module level, so every runner can pickle them)
# ---------------------------------------------------------------------------------------------------------------


class _InferFile:
    """Per file: inference facts of every batch, merged."""

    def __init__(self, fmt: str, columns: Sequence[str]):
        self.fmt, self.columns = fmt, list(columns)

    def __call__(self, path: str) -> dict[str, Any]:
        try:
            parts = [tabular.infer_batch(b)
                     for b in tabular.iter_batches(path, self.fmt, self.columns, None, beam_run.open_binary)]
        except Exception as e:  # pyarrow's parse errors: find the line
            where = tabular.locate_csv_problem(path, {}, beam_run.open_binary) if self.fmt == "csv" else None
            raise beam_run.DataError(where or f"{path}: {type(e).__name__}: {e}") from None
        return tabular.merge_inference(parts)


def _merge(parts: Any) -> dict[str, Any]:
    return tabular.merge_inference(list(parts))


def _encode_file_fn(fmt: str, columns: Sequence[str], given_kinds: Mapping[str, str] | None,
                    split_names: Sequence[str], cumulative: Sequence[int] | None) -> Any:
    """A DoFn: file path -> serialized tf.Examples, tagged with their split's name."""
    import apache_beam as beam
    from apache_beam.metrics import Metrics

    class EncodeFile(beam.DoFn):
        def setup(self) -> None:
            self.counters = {s: Metrics.counter(beam_run.METRICS_NAMESPACE, COUNTER_PREFIX + s) for s in split_names}

        def process(self, path: str, inferred: Mapping[str, Any] | None = None):
            kinds = given_kinds or tabular.kinds_from_inference(inferred, columns)
            counts = dict.fromkeys(split_names, 0)
            try:
                for batch in tabular.iter_batches(path, fmt, columns, kinds, beam_run.open_binary):
                    records = tabular.encode_batch(batch, kinds)
                    if cumulative is None:
                        counts[split_names[0]] += len(records)
                        for record in records:
                            yield beam.pvalue.TaggedOutput(split_names[0], record)
                        continue
                    for record in records:
                        split = split_names[tabular.split_index(record, cumulative)]
                        counts[split] += 1
                        yield beam.pvalue.TaggedOutput(split, record)
            except beam_run.DataError:
                raise
            except Exception as e:  # pyarrow's conversion and parse errors: find the line and column
                where = None
                if fmt == "csv":
                    where = tabular.locate_csv_problem(path, kinds, beam_run.open_binary,
                                                       "schema" if given_kinds else "types inferred from the data")
                raise beam_run.DataError(where or f"{path}: {type(e).__name__}: {e}") from None
            for split, n in counts.items():
                if n:
                    self.counters[split].inc(n)

    return EncodeFile()


class _WriteSchema:
    """Writes the inferred schema (from the merged inference facts) as text."""

    def __init__(self, path: str, columns: Sequence[str]):
        self.path, self.columns = path, list(columns)

    def __call__(self, inference: Mapping[str, Any]) -> None:
        from google.protobuf import text_format

        schema = tabular.schema_from_inference(inference, self.columns)
        beam_run.write_text(self.path, text_format.MessageToString(schema))


# ---------------------------------------------------------------------------------------------------------------
# The verb
# ---------------------------------------------------------------------------------------------------------------


def _sources(request: ImportExamplesRequest) -> list[tuple[list[str], list[str], list[int] | None, str, str]]:
    """(files, split names, cumulative buckets or None, input name, pattern) per input pattern."""
    if request.input_pattern:
        names = [n for n, _ in request.splits]
        return [(beam_run.match_files(request.input_pattern), names,
                 tabular.cumulative_buckets([b for _, b in request.splits]), "--input", request.input_pattern)]
    return [(beam_run.match_files(pattern), [name], None, "--input-splits", pattern)
            for name, pattern in request.input_splits]


def _check_columns(request: ImportExamplesRequest, sources: Sequence[tuple], schema: Any) -> list[str]:
    """The columns every file shares (schema order when given); refuses files that differ."""
    expected = [f.name for f in schema.feature] if schema is not None else None
    reference = None
    for files, _, _, input_name, pattern in sources:
        if not files:
            raise UserInputError(input_name, f"no files match {pattern}")
        for path in files:
            try:
                columns = tabular.read_columns(path, request.format, beam_run.open_binary)
            except Exception as e:
                raise UserInputError(input_name, f"{path}: not a readable {request.format.upper()} file: {e}") from None
            if len(set(columns)) != len(columns):
                dup = sorted({c for c in columns if columns.count(c) > 1})
                raise UserInputError(input_name, f"{path}: column names repeat: {', '.join(dup)}")
            if expected is not None:
                missing, extra = sorted(set(expected) - set(columns)), sorted(set(columns) - set(expected))
                if missing or extra:
                    raise UserInputError(input_name, f"{path}: the columns do not match the schema {request.schema}: "
                                         + "; ".join(p for p in (
                                             f"missing {', '.join(missing)}" if missing else "",
                                             f"not in the schema: {', '.join(extra)}" if extra else "") if p))
            elif reference is None:
                reference = (path, columns)
            elif set(columns) != set(reference[1]):
                raise UserInputError(input_name, f"{path}: columns {', '.join(columns)} differ from those of "
                                                 f"{reference[0]} ({', '.join(reference[1])})")
            if request.format == "parquet":
                bad = [c for c, k in tabular.parquet_kinds(path, beam_run.open_binary).items() if k is None]
                if bad:
                    raise UserInputError(input_name, f"{path}: columns {', '.join(bad)} are neither numbers nor "
                                                     "strings (a tf.Example feature holds int64, float or bytes)")
    return expected if expected is not None else list(reference[1])


def _given_kinds(schema: Any) -> dict[str, str]:
    kinds = tabular.kinds_from_schema(schema)
    bad = [n for n, k in kinds.items() if k not in tabular.TYPE_LEVELS]
    if bad:
        raise UserInputError("--schema", f"features {', '.join(bad)} have no INT, FLOAT or BYTES type; "
                                         "a table column becomes one of those")
    return kinds


def run(request: ImportExamplesRequest) -> ImportResult:
    """Import the tables into a new Examples directory; returns the counts per split. Its outputs are held
    for the run: a second run into them fails at once (exit 2) naming this one."""
    from generic_trainer.artifacts import outputs

    held = [(request.output, "--output"), (request.schema_output, "--schema-output")]
    with outputs.exclusive_all(held, new=("--output",)):
        return _import(request)


def _import(request: ImportExamplesRequest) -> ImportResult:
    import apache_beam as beam

    from generic_trainer.records.schemas import load_schema

    started = time.monotonic()
    schema = load_schema(request.schema) if request.schema else None
    given_kinds = _given_kinds(schema) if schema is not None else None
    sources = _sources(request)
    columns = _check_columns(request, sources, schema)
    split_names = [name for _, names, _, _, _ in sources for name in names]
    all_files = sorted({f for files, *_ in sources for f in files})
    options = beam_run.pipeline_options(request.beam_args, beam_run.total_bytes(all_files))
    log.info("import-examples: %d %s file(s), %d columns, splits %s, schema %s; beam %s",
             sum(len(s[0]) for s in sources), request.format, len(columns),
             ", ".join(f"{n}:{b}" for n, b in request.splits) or ", ".join(split_names),
             request.schema or "inferred from the data", beam_run.describe_options(options))
    staging = beam_run.new_staging(request.output)
    schema_staging = None
    try:
        if schema is not None:
            from google.protobuf import text_format

            beam_run.write_text(beam_run.join(staging, SCHEMA_FILE), text_format.MessageToString(schema))
        pipeline = beam.Pipeline(options=options)
        inferred = None
        if given_kinds is None:
            inferred = (pipeline
                        | "InferFiles" >> beam.Create(all_files)
                        | "InferReshuffle" >> beam.Reshuffle()
                        | "Infer" >> beam.Map(_InferFile(request.format, columns))
                        | "InferMerge" >> beam.CombineGlobally(_merge))
            _ = inferred | "WriteSchema" >> beam.Map(_WriteSchema(beam_run.join(staging, SCHEMA_FILE), columns))
        per_split: dict[str, list[Any]] = {name: [] for name in split_names}
        for i, (files, names, cumulative, _, _) in enumerate(sources):
            side = (beam.pvalue.AsSingleton(inferred),) if inferred is not None else ()
            encoded = (pipeline
                       | f"Files[{i}]" >> beam.Create(files)
                       | f"Reshuffle[{i}]" >> beam.Reshuffle()
                       | f"Encode[{i}]" >> beam.ParDo(
                           _encode_file_fn(request.format, columns, given_kinds, names, cumulative), *side
                       ).with_outputs(*names))
            for name in names:
                per_split[name].append(encoded[name])
        for name, pcolls in per_split.items():
            records = pcolls[0] if len(pcolls) == 1 else pcolls | f"Flatten[{name}]" >> beam.Flatten()
            _ = records | f"Write[{name}]" >> beam.io.WriteToTFRecord(
                beam_run.join(staging, f"Split-{name}", DATA_FILE_PREFIX), file_name_suffix=".gz")
        try:
            counters = beam_run.run(pipeline)
        except Exception as e:
            message = beam_run.data_error_message(e)
            if message:
                raise UserInputError("--input" if request.input_pattern else "--input-splits", message) from None
            raise
        counts = beam_run.split_counts(counters, COUNTER_PREFIX, split_names)
        if request.schema_output:
            with beam_run.open_binary(beam_run.join(staging, SCHEMA_FILE)) as f:
                schema_text = f.read().decode("utf-8")
            schema_staging = beam_run.new_staging(request.schema_output)
            beam_run.write_text(beam_run.join(schema_staging, SCHEMA_FILE), schema_text)
            beam_run.publish(schema_staging, request.schema_output)
            schema_staging = None
        beam_run.publish(staging, request.output)
        staging = None
    finally:
        beam_run.discard(staging, schema_staging)
    result = ImportResult(output=request.output, counts=counts, feature_count=len(columns),
                          schema_inferred=schema is None, seconds=time.monotonic() - started)
    log.info("import-examples: wrote %s examples to %s in %.1f s (%.0f examples/s)",
             ", ".join(f"{n} {s}" for s, n in counts.items()), request.output, result.seconds,
             sum(counts.values()) / max(result.seconds, 1e-9))
    return result


def kfp_metadata(request: ImportExamplesRequest, result: ImportResult) -> dict[str, dict[str, Any]]:
    """Executor-output metadata of the examples and output_schema artifacts."""
    examples = {"split_names": list(result.counts), "num_examples": dict(result.counts),
                "feature_count": result.feature_count, "format": request.format}
    for split, n in result.counts.items():
        examples[f"num_examples_{split}"] = n
    return {"examples": examples,
            "output_schema": {"feature_count": result.feature_count,
                              "inferred": result.schema_inferred, "file": SCHEMA_FILE}}
