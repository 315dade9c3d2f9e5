"""The transform verb: a module's `preprocessing_fn` through tensorflow-transform on Apache Beam (TFX Transform).

Writes what TFX's Transform writes, so `tft.TFTransformOutput`, TFX modules and `train --transform-graph`
read it as they read TFX's:

    <transform-graph>/transform_fn/            the transform SavedModel (vocabularies in its assets)
    <transform-graph>/transformed_metadata/    schema of the transformed features
    <transform-graph>/metadata/                schema of the raw features (raw_feature_spec needs it)
    <transformed-examples>/Split-<name>/transformed_examples-NNNNN-of-MMMMM.gz   (when asked)

The module loads as train's does (gs://, files beside it, --module-sha256). The analyze splits are
read once for the analyzers and the transform splits once more to transform them, so the runner
never holds a split in memory. Outputs go to staging dirs, renamed into place on success.
The caller decides TF_USE_LEGACY_KERAS before this module is imported (tensorflow-transform would).
"""

from __future__ import annotations

import dataclasses
import gzip
import logging
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from typing import Any

from generic_trainer.beam import beam_run
from generic_trainer.errors import UserCodeError, UserInputError
from generic_trainer.fit import user_code, user_module
from generic_trainer.intake import data_options, data_request
from generic_trainer.intake.contract import VerbContract
from generic_trainer.intake.data_request import TransformRequest

log = logging.getLogger(__name__)

TRANSFORMED_PREFIX = "transformed_examples"  # TFX Transform's file name
COUNTER_PREFIX = "transformed_"


@dataclasses.dataclass(frozen=True)
class TransformResult:
    """What a transform run wrote."""

    transform_graph: str
    transformed_examples: str | None
    counts: Mapping[str, int]
    raw_feature_count: int
    feature_count: int
    seconds: float

    def summary(self) -> dict[str, Any]:
        return {
            "transform_graph": self.transform_graph,
            "transformed_examples": self.transformed_examples,
            "num_examples": dict(self.counts),
            "raw_feature_count": self.raw_feature_count,
            "feature_count": self.feature_count,
            "seconds": round(self.seconds, 2),
        }


class _GuardedFn:
    """The user's preprocessing_fn, remembering the first exception it raised (tf.Transform traces it)."""

    def __init__(self, fn: Callable, name: str):
        self.fn, self.name, self.error = fn, name, None

    def __call__(self, inputs: Any) -> Any:
        try:  # the raw exception goes on through tf.Transform; user_code maps it once the pipeline stopped
            outputs = user_code.call_raw(self.fn, inputs, what=self.name)
        except BaseException as e:  # sys.exit() too: never an ending of the process
            if self.error is None:
                self.error = e
            raise
        if not isinstance(outputs, dict) or not outputs:
            self.error = self.error or TypeError(
                f"{self.name} must return a non-empty dict of tensors, got {type(outputs).__name__}"
            )
            raise self.error
        return outputs


def _has_records(pattern_dir: str) -> bool:
    """True when some file of a split dir holds at least one record (reads 12 bytes at most per file)."""
    for entry in sorted(os.scandir(pattern_dir), key=lambda e: e.name):
        if not entry.is_file() or entry.name.startswith("."):
            continue
        with open(entry.path, "rb") as f:
            gz = f.read(2) == b"\x1f\x8b"
        opener = gzip.open if gz else open
        try:
            with opener(entry.path, "rb") as f:
                if f.read(12):
                    return True
        except (OSError, EOFError):
            return True  # unreadable: let the reader report it
    return False


def _encoder_fn() -> Any:
    """A DoFn: (transformed record batch, passthrough) -> serialized tf.Examples, counting per split."""
    import apache_beam as beam
    from apache_beam.metrics import Metrics

    class EncodeExamples(beam.DoFn):
        def __init__(self, split: str):
            self.split = split
            self.encoder = None

        def setup(self) -> None:
            self.counter = Metrics.counter(beam_run.METRICS_NAMESPACE, COUNTER_PREFIX + self.split)

        def process(self, element: Any, metadata: Any):
            from tfx_bsl.coders import example_coder

            if self.encoder is None:
                self.encoder = example_coder.RecordBatchToExamplesEncoder(metadata.schema)
            record_batch = element[0]
            records = self.encoder.encode(record_batch)
            self.counter.inc(len(records))
            yield from records

    return EncodeExamples


def _load_fn(request: TransformRequest, download_dir: str) -> _GuardedFn:
    module = user_module.load(
        request.module_file, download_dir, request.module_sha256, request.storage
    )
    fn = user_module.get_function(module, request.preprocessing_fn, "--preprocessing-fn")
    return _GuardedFn(fn, request.preprocessing_fn)


