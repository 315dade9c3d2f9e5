"""The Beam pipeline of the transform verb: read, analyze (with the analyzer cache when asked),
write the transform graph, and transform and write the examples (TFX Transform's layout).
"""

from __future__ import annotations

import dataclasses
import gzip
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from generic_trainer.beam import beam_run, tft_cache
from generic_trainer.errors import UserInputError

TRANSFORMED_PREFIX = "transformed_examples"  # TFX Transform's file name
COUNTER_PREFIX = "transformed_"

log = logging.getLogger("generic_trainer.transform")


@dataclasses.dataclass(frozen=True)
class Plan:
    """What one transform pipeline reads and writes.

    analyze: (split, file pattern Beam reads) per analyze split of each Examples dir, oldest first.
    transform: split -> the file patterns of that split in every Examples dir.
    """

    schema: Any
    analyze: tuple[tuple[str, str], ...]
    transform: Mapping[str, tuple[str, ...]]
    graph_dir: str
    examples_dir: str | None = None
    cache_in: str | None = None
    cache_out: str | None = None
    gcs_root: str = "/gcs"
    sequence_examples: bool = False  # tf.SequenceExample records (TFX's payload_format)


def has_records(split_dir: str) -> bool:
    """True when some file of a split dir holds at least one record (reads 12 bytes per file)."""
    for entry in sorted(os.scandir(split_dir), key=lambda e: e.name):
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


def make_plan(
    schema: Any,
    dirs: Sequence[tuple[str, str]],
    split_files: Sequence[Sequence[tuple[str, str]]],
    analyze_splits: Sequence[str],
    transform_splits: Sequence[str] | None,
    cache_in: str | None,
    gcs_root: str,
) -> tuple[Plan, list[str]]:
    """The plan of a run (its output dirs left empty) and the local dirs of the splits it reads.

    Args:
      schema: the raw examples' Schema.
      dirs: (local path, URI Beam reads) of each Examples dir, oldest span first.
      split_files: each dir's (split, file pattern) pairs, resolved at intake: every split read.
      analyze_splits: the splits the analyzers see (each must hold examples).
      transform_splits: the splits to transform; () every split of `split_files`; None no
        transforming.
      cache_in: the input analyzer cache, as Beam reads it.
      gcs_root: where gs:// is mounted here.
    """
    analyze, transform, split_dirs = [], {}, []
    for (path, uri), files in zip(dirs, split_files, strict=True):
        patterns = dict(files)
        splits = () if transform_splits is None else tuple(transform_splits) or sorted(patterns)
        split_dirs += [os.path.dirname(p) for p in patterns.values()]
        uris = {s: beam_run.join(uri, os.path.relpath(p, path)) for s, p in patterns.items()}
        for split in analyze_splits:
            if not has_records(os.path.dirname(patterns[split])):
                raise UserInputError(
                    "--analyze-splits",
                    f"split {split!r} of {path} holds no examples; the analyzers need data",
                )
            analyze.append((split, uris[split]))
        for split in splits:
            transform[split] = (*transform.get(split, ()), uris[split])
    plan = Plan(
        schema,
        tuple(analyze),
        transform,
        "",
        cache_in=cache_in,
        gcs_root=gcs_root,
        sequence_examples=_holds_sequence_examples([path for path, _ in dirs], schema),
    )
    return plan, split_dirs


def _holds_sequence_examples(paths: Sequence[str], schema: Any) -> bool:
    """Whether the Examples dirs hold tf.SequenceExamples (their recorded or first record's
    payload format; one format for every dir); such a schema must say how to read them."""
    from generic_trainer.records.example_protos import FORMAT_TF_SEQUENCE_EXAMPLE
    from generic_trainer.records.examples_properties import payload_format

    formats = {path: payload_format(path) for path in paths}
    if len(set(formats.values())) > 1:
        raise UserInputError(
            "--examples", f"the Examples dirs hold different payload formats: {formats}"
        )
    if FORMAT_TF_SEQUENCE_EXAMPLE not in formats.values():
        return False
    if not schema.tensor_representation_group:
        raise UserInputError(
            "--schema",
            f"{paths[0]} holds tf.SequenceExamples; their schema needs a "
            "tensor_representation_group (TFX's native SequenceExample path, e.g. TFX's "
            "testdata schema_gen_sequence); reading them as raw records is not supported",
        )
    log.info("transform: %s holds tf.SequenceExamples (TFSequenceExampleRecord)", paths[0])
    return True


def _encoder_fn() -> Any:
    """A DoFn: (transformed record batch, passthrough) -> serialized tf.Examples, counting per
    split."""
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


