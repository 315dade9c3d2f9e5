"""The import-examples verb: CSV, Parquet or TFRecord files to a TFX Examples artifact, on Apache Beam.

    <output>/Split-<name>/data_tfrecord-NNNNN-of-MMMMM.gz   gzipped TFRecords of tf.Example (ExampleGen's layout)
    <output>/schema.pbtxt                                   the schema given, or the one inferred

Before Beam starts, every table's columns are checked (against the schema when one is given, else
against the first file), and each input pattern must hold a row. The pipeline reads each file in
Arrow blocks (files are the unit of parallelism), encodes rows as tf.Example with missing cells left
out (tabular.py) and sends each record to a split by the hash of its bytes, or by the pattern it came
from (`--input-splits`). Without a schema tables are read twice: once to infer the types (every value
counts), once to encode, so memory does not grow with the rows. TFRecord files (tfrecords.py, as TFX's
ImportExampleGen) are read once: each record is parsed as a tf.Example, re-serialized deterministically
(the bytes hashed and written) and counted for inference. The schema inferred is SchemaGen's with
`infer_feature_shape=True` (inference.py). Beam's workers write the shards into a staging dir, renamed
into place once the pipeline has succeeded (after `before_publish`: contract.py).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from generic_trainer.artifacts import outputs
from generic_trainer.beam import beam_run, inference, tabular, tfrecords
from generic_trainer.errors import UserInputError
from generic_trainer.intake import data_options, data_request
from generic_trainer.intake.contract import VerbContract
from generic_trainer.intake.data_request import ImportExamplesRequest

log = logging.getLogger(__name__)

DATA_FILE_PREFIX = "data_tfrecord"  # TFX ExampleGen's file name
SCHEMA_FILE = "schema.pbtxt"
COUNTER_PREFIX = "examples_"
FACTS_TAG = "facts:"  # the inference facts' output of a TFRecord file (never a split name: those have no ':')


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
        return {
            "output": self.output,
            "num_examples": dict(self.counts),
            "feature_count": self.feature_count,
            "schema": "inferred" if self.schema_inferred else "given",
            "seconds": round(self.seconds, 2),
            "examples_per_second": round(total / self.seconds, 1) if self.seconds else None,
        }


# ---------------------------------------------------------------------------------------------------------------
# Beam DoFns (module level, so every runner can pickle them)
# ---------------------------------------------------------------------------------------------------------------


class _InferFile:
    """Per table file: inference facts of every batch, merged."""

    def __init__(self, fmt: str, columns: Sequence[str]):
        self.fmt, self.columns = fmt, list(columns)

    def __call__(self, path: str) -> dict[str, Any]:
        try:
            parts = [
                tabular.infer_batch(b)
                for b in tabular.iter_batches(
                    path, self.fmt, self.columns, None, beam_run.open_binary
                )
            ]
        except Exception as e:  # pyarrow's parse errors: find the line
            where = (
                tabular.locate_csv_problem(path, {}, beam_run.open_binary)
                if self.fmt == "csv"
                else None
            )
            raise beam_run.DataError(where or f"{path}: {type(e).__name__}: {e}") from None
        return inference.merge_inference(parts)


def _merge(parts: Any) -> dict[str, Any]:
    return inference.merge_inference(list(parts))


def _split_of(record: bytes, split_names: Sequence[str], cumulative: Sequence[int] | None) -> str:
    return (
        split_names[0]
        if cumulative is None
        else split_names[tabular.split_index(record, cumulative)]
    )


def _encode_file_fn(
    fmt: str,
    columns: Sequence[str],
    given_kinds: Mapping[str, str] | None,
    split_names: Sequence[str],
    cumulative: Sequence[int] | None,
) -> Any:
    """A DoFn: table file path -> serialized tf.Examples, tagged with their split's name."""
    import apache_beam as beam
    from apache_beam.metrics import Metrics

    class EncodeFile(beam.DoFn):
        def setup(self) -> None:
            self.counters = {
                s: Metrics.counter(beam_run.METRICS_NAMESPACE, COUNTER_PREFIX + s)
                for s in split_names
            }

        def process(self, path: str, inferred: Mapping[str, Any] | None = None):
            kinds = given_kinds or inference.kinds_from_inference(inferred, columns)
            counts = dict.fromkeys(split_names, 0)
            try:
                for batch in tabular.iter_batches(path, fmt, columns, kinds, beam_run.open_binary):
                    for record in tabular.encode_batch(batch, kinds):
                        split = _split_of(record, split_names, cumulative)
                        counts[split] += 1
                        yield beam.pvalue.TaggedOutput(split, record)
            except beam_run.DataError:
                raise
            except (
                Exception
            ) as e:  # pyarrow's conversion and parse errors: find the line and column
                where = None
                if fmt == "csv":
                    where = tabular.locate_csv_problem(
                        path,
                        kinds,
                        beam_run.open_binary,
                        "schema" if given_kinds else "types inferred from the data",
                    )
                raise beam_run.DataError(where or f"{path}: {type(e).__name__}: {e}") from None
            for split, n in counts.items():
                if n:
                    self.counters[split].inc(n)

    return EncodeFile()


