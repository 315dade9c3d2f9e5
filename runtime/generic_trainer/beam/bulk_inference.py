"""The bulk inference pipeline: examples' records through Beam's RunInference with tfx_bsl's
SavedModel handler, to TFRecords of PredictionLog (and, when asked, the examples with their
predictions added), as TFX's BulkInferrer writes them.

Why tfx_bsl's handler (`tfx_bsl.public.beam.run_inference.CreateModelHandler`) on Beam's
`apache_beam.ml.inference.base.RunInference`: it is the engine TFX's BulkInferrer runs, it runs
a SavedModel's classify / regress / predict / multi-head signatures on serialized tf.Examples
and answers with TF Serving's PredictionLog, and it loads the model as a TF1 session graph
(no Keras involved). Beam's own TensorFlow handler (`apache_beam.ml.inference.
tensorflow_inference`) loads a Keras model with `tf.keras.models.load_model`, which Keras 3 (TF
2.21's tf.keras) cannot do for a SavedModel, needs tensorflow_hub (not installed), feeds tensors
rather than serialized examples and answers with PredictionResult, not PredictionLog.

One RunInference for every split (keyed by the split's name, so the model loads once per
worker); each split's record files are read as one pattern, gzipped or not as their content says
(as the trainer reads them; a split mixing both is read file by file). Layout, as TFX's:

    <inference-result>/prediction_logs-NNNNN-of-MMMMM.gz
    <output-examples>/Split-<name>/examples-NNNNN-of-MMMMM.gz
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

from generic_trainer.beam import beam_run
from generic_trainer.beam.infer_specs import Columns, input_error

PREDICTION_LOGS = "prediction_logs"  # TFX BulkInferrer's file names
EXAMPLES = "examples"
COUNTER_PREFIX = "inferred_"
GZIP_MAGIC = b"\x1f\x8b"


@dataclasses.dataclass(frozen=True)
class SplitSource:
    """A split's record files as Beam reads them, each with whether it is gzipped."""

    pattern: str  # every file of the split
    files: tuple[tuple[str, bool], ...]

    def reads(self) -> list[tuple[str, bool]]:
        """(pattern, gzipped) to read: the split's pattern when its files agree (one read, split
        by the runner as the plain ReadFromTFRecord is), else each file on its own."""
        kinds = {gzipped for _, gzipped in self.files}
        return [(self.pattern, kinds.pop())] if len(kinds) == 1 else list(self.files)


@dataclasses.dataclass(frozen=True)
class InferencePlan:
    """What one bulk inference pipeline reads, runs and writes (paths as Beam reads them)."""

    sources: Mapping[str, SplitSource]
    model_path: str
    signature_names: tuple[str, ...]
    tags: tuple[str, ...]
    columns: tuple[Columns, ...]  # the output examples' columns (infer_model.output_columns)
    local: bool  # a runner on this machine: one output file each, as TFX writes locally


def split_sources(
    local_dir: str, uri: str, splits: Sequence[str], patterns: Sequence[str]
) -> dict[str, SplitSource]:
    """Each split's record files as Beam reads them (under `uri`), and whether each is gzipped.

    Args:
      local_dir: the examples dir here.
      uri: the same as Beam reads it.
      splits: the splits read.
      patterns: their file patterns under `local_dir` (the request's split_files), in order.

    Raises:
      UserInputError (--examples): an unreadable file.
    """
    from generic_trainer.records import example_files

    example_files.check_readable(patterns)
    sources = {}
    for split, pattern in zip(splits, patterns, strict=True):
        files = example_files.split_files(pattern)
        sources[split] = SplitSource(
            beam_run.join(uri, os.path.relpath(pattern, local_dir)),
            tuple((beam_run.join(uri, os.path.relpath(f, local_dir)), _gzipped(f)) for f in files),
        )
    return sources