def _user_error(guarded: _GuardedFn) -> BaseException:
    return user_code.error_for(guarded.error, guarded.name)


def run(
    request: TransformRequest, before_publish: Callable[[TransformResult], None] | None = None
) -> TransformResult:
    """Analyze, write the transform graph and (when asked) the transformed examples. Its outputs are held
    for the run: a second run into them fails at once (exit 2) naming this one. `before_publish(result)`
    runs once both are staged, before they are published."""
    from generic_trainer.artifacts import outputs

    held = [
        (request.transform_graph, "--transform-graph"),
        (request.transformed_examples, "--transformed-examples"),
    ]
    with outputs.exclusive_all(held, new=("--transform-graph", "--transformed-examples")):
        return _transform(request, before_publish)


def _split_patterns(request: TransformRequest) -> dict[str, str]:
    """The file pattern of each split read (analyzed or transformed); the analyzed ones must hold examples."""
    from generic_trainer.records.example_files import split_file_patterns

    wanted = sorted(
        set(request.analyze_splits)
        | set(request.transform_splits if request.transformed_examples else ())
    )
    patterns = dict(zip(wanted, split_file_patterns(request.examples, wanted), strict=True))
    for split in request.analyze_splits:
        if not _has_records(os.path.dirname(patterns[split])):
            raise UserInputError(
                "--analyze-splits",
                f"split {split!r} of {request.examples} holds no examples; the analyzers need data",
            )
    return patterns


def _transform(
    request: TransformRequest, before_publish: Callable[[TransformResult], None] | None
) -> TransformResult:
    from generic_trainer.records.schemas import load_schema

    started = time.monotonic()
    schema = load_schema(request.schema)
    patterns = _split_patterns(request)
    with tempfile.TemporaryDirectory(prefix="transform-module-") as download_dir:
        guarded = _load_fn(request, download_dir)
        input_files = [
            e.path for p in patterns.values() for e in os.scandir(os.path.dirname(p)) if e.is_file()
        ]
        options = beam_run.pipeline_options(request.beam_args, beam_run.total_bytes(input_files))
        log.info(
            "transform: analyze %s, transform %s, %d raw features; beam %s",
            ",".join(request.analyze_splits),
            ",".join(request.transform_splits)
            if request.transformed_examples
            else "(no examples written)",
            len(schema.feature),
            beam_run.describe_options(options),
        )
        graph_staging = beam_run.new_staging(request.transform_graph)
        examples_staging = (
            beam_run.new_staging(request.transformed_examples)
            if request.transformed_examples
            else None
        )
        try:
            uri_patterns = {
                s: beam_run.join(request.examples_uri, os.path.relpath(p, request.examples))
                for s, p in patterns.items()
            }
            counters = _run_guarded(
                request, guarded, schema, uri_patterns, options, graph_staging, examples_staging
            )
            counts = (
                beam_run.split_counts(counters, COUNTER_PREFIX, request.transform_splits)
                if (request.transformed_examples)
                else {}
            )
            result = TransformResult(
                transform_graph=request.transform_graph,
                transformed_examples=request.transformed_examples,
                counts=counts,
                raw_feature_count=len(schema.feature),
                feature_count=len(_transformed_schema(graph_staging).feature),
                seconds=time.monotonic() - started,
            )
            if before_publish is not None:
                before_publish(result)
            if examples_staging:
                beam_run.publish(examples_staging, request.transformed_examples)
                examples_staging = None
            beam_run.publish(graph_staging, request.transform_graph)
            graph_staging = None
        finally:
            beam_run.discard(graph_staging, examples_staging)
    log.info(
        "transform: wrote the transform graph to %s (%d features)%s in %.1f s",
        request.transform_graph,
        result.feature_count,
        f" and {', '.join(f'{n} {s}' for s, n in counts.items())} transformed examples "
        f"to {request.transformed_examples}"
        if counts
        else "",
        result.seconds,
    )
    return result


def _run_guarded(
    request: TransformRequest,
    guarded: _GuardedFn,
    schema: Any,
    uri_patterns: dict[str, str],
    options: Any,
    graph_staging: str,
    examples_staging: str | None,
) -> Any:
    """Run the pipeline in a tf.Transform context; an error of preprocessing_fn is the user's (exit 3)."""
    import apache_beam as beam
    import tensorflow_transform.beam as tft_beam

    pipeline = beam.Pipeline(options=options)
    temp_dir = beam_run.join(graph_staging, ".temp_path")
    try:
        with tft_beam.Context(temp_dir=temp_dir):
            _build_pipeline(
                pipeline, request, guarded, schema, uri_patterns, graph_staging, examples_staging
            )
            counters = beam_run.run(pipeline)
    except (UserInputError, UserCodeError):
        raise
    except BaseException:  # what preprocessing_fn raised, as tf.Transform or Beam passed it on
        if guarded.error is not None:
            raise _user_error(guarded) from None
        raise
    if guarded.error is not None:
        raise _user_error(guarded)
    beam_run.discard(temp_dir)
    return counters