def _import_tfrecord_fn(
    rules: tuple[Mapping[str, str], Mapping[str, int]] | None,
    split_names: Sequence[str],
    cumulative: Sequence[int] | None,
) -> Any:
    """A DoFn: TFRecord file path -> canonical tf.Examples tagged with their split, and the file's facts (FACTS_TAG)."""
    import apache_beam as beam
    from apache_beam.metrics import Metrics

    class ImportFile(beam.DoFn):
        def setup(self) -> None:
            self.counters = {
                s: Metrics.counter(beam_run.METRICS_NAMESPACE, COUNTER_PREFIX + s)
                for s in split_names
            }

        def process(self, path: str):
            counts = dict.fromkeys(split_names, 0)
            facts: dict[str, Any] = {"rows": 0, "columns": {}, "seen": {}}
            records = tfrecords.file_records(path, beam_run.open_binary, rules, facts)
            while True:
                try:  # only the reading: an error downstream of a yield is not the data's
                    record = next(records, None)
                except ValueError as e:
                    raise beam_run.DataError(str(e)) from None
                if record is None:
                    break
                split = _split_of(record, split_names, cumulative)
                counts[split] += 1
                yield beam.pvalue.TaggedOutput(split, record)
            yield beam.pvalue.TaggedOutput(FACTS_TAG, facts)
            for split, n in counts.items():
                if n:
                    self.counters[split].inc(n)

    return ImportFile()


class _WriteSchema:
    """Writes the inferred schema (from the merged facts) as text; columns None: the features the facts saw."""

    def __init__(self, path: str, columns: Sequence[str] | None):
        self.path, self.columns = path, list(columns) if columns is not None else None

    def __call__(self, facts: Mapping[str, Any]) -> None:
        from google.protobuf import text_format

        conflict = inference.kind_conflict(facts)
        if conflict:
            raise beam_run.DataError(conflict)
        columns = self.columns if self.columns is not None else inference.feature_names(facts)
        if not columns:
            raise beam_run.DataError(
                f"the {facts['rows']} records hold no feature with a value (all empty "
                "tf.Examples): nothing to train on"
            )
        schema = inference.schema_from_inference(facts, columns)
        beam_run.write_text(self.path, text_format.MessageToString(schema))


# ---------------------------------------------------------------------------------------------------------------
# The verb
# ---------------------------------------------------------------------------------------------------------------


def _sources(
    request: ImportExamplesRequest,
) -> list[tuple[list[str], list[str], list[int] | None, str, str]]:
    """(files, split names, cumulative buckets or None, input name, pattern) per input pattern."""
    if request.input_pattern:
        names = [n for n, _ in request.splits]
        return [
            (
                beam_run.match_files(request.input_pattern),
                names,
                tabular.cumulative_buckets([b for _, b in request.splits]),
                "--input",
                request.input_pattern,
            )
        ]
    return [
        (beam_run.match_files(pattern), [name], None, "--input-splits", pattern)
        for name, pattern in request.input_splits
    ]