def _gzipped(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == GZIP_MAGIC


def _handler(plan: InferencePlan) -> Any:
    """tfx_bsl's SavedModel handler for Beam's RunInference, keyed by split; examples the model
    cannot parse (a feature missing, of another type) are bad input naming --examples. The loaded
    session gets the variables a Keras 3 model's restore leaves unset (session_variables.py)."""
    import tensorflow as tf
    from apache_beam.ml.inference import base
    from tfx_bsl.public.beam import run_inference
    from tfx_bsl.public.proto import model_spec_pb2

    saved_model = model_spec_pb2.SavedModelSpec(
        model_path=plan.model_path, signature_name=plan.signature_names, tag=plan.tags
    )
    spec = model_spec_pb2.InferenceSpecType(saved_model_spec=saved_model)

    class Keyed(base.KeyedModelHandler):
        def load_model(self) -> Any:
            from generic_trainer.beam.session_variables import set_unset_variables

            session = super().load_model()
            set_unset_variables(session)  # a Keras 3 model's variables its restore left unset
            return session

        def run_inference(self, batch: Any, model: Any, inference_args: Any = None) -> Any:
            try:
                return super().run_inference(batch, model, inference_args)
            except tf.errors.InvalidArgumentError as e:
                first = (e.message or str(e)).strip().splitlines()[0]
                raise input_error(
                    "--examples",
                    f"split {batch[0][0]!r}: the model cannot take these examples: {first}",
                ) from None

    return Keyed(run_inference.CreateModelHandler(spec))


def _read_split(pipeline: Any, split: str, source: SplitSource) -> Any:
    """The split's records keyed by its name, counted in COUNTER_PREFIX<split>."""
    import apache_beam as beam
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.metrics import Metrics

    parts = []
    for i, (pattern, gzipped) in enumerate(source.reads()):
        kind = CompressionTypes.GZIP if gzipped else CompressionTypes.UNCOMPRESSED
        read = beam.io.ReadFromTFRecord(pattern, compression_type=kind)
        parts.append(pipeline | f"Read[{split}][{i}]" >> read)
    records = parts[0] if len(parts) == 1 else parts | f"Join[{split}]" >> beam.Flatten()
    counter = Metrics.counter(beam_run.METRICS_NAMESPACE, COUNTER_PREFIX + split)

    def keyed(record: bytes) -> tuple[str, bytes]:
        counter.inc()
        return split, record

    return records | f"Key[{split}]" >> beam.Map(keyed)


def _to_examples_fn(columns: tuple[Columns, ...], splits: Sequence[str]) -> Any:
    import apache_beam as beam

    from generic_trainer.beam.prediction_examples import to_example

    class ToExamples(beam.DoFn):
        def process(self, element: tuple[str, Any]):
            split, log = element
            yield beam.pvalue.TaggedOutput(split, to_example(log, columns))

    return beam.ParDo(ToExamples()).with_outputs(*splits)


def build(
    pipeline: Any, plan: InferencePlan, result_dir: str | None, examples_dir: str | None
) -> None:
    """Read every split, run the model, write the PredictionLogs to `result_dir` and the examples
    with their predictions to `examples_dir` (either may be None: not written)."""
    import apache_beam as beam
    from apache_beam.ml.inference.base import RunInference
    from tensorflow_serving.apis import prediction_log_pb2

    shards = 1 if plan.local else 0  # TFX: one file on a local runner, the runner's choice else
    keyed = [_read_split(pipeline, s, source) for s, source in plan.sources.items()]
    logs = keyed | "Flatten" >> beam.Flatten() | "RunInference" >> RunInference(_handler(plan))
    if result_dir:
        _ = (
            logs
            | "Logs" >> beam.Values()
            | "WriteLogs"
            >> beam.io.WriteToTFRecord(
                beam_run.join(result_dir, PREDICTION_LOGS),
                file_name_suffix=".gz",
                num_shards=shards,
                coder=beam.coders.ProtoCoder(prediction_log_pb2.PredictionLog),
            )
        )
    if not examples_dir:
        return
    examples = logs | "ToExamples" >> _to_examples_fn(plan.columns, list(plan.sources))
    for split in plan.sources:
        _ = examples[split] | f"WriteExamples[{split}]" >> beam.io.WriteToTFRecord(
            beam_run.join(examples_dir, f"Split-{split}", EXAMPLES),
            file_name_suffix=".gz",
            num_shards=shards,
        )