def _build_pipeline(
    pipeline: Any,
    request: TransformRequest,
    guarded: _GuardedFn,
    schema: Any,
    uri_patterns: dict[str, str],
    graph_staging: str,
    examples_staging: str | None,
) -> None:
    """Read, analyze, write the transform graph (and transform and write the examples) on `pipeline`."""
    import apache_beam as beam
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata

    record_reader = _record_reader(request.examples, schema)

    def source(split: str, purpose: str) -> tuple[Any, Any]:
        reader = record_reader(
            file_pattern=uri_patterns[split],
            schema=schema,
            telemetry_descriptors=["generic-trainer", "transform"],
        )
        data = pipeline | f"Read{purpose}[{split}]" >> reader.BeamSource()
        return data, reader.TensorAdapterConfig()

    sources = [source(s, "Analyze") for s in request.analyze_splits]
    adapter_config = sources[0][1]
    data = (
        sources[0][0]
        if len(sources) == 1
        else ([d for d, _ in sources] | "FlattenAnalyze" >> beam.Flatten())
    )
    transform_fn = (data, adapter_config) | "Analyze" >> tft_beam.AnalyzeDataset(guarded)
    _ = transform_fn | "WriteTransformFn" >> tft_beam.WriteTransformFn(graph_staging)
    _ = dataset_metadata.DatasetMetadata(schema) | "WriteRawMetadata" >> tft_beam.WriteMetadata(
        beam_run.join(graph_staging, "metadata"), pipeline
    )
    if not examples_staging:
        return
    deferred = beam.pvalue.AsSingleton(transform_fn[1].deferred_metadata)
    encoder = _encoder_fn()
    for split in request.transform_splits:
        raw, config = source(split, "Transform")
        transformed, _ = ((raw, config), transform_fn) | f"Transform[{split}]" >> (
            tft_beam.TransformDataset(output_record_batches=True)
        )
        _ = (
            transformed
            | f"Encode[{split}]" >> beam.ParDo(encoder(split), deferred)
            | f"Write[{split}]"
            >> beam.io.WriteToTFRecord(
                beam_run.join(examples_staging, f"Split-{split}", TRANSFORMED_PREFIX),
                file_name_suffix=".gz",
            )
        )


def _record_reader(examples: str, schema: Any) -> Any:
    """tfx_bsl's reader of the examples' payload format (TFX's `payload_format`, recorded by
    import-examples or read from the first record): TFExampleRecord or TFSequenceExampleRecord."""
    from tfx_bsl.public import tfxio

    from generic_trainer.records.example_protos import FORMAT_TF_SEQUENCE_EXAMPLE
    from generic_trainer.records.examples_properties import payload_format

    if payload_format(examples) != FORMAT_TF_SEQUENCE_EXAMPLE:
        return tfxio.TFExampleRecord
    if not schema.tensor_representation_group:
        raise UserInputError(
            "--schema",
            f"{examples} holds tf.SequenceExamples; their schema needs a "
            "tensor_representation_group (TFX's native SequenceExample path, e.g. TFX's "
            "testdata schema_gen_sequence); reading them as raw records is not supported",
        )
    log.info("transform: %s holds tf.SequenceExamples (TFSequenceExampleRecord)", examples)
    return tfxio.TFSequenceExampleRecord


def _transformed_schema(graph_dir: str) -> Any:
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    with beam_run.open_binary(
        beam_run.join(graph_dir, "transformed_metadata", "schema.pbtxt")
    ) as f:
        return text_format.Parse(f.read().decode("utf-8"), schema_pb2.Schema())


def kfp_metadata(request: TransformRequest, result: TransformResult) -> dict[str, dict[str, Any]]:
    """Executor-output metadata of the transform_graph and transformed_examples artifacts."""
    graph = {
        "analyze_splits": list(request.analyze_splits),
        "feature_count": result.feature_count,
        "raw_feature_count": result.raw_feature_count,
        "preprocessing_fn": request.preprocessing_fn,
    }
    examples: dict[str, Any] = {
        "split_names": list(result.counts),
        "num_examples": dict(result.counts),
        "feature_count": result.feature_count,
    }
    for split, n in result.counts.items():
        examples[f"num_examples_{split}"] = n
    return {"transform_graph": graph, "transformed_examples": examples}


VERB: VerbContract[TransformRequest, TransformResult] = VerbContract(
    data_options.TRANSFORM,
    data_request.build_transform_request,
    data_request.describe_transform,
    run,
    lambda request, result: (kfp_metadata(request, result), None),
    lambda result: result.summary(),
)
