"""import-examples: CSV, Parquet or TFRecord files to a TFX Examples artifact, on Apache Beam.

    <output>/Split-<name>/data_tfrecord-NNNNN-of-MMMMM.gz   gzipped TFRecords (ExampleGen's layout)
    <output>/schema.pbtxt, examples_properties.json        the schema; TFX's properties (span, ...)

Before Beam starts the input patterns are resolved as TFX's ExampleGen does (`{SPAN}`, `{VERSION}`,
dates, a range config: beam/spans.py), every table's columns are checked (against the schema when
one is given, else against the first file) and each pattern must hold a row
(beam/import_sources.py). The pipeline (steps in beam/import_fns.py) reads each file in Arrow blocks
or TFRecords (files are the unit of parallelism), encodes rows as tf.Example or canonicalizes each
tf.(Sequence)Example, and splits by TFX's hash (of the record, or of its partition feature) or by
the pattern it came from (`--input-splits`). Without a schema tables are read twice (types first),
TFRecords once; the schema is SchemaGen's (beam/inference.py). Beam writes into a StagedDir,
published on success (after `before_publish`: contract.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from generic_trainer.artifacts import outputs
from generic_trainer.artifacts.staged import StagedDir
from generic_trainer.beam import beam_run, import_fns, tfrecords
from generic_trainer.beam.import_sources import Source, given_kinds, prepare_sources
from generic_trainer.errors import UserInputError
from generic_trainer.intake import data_request, example_gen_options
from generic_trainer.intake.contract import VerbContract
from generic_trainer.intake.data_request import ImportExamplesRequest
from generic_trainer.records import examples_properties

log = logging.getLogger(__name__)

DATA_FILE_PREFIX = "data_tfrecord"  # TFX ExampleGen's file name
SCHEMA_FILE = "schema.pbtxt"


@dataclasses.dataclass(frozen=True)
class ImportResult:
    """What an import wrote: examples per split, the features, and whether the schema was
    inferred."""

    output: str
    counts: Mapping[str, int]
    feature_count: int
    schema_inferred: bool
    seconds: float
    properties: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # TFX's artifact ones

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


def _build(
    pipeline: Any,
    request: ImportExamplesRequest,
    sources: Sequence[Source],
    columns: list[str] | None,
    schema: Any,
    staging: str,
) -> list[str]:
    """Add the import's steps to `pipeline`: read, split, write each split's shards, and infer the
    schema when none is given. Returns the split names."""
    import apache_beam as beam

    given = given_kinds(schema, request.payload_format) if schema is not None else None
    split_names = [name for source in sources for name in source.splitter.names]
    tfrecord = request.format == "tfrecord"
    inferred = None
    if given is None and not tfrecord:
        files = sorted({f for s in sources for f in s.files})
        inferred = pipeline | "InferTables" >> _infer_tables(files, request.format, columns)
    per_split: dict[str, list[Any]] = {name: [] for name in split_names}
    facts = []
    for i, source in enumerate(sources):
        step = _encode_step(request, source, schema, columns, inferred)
        outputs = (
            pipeline
            | f"Files[{i}]" >> beam.Create(source.files)
            | f"Reshuffle[{i}]" >> beam.Reshuffle()
            | f"Encode[{i}]" >> step
        )
        for name in source.splitter.names:
            per_split[name].append(outputs[name])
        if tfrecord:
            facts.append(outputs[import_fns.FACTS_TAG])
    if given is None and tfrecord:
        inferred = (
            facts
            | "FlattenFacts" >> beam.Flatten()
            | "InferMerge" >> beam.CombineGlobally(import_fns.merge)
        )
    if inferred is not None:
        write = import_fns.WriteSchema(
            beam_run.join(staging, SCHEMA_FILE), columns, request.infer_feature_shape
        )
        _ = inferred | "WriteSchema" >> beam.Map(write)
    for name, pcolls in per_split.items():
        records = pcolls[0] if len(pcolls) == 1 else pcolls | f"Flatten[{name}]" >> beam.Flatten()
        _ = records | f"Write[{name}]" >> beam.io.WriteToTFRecord(
            beam_run.join(staging, f"Split-{name}", DATA_FILE_PREFIX), file_name_suffix=".gz"
        )
    return split_names


def _infer_tables(files: list[str], fmt: str, columns: list[str] | None) -> Any:
    """A PTransform: the tables' merged inference facts (one element)."""
    import apache_beam as beam

    @beam.ptransform_fn
    def infer(pipeline: Any) -> Any:
        return (
            pipeline
            | "Files" >> beam.Create(files)
            | "Reshuffle" >> beam.Reshuffle()
            | "Infer" >> beam.Map(import_fns.InferFile(fmt, columns))
            | "Merge" >> beam.CombineGlobally(import_fns.merge)
        )

    return infer()


