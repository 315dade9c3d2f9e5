"""The request of bulk-infer: a model, examples and their splits, an optional blessing, TFX's
specs and the outputs, resolved and checked before TensorFlow or Beam loads.

The model must hold a SavedModel (saved_model.pb); the splits must exist (none given: every
`Split-<name>/` of the examples, as TFX's empty data_spec); the blessing must be a directory (its
verdict is read by the verb, still before anything is written); the specs are TFX's JSON
(beam/infer_specs.py). Paths Beam reads or writes stay gs:// URIs for a runner elsewhere
(data_request.BeamInputs), as the other Beam verbs' do.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from generic_trainer.artifacts import outputs, storage
from generic_trainer.artifacts.kfp_io import KfpOutputs
from generic_trainer.beam import beam_run
from generic_trainer.beam.infer_specs import (
    Columns,
    ModelSpec,
    parse_model_spec,
    parse_output_example_spec,
)
from generic_trainer.errors import UserInputError
from generic_trainer.intake.data_request import BeamInputs, beam_inputs
from generic_trainer.intake.paths import (
    examples_dir,
    model_dir,
    split_patterns,
)
from generic_trainer.intake.request import (
    existing_path,
)
from generic_trainer.intake.values import (
    split_names,
)

SAVED_MODEL_FILES = ("saved_model.pb", "saved_model.pbtxt")


@dataclasses.dataclass(frozen=True)
class BulkInferRequest:
    """Every input of a bulk-infer run, resolved: local paths checked, the URIs Beam uses."""

    model: str  # the SavedModel dir (a model artifact's Format-Serving), local
    model_uri: str  # the same as Beam's workers load it (gs:// for a remote runner)
    examples: str  # local, checked
    examples_uri: str
    data_splits: tuple[str, ...]
    split_files: tuple[str, ...] = ()  # `<examples>/Split-<name>/*` per data split (at intake)
    inference_result: str | None = None
    output_examples: str | None = None
    model_blessing: str | None = None
    model_spec: ModelSpec = ModelSpec()
    output_example_spec: tuple[Columns, ...] = ()
    beam_args: tuple[str, ...] = ()
    local_runner: bool = True
    gcs_root: str = "/gcs"
    kfp: KfpOutputs | None = None


def _model(value: Any, beam: BeamInputs) -> tuple[str, str]:
    """(the local SavedModel dir, the same as Beam's workers load it: gs:// for a remote runner)."""
    path = model_dir("--model", value, beam.raw.gcs_root, required=True)
    serving = outputs.serving_model_path(path)
    if not any(os.path.isfile(os.path.join(serving, f)) for f in SAVED_MODEL_FILES):
        raise UserInputError(
            "--model",
            f"{serving} holds no SavedModel (saved_model.pb): expected a train model dir "
            "(DIR/Format-Serving) or a SavedModel dir",
        )
    inner = os.path.relpath(serving, path)
    uri = beam.path(str(value))
    if inner != ".":
        uri = beam_run.join(uri, inner)
    return os.path.normpath(os.path.abspath(serving)), uri if storage.is_gcs_uri(uri) else serving


def _splits(examples: str, value: Any) -> dict[str, tuple[str, ...]]:
    """The splits given, else every split, and their file patterns (--examples resolved once;
    each split checked to exist and hold files)."""
    given = split_names("--data-splits", value, ())
    if given:
        return {
            "data_splits": given,
            "split_files": split_patterns(examples, given, "--data-splits"),
        }
    present = sorted(
        e.name[len("Split-") :]
        for e in os.scandir(examples)
        if e.is_dir() and e.name.startswith("Split-")
    )
    if not present:
        raise UserInputError(
            "--examples",
            f"{examples} holds no Split-<name>/ directory; expected examples in TFX layout",
        )
    return {"data_splits": tuple(present), "split_files": split_patterns(examples, present)}


def _blessing(value: Any, gcs_root: str) -> str | None:
    path = existing_path("--model-blessing", value, gcs_root)
    if path and not os.path.isdir(path):
        raise UserInputError(
            "--model-blessing",
            f"{value} is not a directory (expected the evaluator's blessing dir, holding "
            "BLESSED or NOT_BLESSED)",
        )
    return os.path.abspath(path) if path else None


def build_bulk_infer_request(
    values: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    kfp: KfpOutputs | None = None,
) -> BulkInferRequest:
    """Validate raw values (keyed by flag name, dashes as underscores) into a BulkInferRequest."""
    beam = beam_inputs(values, environ, kfp)
    gcs_root = beam.raw.gcs_root
    model, model_uri = _model(values.get("model"), beam)
    examples = os.path.abspath(examples_dir(values, gcs_root))
    result = beam.output("inference_result", "inference_result")
    written = beam.output("output_examples", "output_examples")
    if not result and not written:
        raise UserInputError(
            "--inference-result",
            "required: where the PredictionLogs go (or give --output-examples, or both)",
        )
    result_path = beam.new_dir("--inference-result", result, "") if result else None
    written_path = beam.new_dir("--output-examples", written, "") if written else None
    if result_path and result_path == written_path:
        raise UserInputError("--output-examples", "must differ from --inference-result")
    return BulkInferRequest(
        model=model,
        model_uri=model_uri,
        examples=examples,
        examples_uri=beam.path(values["examples"]) if not beam.local else examples,
        **_splits(examples, values.get("data_splits")),
        inference_result=result_path,
        output_examples=written_path,
        model_blessing=_blessing(values.get("model_blessing"), gcs_root),
        model_spec=parse_model_spec(values.get("model_spec")),
        output_example_spec=parse_output_example_spec(values.get("output_example_spec")),
        beam_args=beam.beam_args,
        local_runner=beam.local,
        gcs_root=gcs_root,
        kfp=kfp,
    )


def describe(r: BulkInferRequest) -> list[str]:
    """The log lines saying what this bulk-infer run will do."""
    return [
        f"bulk-infer request: model={r.model_uri} examples={r.examples_uri} "
        f"data_splits={','.join(r.data_splits)} model_blessing={r.model_blessing} "
        f"signatures={','.join(r.model_spec.signature_names) or 'serving_default'} "
        f"inference_result={r.inference_result} output_examples={r.output_examples} "
        f"beam_args={list(r.beam_args)}"
    ]