def _reader(pattern: str, plan: Plan) -> Any:
    """tfx_bsl's reader of the examples' payload format: TFExampleRecord or
    TFSequenceExampleRecord."""
    from tfx_bsl.public import tfxio

    schema = plan.schema
    record = tfxio.TFSequenceExampleRecord if plan.sequence_examples else tfxio.TFExampleRecord
    return record(
        file_pattern=pattern,
        schema=schema,
        telemetry_descriptors=["generic-trainer", "transform"],
    )


def build(pipeline: Any, plan: Plan, fn: Callable) -> Mapping[str, Any] | None:
    """Read, analyze, write the transform graph (and transform and write the examples).

    Returns:
      With an analyzer cache in or out: its dataset keys and how many came from the cache.
    """
    import apache_beam as beam
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata

    readers = [_reader(pattern, plan) for _, pattern in plan.analyze]
    config = readers[0].TensorAdapterConfig()
    names = [f"{split}[{i}]" for i, (split, _) in enumerate(plan.analyze)]
    cache_info = None
    if plan.cache_in is None and plan.cache_out is None:
        datas = [
            pipeline | f"ReadAnalyze{n}" >> r.BeamSource()
            for n, r in zip(names, readers, strict=True)
        ]
        data = datas[0] if len(datas) == 1 else (datas | "FlattenAnalyze" >> beam.Flatten())
        transform_fn = (data, config) | "Analyze" >> tft_beam.AnalyzeDataset(fn)
    else:
        transform_fn, cache_info = _analyze_with_cache(pipeline, plan, fn, readers, names)
    _ = transform_fn | "WriteTransformFn" >> tft_beam.WriteTransformFn(plan.graph_dir)
    _ = dataset_metadata.DatasetMetadata(plan.schema) | "WriteRawMetadata" >> (
        tft_beam.WriteMetadata(beam_run.join(plan.graph_dir, "metadata"), pipeline)
    )
    if plan.examples_dir:
        _transform_examples(pipeline, plan, transform_fn)
    return cache_info


def _analyze_with_cache(
    pipeline: Any, plan: Plan, fn: Callable, readers: list, names: list[str]
) -> tuple[Any, Mapping[str, Any]]:
    """AnalyzeDatasetWithCache: datasets whole in the input cache are not read."""
    import tensorflow_transform.beam as tft_beam

    keys = [tft_cache.dataset_key(pattern, plan.gcs_root) for _, pattern in plan.analyze]
    specs = readers[0].TensorAdapter().OriginalTypeSpecs()
    input_cache = tft_cache.read_cache(pipeline, plan.cache_in, keys, fn, specs)
    read = tft_cache.keys_to_read(fn, specs, keys, input_cache)
    data = {
        key: (pipeline | f"ReadAnalyze{name}" >> reader.BeamSource()) if key in read else None
        for key, reader, name in zip(keys, readers, names, strict=True)
    }
    transform_fn, cache_output = (
        data,
        input_cache,
        readers[0].TensorAdapterConfig(),
    ) | "Analyze" >> tft_beam.AnalyzeDatasetWithCache(fn, pipeline=pipeline)
    if plan.cache_out is not None:
        tft_cache.carry_over(plan.cache_in, plan.cache_out, keys)
        tft_cache.write_cache(pipeline, cache_output, plan.cache_out, keys)
    return transform_fn, tft_cache.summary(keys, read, plan.cache_in is not None)


def _transform_examples(pipeline: Any, plan: Plan, transform_fn: Any) -> None:
    """Transform each transform split (of every Examples dir) and write it as TFX does."""
    import apache_beam as beam
    import tensorflow_transform.beam as tft_beam

    deferred = beam.pvalue.AsSingleton(transform_fn[1].deferred_metadata)
    encoder = _encoder_fn()
    for split, patterns in plan.transform.items():
        readers = [_reader(p, plan) for p in patterns]
        raws = [
            pipeline | f"ReadTransform{split}[{i}]" >> r.BeamSource() for i, r in enumerate(readers)
        ]
        raw = raws[0] if len(raws) == 1 else (raws | f"Flatten[{split}]" >> beam.Flatten())
        transformed, _ = ((raw, readers[0].TensorAdapterConfig()), transform_fn) | (
            f"Transform[{split}]" >> tft_beam.TransformDataset(output_record_batches=True)
        )
        _ = (
            transformed
            | f"Encode[{split}]" >> beam.ParDo(encoder(split), deferred)
            | f"Write[{split}]"
            >> beam.io.WriteToTFRecord(
                beam_run.join(plan.examples_dir, f"Split-{split}", TRANSFORMED_PREFIX),
                file_name_suffix=".gz",
            )
        )


def transformed_schema(graph_dir: str) -> Any:
    """The transformed_metadata schema a transform graph dir holds."""
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    with beam_run.open_binary(
        beam_run.join(graph_dir, "transformed_metadata", "schema.pbtxt")
    ) as f:
        return text_format.Parse(f.read().decode("utf-8"), schema_pb2.Schema())
