"""TFMA's own Beam pipeline on the eval splits, as TFX's Evaluator executor runs it.

Per model spec of the prepared EvalConfig (tfma_config.py), the candidate (`--model`) or the
baseline (`--baseline-model`) serving model becomes an EvalSharedModel through the module file's
`custom_eval_shared_model` when it has one, else `tfma.default_eval_shared_model`, called with
TFX's arguments. Each split's files are read as TFX reads them (batched input: tfx_bsl's
TFExampleRecord with the schema when one is given, and a TensorAdapterConfig from it; else raw
TFRecords), the module's `custom_extractors` (if any) build the extractors, and
`tfma.ExtractEvaluateAndWriteResults` writes TFMA's output to `output_path`. Beam runs with
`--beam-pipeline-args` (default: the DirectRunner in this process).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from generic_trainer.errors import UserInputError

log = logging.getLogger(__name__)
PROGRESS_EVERY_S = 5.0


def load_module(path: str | None, spec: str | None) -> ModuleType | None:
    """The evaluator module file (TFX's module_file; `path` fetched, or `spec` a dotted name),
    imported with `tfma.EvalConfig` & co. available as TFX's files expect."""
    if not spec:
        return None
    from generic_trainer.fit import user_module
    from generic_trainer.judge import tfma_names

    tfma_names.install()
    return user_module.import_module(path, spec)


def shared_models(request: Any, config: Any, module: ModuleType | None) -> list[Any]:
    """One EvalSharedModel per model spec, as TFX's executor makes them."""
    import tensorflow_model_analysis as tfma

    from generic_trainer.artifacts.outputs import serving_model_path

    make = getattr(module, "custom_eval_shared_model", None) or tfma.default_eval_shared_model
    models = []
    for spec in config.model_specs:
        if spec.is_baseline and not request.baseline_model:
            raise UserInputError(
                "--baseline-model",
                f"the EvalConfig's model spec {spec.name!r} is a baseline; give its model",
            )
        artifact = request.baseline_model if spec.is_baseline else request.model
        path = serving_model_path(artifact)
        log.info("using %s as the %s model", path, spec.name or "candidate")
        models.append(
            make(
                eval_saved_model_path=path,
                model_name=spec.name,
                eval_config=config,
                add_metrics_callbacks=None,
            )
        )
    return models


class _Progress:
    """A pass-through step that tells the sandbox how far the reading got (it is alive)."""

    def __init__(self) -> None:
        self.seen = 0
        self.last = 0.0

    def __call__(self, element: Any) -> Any:
        from generic_trainer.judge import sandbox

        self.seen += getattr(element, "num_rows", 1)
        now = time.monotonic()
        if now - self.last >= PROGRESS_EVERY_S:
            self.last = now
            sandbox.progress(f"TFMA read {self.seen} examples")
        return element


def _read_splits(
    pipeline: Any, patterns: Sequence[str], batched: bool, schema: Any
) -> tuple[list[Any], Any]:
    """The PCollections of every split's examples and the TensorAdapterConfig (or None)."""
    import apache_beam as beam
    import tensorflow_model_analysis as tfma
    from tfx_bsl.tfxio import tensor_adapter, tf_example_record

    inputs, tfxio = [], None
    for i, pattern in enumerate(patterns):
        if batched:
            tfxio = tf_example_record.TFExampleRecord(
                file_pattern=pattern,
                schema=schema,
                raw_record_column_name=tfma.ARROW_INPUT_COLUMN,
            )
            inputs.append(pipeline | f"ReadFromTFRecordToArrow[{i}]" >> tfxio.BeamSource())
        else:
            read = beam.io.ReadFromTFRecord(file_pattern=pattern)
            inputs.append(pipeline | f"ReadFromTFRecord[{i}]" >> read)
    adapter = None
    if tfxio is not None and schema is not None:
        adapter = tensor_adapter.TensorAdapterConfig(
            arrow_schema=tfxio.ArrowSchema(),
            tensor_representations=tfxio.TensorRepresentations(),
        )
    return inputs, adapter


def _extractors(
    shared: Any, config: Any, adapter: Any, module: ModuleType | None, vocabulary: Sequence[str]
) -> list[Any] | None:
    """The module's custom extractors, and the label vocabulary's; None: TFMA's defaults."""
    import tensorflow_model_analysis as tfma

    from generic_trainer.judge import tfma_labels

    custom = getattr(module, "custom_extractors", None)
    extractors = None
    if custom is not None:
        extractors = custom(
            eval_shared_model=shared, eval_config=config, tensor_adapter_config=adapter
        )
    if not vocabulary:
        return extractors
    if extractors is None:
        extractors = tfma.default_extractors(
            eval_shared_model=shared, eval_config=config, tensor_adapter_config=adapter
        )
    return tfma_labels.with_vocabulary(list(extractors), config, vocabulary)


def run_pipeline(
    request: Any,
    config: Any,
    models: list[Any],
    module: ModuleType | None,
    output_path: str,
    vocabulary: Sequence[str] = (),
) -> None:
    """TFMA's ExtractEvaluateAndWriteResults over the eval splits, its output in `output_path`.

    Args:
      request: the evaluation's Job (examples, splits, schema, Beam arguments).
      config: the prepared EvalConfig.
      models: the EvalSharedModels, one per model spec.
      module: the evaluator module file (custom_extractors), or None.
      output_path: where TFMA writes its output.
      vocabulary: the short form's label_vocabulary (string labels), or empty.
    """
    import apache_beam as beam
    import tensorflow_model_analysis as tfma

    from generic_trainer.beam import beam_run
    from generic_trainer.records import example_files, schemas

    patterns = list(request.eval_files)
    example_files.check_readable(patterns)
    schema = schemas.load_schema(request.schema) if request.schema else None
    shared = models[0] if len(models) == 1 else models
    options = beam_run.in_process_options(request.beam_args)
    log.info("TFMA on %s (%s)", ", ".join(patterns), beam_run.describe_options(options))
    with beam.Pipeline(options=options) as pipeline:
        batched = tfma.is_batched_input(shared, config)
        inputs, adapter = _read_splits(pipeline, patterns, batched, schema)
        extractors = _extractors(shared, config, adapter, module, vocabulary)
        _ = (
            inputs
            | "FlattenExamples" >> beam.Flatten()
            | "Progress" >> beam.Map(_Progress())
            | "ExtractEvaluateAndWriteResults"
            >> tfma.ExtractEvaluateAndWriteResults(
                eval_shared_model=shared,
                eval_config=config,
                extractors=extractors,
                output_path=output_path,
                tensor_adapter_config=adapter,
            )
        )