def _encode_step(
    request: ImportExamplesRequest,
    source: Source,
    schema: Any,
    columns: list[str] | None,
    inferred: Any,
) -> Any:
    """The ParDo that turns one source's files into split-tagged records (and TFRecord facts)."""
    import apache_beam as beam

    names = source.splitter.names
    if request.format == "tfrecord":
        rules = tfrecords.schema_rules(schema) if schema is not None else None
        fn = import_fns.import_tfrecord_fn(rules, source.splitter, request.payload_format)
        return beam.ParDo(fn).with_outputs(import_fns.FACTS_TAG, *names)
    given = given_kinds(schema, request.payload_format) if schema is not None else None
    side = (beam.pvalue.AsSingleton(inferred),) if inferred is not None else ()
    fn = import_fns.encode_file_fn(request.format, columns, given, source.splitter)
    return beam.ParDo(fn, *side).with_outputs(*names)


def _run_pipeline(
    request: ImportExamplesRequest,
    sources: Sequence[Source],
    columns: list[str] | None,
    schema: Any,
    staging: str,
    options: Any,
) -> dict[str, int]:
    """Build and run the pipeline into `staging`; returns the examples per split. Data errors:
    UserInputError."""
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
            raise UserInputError(sources[0].input_name, message) from None
        raise
    return beam_run.split_counts(counters, import_fns.COUNTER_PREFIX, split_names)


def _feature_count(schema_text: str) -> int:
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2 as pb

    return len(text_format.Parse(schema_text, pb.Schema()).feature)


def run(
    request: ImportExamplesRequest, before_publish: Callable[[ImportResult], None] | None = None
) -> ImportResult:
    """Import the tables into a new Examples directory, held for the run (a second run into it fails
    at once, exit 2, naming this one); `before_publish(result)` runs once it is staged."""
    held = [(request.output, "--output"), (request.schema_output, "--schema-output")]
    with outputs.exclusive_all(held, new=("--output",)):
        return _import(request, before_publish)


def _log_plan(
    request: ImportExamplesRequest,
    files: int,
    properties: Mapping[str, Any],
    columns: list[str] | None,
    options: Any,
) -> None:
    log.info(
        "import-examples: %d %s file(s) of %s, %s, splits %s, schema %s, span %s%s; beam %s",
        files,
        request.format,
        properties["payload_format"],
        f"{len(columns)} columns" if columns is not None else "features from the records",
        ", ".join([f"{n}:{b}" for n, b in request.splits] + [n for n, _ in request.input_splits]),
        request.schema or "inferred from the data",
        properties["span"],
        f" version {properties['version']}" if "version" in properties else "",
        beam_run.describe_options(options),
    )


def _import(
    request: ImportExamplesRequest, before_publish: Callable[[ImportResult], None] | None
) -> ImportResult:
    """Import the files into a new Examples directory; returns the counts per split."""
    started = time.monotonic()
    patterns = (request.input_pattern, request.splits, request.input_splits)
    schema, sources, properties, columns = prepare_sources(
        request.format,
        request.schema,
        request.payload_format,
        patterns,
        request.partition_feature,
        request.range_config,
    )
    all_files = sorted({f for s in sources for f in s.files})
    options = beam_run.pipeline_options(request.beam_args, beam_run.total_bytes(all_files))
    _log_plan(request, len(all_files), properties, columns, options)
    with contextlib.ExitStack() as stack:
        stage = stack.enter_context(StagedDir(request.output))
        counts = _run_pipeline(request, sources, columns, schema, stage.path, options)
        examples_properties.write(stage.path, properties, beam_run.write_text)
        with beam_run.open_binary(beam_run.join(stage.path, SCHEMA_FILE)) as f:
            schema_text = f.read().decode("utf-8")
        seconds = time.monotonic() - started
        result = ImportResult(
            request.output, counts, _feature_count(schema_text), schema is None, seconds, properties
        )
        schema_stage = None
        if request.schema_output:
            schema_stage = stack.enter_context(StagedDir(request.schema_output))
            beam_run.write_text(beam_run.join(schema_stage.path, SCHEMA_FILE), schema_text)
        if before_publish is not None:
            before_publish(result)
        if schema_stage is not None:
            schema_stage.publish()
        stage.publish()
    log.info(
        "import-examples: wrote %s examples to %s in %.1f s (%.0f examples/s)",
        ", ".join(f"{n} {s}" for s, n in counts.items()),
        request.output,
        result.seconds,
        sum(counts.values()) / max(result.seconds, 1e-9),
    )
    return result


def kfp_metadata(request: ImportExamplesRequest, result: ImportResult) -> dict[str, dict[str, Any]]:
    """Executor-output metadata of the examples and output_schema artifacts (with TFX's Examples
    properties: span, version, input_fingerprint, payload_format, file_format)."""
    examples = {
        "split_names": list(result.counts),
        "num_examples": dict(result.counts),
        "feature_count": result.feature_count,
        "format": request.format,
        **result.properties,
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
    example_gen_options.IMPORT_EXAMPLES,
    data_request.build_import_examples_request,
    data_request.describe_import_examples,
    run,
    lambda request, result: (kfp_metadata(request, result), None),
    lambda result: result.summary(),
)
