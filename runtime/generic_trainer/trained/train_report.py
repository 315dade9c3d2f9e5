"""The HTML report of a train run (run_fn or Task), built from `artifacts/report.py`'s parts.

Every user-supplied string is escaped; secret custom_config values never appear (the request's
redacted copy is used).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from generic_trainer.artifacts.report import curves, key_value_table, now_utc, page, table, write

if TYPE_CHECKING:
    from generic_trainer.artifacts.results import TrainResult
    from generic_trainer.fit.requests import TrainRequest

log = logging.getLogger("generic_trainer.artifacts.report")


def train_report(request: TrainRequest, result: TrainResult) -> str:
    """The report of a train run from its TrainRequest and TrainResult."""
    inputs = {
        "examples": request.examples,
        "train splits": ", ".join(request.train_splits),
        "eval splits": ", ".join(request.eval_splits),
        "module file": request.program.module_file if not request.task else "",
        "run_fn": request.program.run_fn if not request.task else "run_fn",
        "module sha256": request.program.module_sha256,
        "schema": request.schema,
        "transform graph": request.transform_graph,
        "hyperparameters": dict(request.hyperparameters)
        if request.hyperparameters is not None
        else None,
        "base model": request.base_model,
        "train steps": request.train_steps,
        "eval steps": request.eval_steps,
        "custom_config": request.redacted_custom_config(),
        "keras": request.keras,
    }
    run = {
        "strategy": result.strategy,
        "replicas in sync": result.num_replicas,
        "devices": ", ".join(getattr(result, "devices", ()) or ()) or None,
        "steps trained": result.train_steps,
        "serving model": result.serving_model_dir,
        "signatures": ", ".join(result.model_info.get("signatures", [])) or None,
        "serving inputs": result.model_info.get("serving_inputs") or None,
        "TFLite model": _tflite_summary(result),
        "model run (TensorBoard)": request.model_run_dir,
        "checkpoints": request.checkpoint_dir,
    }
    metrics = sorted(result.metrics.items(), key=lambda kv: (kv[0].startswith("train_"), kv[0]))
    final = (
        table(metrics, header=("metric", "value"))
        if metrics
        else '<p class="note">No metrics were logged.</p>'
    )
    return page(
        "generic-trainer: training run",
        [
            ("Final metrics", final),
            ("Curves", curves(request.model_run_dir)),
            ("Run", key_value_table(run)),
            ("Inputs", key_value_table(inputs)),
        ],
        subtitle=f"{now_utc()} · {result.strategy} × {result.num_replicas} replica(s)",
    )


def _tflite_summary(result: TrainResult) -> str | None:
    """One line on the run's TFLite export (None when none was asked for)."""
    if result.tflite:
        t = result.tflite
        return (
            f"{t['path']}: {t['size_bytes']} bytes, quantization {t['quantization']}, max abs "
            "difference from "
            f"the SavedModel {t['max_abs_diff']:.3g} on {t['validated_on']} (tolerance "
            f"{t['tolerance']:g})"
        )
    return None


def write_train_report(request: TrainRequest, result: TrainResult) -> None:
    """Write the train report to `request.report_file` (if set); failures are logged, never
    raised."""
    if not request.report_file:
        return
    try:
        write(request.report_file, train_report(request, result))
    except OSError as e:
        log.warning("report: could not write %s (%s)", request.report_file, e)
        return
    log.info("report: %s", request.report_file)
