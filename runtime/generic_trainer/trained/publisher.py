"""Staging and publishing a trained model: the one path every training run (run_fn or Task) hands
its outputs to.

A replica stages its model into a `ModelStaging`: the chief into a private sibling of the model dir
(never inside it), a worker into a private dir of its own (saving is collective, so workers export
too; what they write is removed). On the chief only, `publish_model` then, in this order:
validates the serving model, stages the extras (predictSchemata, TFLite), writes the run outputs
(TensorBoard scalars, metrics file, report, log copy), calls `before_publish(result)` (the CLI
writes KFP's executor output there), and publishes the model last, whole (`Format-Serving`, its
extras, `Format-Eval`): a failure at any step before publishes nothing. A TFLite export that fails
is such a failure: nothing is published and the checkpoints stay, so a retry resumes from them.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from generic_trainer.artifacts import outputs, storage
from generic_trainer.trained import model_artifact

if TYPE_CHECKING:
    from generic_trainer.artifacts.results import TrainResult
    from generic_trainer.fit.requests import TrainRequest

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class ModelStaging:
    """Where one replica stages its model (`root`) and where the chief publishes it
    (`model_dir`)."""

    model_dir: str
    root: str

    @property
    def serving_dir(self) -> str:
        return os.path.join(self.root, outputs.SERVING_DIR)

    @property
    def eval_dir(self) -> str:
        return os.path.join(self.root, outputs.EVAL_DIR)

    @property
    def final_serving(self) -> str:
        return os.path.join(self.model_dir, outputs.SERVING_DIR)

    def remove(self) -> None:
        """Remove what is left of the staging dir (everything, once published or on failure)."""
        shutil.rmtree(self.root, ignore_errors=True)


def staging_for(model_dir: str, is_chief: bool, private_dir: str) -> ModelStaging:
    """The chief's staging dir beside `model_dir`; a worker's inside its `private_dir` (removed
    afterwards)."""
    root = storage.staging_dir_for(model_dir) if is_chief else os.path.join(private_dir, "model")
    return ModelStaging(model_dir, root)


@dataclasses.dataclass(frozen=True)
class Staged:
    """What a run staged: whether it exported a serving model into the staging dir (a Task run that
    finds its model already published exports none), whether the run trains, what wrote the model
    (for errors), and the eval examples and schema a TFLite export is checked on."""

    exported: bool = True
    trains: bool = True
    what: str = "run_fn"
    tflite_examples: Sequence[str] = ()
    schema_file: str | None = None


def raw_eval_files(
    request: TrainRequest, eval_files: Sequence[str], transformed_splits: Sequence[str]
) -> list[str]:
    """The eval splits the serving model can be fed (raw examples): not Transform's transformed
    examples."""
    raw = [f for f in eval_files if f not in transformed_splits]
    if request.tflite is not None and not raw:
        log.info(
            "the eval examples are Transform's transformed examples (TFX's wiring), which the "
            "serving model "
            "does not take: the TFLite model is checked against the SavedModel on random inputs"
        )
    return raw


def _publish_part(staged: str, final: str) -> None:
    """One staged part of the model dir (Format-Serving, Format-Eval) moved into place whole."""
    storage.publish_dir(staged, final)
    log.info("published %s", final)


def publish_model(
    request: TrainRequest,
    staging: ModelStaging,
    result: TrainResult,
    staged: Staged,
    before_publish: Callable[[TrainResult], None] | None = None,
) -> None:
    """Chief only: validate, stage the extras, write the run outputs, `before_publish`, publish the
    model last."""
    other = request.model_format == model_artifact.OTHER_FORMAT
    if staged.trains:
        serving = staging.serving_dir if staged.exported else staging.final_serving
        result.model_info = (
            model_artifact.check_other_model(serving, staged.what)
            if other
            else outputs.validate_serving_model(serving, what=staged.what)
        )
    if staged.exported and not other:
        _stage_extras(request, staging, result, staged)
    elif staged.trains:  # published by the run that exported it
        result.schemata = model_artifact.published_schemata(request.model_dir)
    # Everything else first, the model last: a failure before it publishes nothing.
    write_run_outputs(request, result)
    if before_publish is not None:
        before_publish(result)
    if not staged.exported:
        return
    _publish_part(staging.serving_dir, staging.final_serving)
    model_artifact.publish_extras(staging.root, request.model_dir)
    if os.path.isdir(staging.eval_dir) and os.listdir(staging.eval_dir):
        _publish_part(staging.eval_dir, os.path.join(request.model_dir, outputs.EVAL_DIR))
    log.info(
        "serving model: %s (%s)",
        staging.final_serving,
        f"files {', '.join(result.model_info['files'])}"
        if other
        else f"signatures {', '.join(result.model_info['signatures'])}",
    )


def _stage_extras(
    request: TrainRequest, staging: ModelStaging, result: TrainResult, staged: Staged
) -> None:
    """Stage the schemata and the TFLite model; a failed export names what was kept."""
    from generic_trainer.tflite.options import TFLiteExportError

    try:
        model_artifact.stage_extras(
            staging.root,
            staging.serving_dir,
            result,
            request.tflite,
            staged.tflite_examples,
            staged.schema_file,
        )
    except TFLiteExportError as e:
        raise TFLiteExportError(
            f"{e}. Nothing was published and the checkpoints in {request.checkpoint_dir} are kept: "
            "a retry resumes from them. Run without --export-tflite to publish the SavedModel "
            "alone, and convert it later with `generic-trainer export-tflite`"
        ) from e


def write_run_outputs(request: TrainRequest, result: TrainResult) -> None:
    """The chief's outputs besides the model: TensorBoard scalars, metrics file, report, log
    copy."""
    metrics = result.metrics
    step = f" (step {result.train_steps})" if request.task else ""
    log.info(
        "final metrics%s: %s", step, " ".join(f"{k}={v:.4g}" for k, v in sorted(metrics.items()))
    )
    if metrics:
        outputs.write_tensorboard_scalars(
            request.model_run_dir, metrics, step=result.train_steps or 0
        )
    if request.metrics_file:
        outputs.write_metrics_file(request.metrics_file, metrics)
    if request.report_file:
        from generic_trainer.trained import train_report

        train_report.write_train_report(request, result)
    outputs.copy_model_run(request.model_run_dir, request.model_run_copy_dir)