def _file_columns(request: ImportExamplesRequest, input_name: str, path: str) -> list[str]:
    """A table's column names, refusing repeated and empty names and Parquet types a tf.Example cannot hold."""
    try:
        columns = tabular.read_columns(path, request.format, beam_run.open_binary)
    except Exception as e:
        raise UserInputError(
            input_name, f"{path}: not a readable {request.format.upper()} file: {e}"
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
    if request.format == "parquet":
        bad = [c for c, k in tabular.parquet_kinds(path, beam_run.open_binary).items() if k is None]
        if bad:
            raise UserInputError(
                input_name,
                f"{path}: columns {', '.join(bad)} are neither numbers nor "
                "strings (a tf.Example feature holds int64, float or bytes)",
            )
    return columns


def _check_rows(
    request: ImportExamplesRequest, files: Sequence[str], input_name: str, pattern: str
) -> None:
    """Refuse an input pattern whose files hold no row (no record) at all."""
    opener = beam_run.open_binary
    if request.format == "tfrecord":
        if any(tfrecords.has_records(f, opener) for f in files):
            return
        what = "holds no records (it is empty)"
    else:
        if any(tabular.has_rows(f, request.format, opener) for f in files):
            return
        what = "has a header line but no rows" if request.format == "csv" else "holds no rows"
    if len(files) == 1:
        raise UserInputError(input_name, f"{files[0]} {what}; expected at least one example")
    raise UserInputError(
        input_name,
        f"none of the {len(files)} files matching {pattern} holds a row ({files[0]} "
        f"{what}); expected at least one example",
    )


def _check_sources(
    request: ImportExamplesRequest, sources: Sequence[tuple], schema: Any
) -> list[str] | None:
    """The columns every table shares (schema order when given; None for TFRecords without a schema).

    Refuses patterns matching nothing or holding no row, and tables whose columns differ.
    """
    expected = [f.name for f in schema.feature] if schema is not None else None
    reference = None
    for files, _, _, input_name, pattern in sources:
        if not files:
            raise UserInputError(input_name, f"no files match {pattern}")
        if request.format != "tfrecord":
            for path in files:
                columns = _file_columns(request, input_name, path)
                if expected is not None:
                    missing, extra = (
                        sorted(set(expected) - set(columns)),
                        sorted(set(columns) - set(expected)),
                    )
                    if missing or extra:
                        raise UserInputError(
                            input_name,
                            f"{path}: the columns do not match the schema "
                            f"{request.schema}: "
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
        _check_rows(request, files, input_name, pattern)
    if expected is not None:
        return expected
    return list(reference[1]) if reference else None


def _given_kinds(schema: Any) -> dict[str, str]:
    kinds = tabular.kinds_from_schema(schema)
    bad = [n for n, k in kinds.items() if k not in tabular.TYPE_LEVELS]
    if bad:
        raise UserInputError(
            "--schema",
            f"features {', '.join(bad)} have no INT, FLOAT or BYTES type; "
            "a table column becomes one of those",
        )
    return kinds


def _build(
    pipeline: Any,
    request: ImportExamplesRequest,
    sources: Sequence[tuple],
    columns: list[str] | None,
    schema: Any,
    staging: str,
) -> list[str]:
    """Add the import's steps to `pipeline`: read, split, write each split's shards, and infer the schema when
    none is given. Returns the split names."""
    import apache_beam as beam

    given_kinds = _given_kinds(schema) if schema is not None else None
    split_names = [name for _, names, _, _, _ in sources for name in names]
    inferred = None
    if given_kinds is None and request.format != "tfrecord":
        inferred = (
            pipeline
            | "InferFiles" >> beam.Create(sorted({f for files, *_ in sources for f in files}))
            | "InferReshuffle" >> beam.Reshuffle()
            | "Infer" >> beam.Map(_InferFile(request.format, columns))
            | "InferMerge" >> beam.CombineGlobally(_merge)
        )
    per_split: dict[str, list[Any]] = {name: [] for name in split_names}
    facts = []
    for i, (files, names, cumulative, _, _) in enumerate(sources):
        if request.format == "tfrecord":
            rules = (given_kinds, tfrecords.fixed_sizes(schema)) if schema is not None else None
            step = beam.ParDo(_import_tfrecord_fn(rules, names, cumulative)).with_outputs(
                FACTS_TAG, *names
            )
        else:
            side = (beam.pvalue.AsSingleton(inferred),) if inferred is not None else ()
            step = beam.ParDo(
                _encode_file_fn(request.format, columns, given_kinds, names, cumulative), *side
            ).with_outputs(*names)
        outputs = (
            pipeline
            | f"Files[{i}]" >> beam.Create(files)
            | f"Reshuffle[{i}]" >> beam.Reshuffle()
            | f"Encode[{i}]" >> step
        )
        for name in names:
            per_split[name].append(outputs[name])
        if request.format == "tfrecord":
            facts.append(outputs[FACTS_TAG])
    if given_kinds is None and request.format == "tfrecord":
        inferred = (
            facts | "FlattenFacts" >> beam.Flatten() | "InferMerge" >> beam.CombineGlobally(_merge)
        )
    if inferred is not None:
        _ = inferred | "WriteSchema" >> beam.Map(
            _WriteSchema(beam_run.join(staging, SCHEMA_FILE), columns)
        )
    for name, pcolls in per_split.items():
        records = pcolls[0] if len(pcolls) == 1 else pcolls | f"Flatten[{name}]" >> beam.Flatten()
        _ = records | f"Write[{name}]" >> beam.io.WriteToTFRecord(
            beam_run.join(staging, f"Split-{name}", DATA_FILE_PREFIX), file_name_suffix=".gz"
        )
    return split_names


def _run_pipeline(
    request: ImportExamplesRequest,
    sources: Sequence[tuple],
    columns: list[str] | None,
    schema: Any,
    staging: str,
    options: Any,
) -> dict[str, int]:
    """Build and run the pipeline into `staging`; returns the examples per split. Data errors: UserInputError."""
    import apache_beam as beam

    if schema is not None:
        from google.protobuf import text_format

        beam_run.write_text(
            beam_run.join(staging, SCHEMA_FILE), text_format.MessageToString(schema)
        )
    pipeline = beam.Pipeline(options=options)
    split_names = _build(pipeline, request, sources, columns, schema, staging)
    try:
        counters = beam_run.run(pipeline)
    except Exception as e:
        message = beam_run.data_error_message(e)
        if message:
            raise UserInputError(
                "--input" if request.input_pattern else "--input-splits", message
            ) from None
        raise
    return beam_run.split_counts(counters, COUNTER_PREFIX, split_names)


def _feature_count(schema_text: str) -> int:
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    return len(text_format.Parse(schema_text, schema_pb2.Schema()).feature)


def run(
    request: ImportExamplesRequest, before_publish: Callable[[ImportResult], None] | None = None
) -> ImportResult:
    """Import the tables into a new Examples directory, held for the run (a second run into it fails at once,
    exit 2, naming this one); `before_publish(result)` runs once it is staged, before it is published."""
    held = [(request.output, "--output"), (request.schema_output, "--schema-output")]
    with outputs.exclusive_all(held, new=("--output",)):
        return _import(request, before_publish)


def _import(
    request: ImportExamplesRequest, before_publish: Callable[[ImportResult], None] | None
) -> ImportResult:
    """Import the files into a new Examples directory; returns the counts per split."""
    from generic_trainer.records.schemas import load_schema

    started = time.monotonic()
    schema = load_schema(request.schema) if request.schema else None
    if schema is not None:
        _given_kinds(schema)
    sources = _sources(request)
    columns = _check_sources(request, sources, schema)
    all_files = sorted({f for files, *_ in sources for f in files})
    options = beam_run.pipeline_options(request.beam_args, beam_run.total_bytes(all_files))
    log.info(
        "import-examples: %d %s file(s), %s, splits %s, schema %s; beam %s",
        sum(len(s[0]) for s in sources),
        request.format,
        f"{len(columns)} columns" if columns is not None else "features from the records",
        ", ".join(f"{n}:{b}" for n, b in request.splits)
        or ", ".join(n for n, _ in request.input_splits),
        request.schema or "inferred from the data",
        beam_run.describe_options(options),
    )
    staging = beam_run.new_staging(request.output)
    schema_staging = None
    try:
        counts = _run_pipeline(request, sources, columns, schema, staging, options)
        with beam_run.open_binary(beam_run.join(staging, SCHEMA_FILE)) as f:
            schema_text = f.read().decode("utf-8")
        result = ImportResult(
            output=request.output,
            counts=counts,
            feature_count=_feature_count(schema_text),
            schema_inferred=schema is None,
            seconds=time.monotonic() - started,
        )
        if request.schema_output:
            schema_staging = beam_run.new_staging(request.schema_output)
            beam_run.write_text(beam_run.join(schema_staging, SCHEMA_FILE), schema_text)
        if before_publish is not None:
            before_publish(result)
        if schema_staging:
            beam_run.publish(schema_staging, request.schema_output)
            schema_staging = None
        beam_run.publish(staging, request.output)
        staging = None
    finally:
        beam_run.discard(staging, schema_staging)
    log.info(
        "import-examples: wrote %s examples to %s in %.1f s (%.0f examples/s)",
        ", ".join(f"{n} {s}" for s, n in counts.items()),
        request.output,
        result.seconds,
        sum(counts.values()) / max(result.seconds, 1e-9),
    )
    return result


def kfp_metadata(request: ImportExamplesRequest, result: ImportResult) -> dict[str, dict[str, Any]]:
    """Executor-output metadata of the examples and output_schema artifacts."""
    examples = {
        "split_names": list(result.counts),
        "num_examples": dict(result.counts),
        "feature_count": result.feature_count,
        "format": request.format,
    }
    for split, n in result.counts.items():
        examples[f"num_examples_{split}"] = n
    return {
        "examples": examples,
        "output_schema": {
            "feature_count": result.feature_count,
            "inferred": result.schema_inferred,
            "file": SCHEMA_FILE,
        },
    }


VERB: VerbContract[ImportExamplesRequest, ImportResult] = VerbContract(
    data_options.IMPORT_EXAMPLES,
    data_request.build_import_examples_request,
    data_request.describe_import_examples,
    run,
    lambda request, result: (kfp_metadata(request, result), None),
    lambda result: result.summary(),
)
