"""The `evaluate` verb: TFX's Evaluator. TFMA judges the model on the eval splits and blesses it.

The evaluation is TFMA's own Beam pipeline (judge/tfma_run.py) on the EvalConfig as given: TFMA's
text proto or JSON, or the project's short form written as an EvalConfig (judge/eval_short_form.py).
The config is prepared as TFX's Evaluator prepares it (judge/tfma_config.py: the baseline model spec
when there is a baseline, change thresholds skipped without one, the legacy feature_slicing_spec,
fairness_indicator_thresholds), and the module file's `custom_eval_shared_model` and
`custom_extractors` are called as TFX calls them. Outputs:

- `--evaluation-dir` (KFP `evaluation`): TFMA's output, as TFX's Evaluator writes it
  (`tfma.load_eval_result`, `tfma.load_validation_result` read it);
- the blessing dir: `BLESSED` or `NOT_BLESSED` from TFMA's validation result (the reasons inside);
  KFP metadata `blessed: 1|0`, `current_model`, `baseline_model`;
- the metrics file (KFP `metrics`): the summary derived from TFMA's result, as JSON;
- the HTML report (judge/eval_report.py): verdict, comparison with the baseline, slices.

TFMA runs in sandbox.py's sandbox: a child process (`compute_spec`) with an address-space limit
(`--memory-limit`, then on CPU) and a limit on the time without progress (`--timeout`); this process
publishes the outputs. A model that hangs or runs out of memory there is NOT_BLESSED with the
reason; input errors found there are raised here. NOT_BLESSED is a result, not a failure: exit 0.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any

from generic_trainer.artifacts import files, storage
from generic_trainer.artifacts.staged import StagedDir
from generic_trainer.errors import UserInputError
from generic_trainer.intake import judge_options
from generic_trainer.intake.contract import VerbContract
from generic_trainer.intake.judge_request import EvaluateRequest, build_evaluate_request
from generic_trainer.judge.blessing import write_blessing

log = logging.getLogger(__name__)


@dataclasses.dataclass
class EvaluateResult:
    """What TFMA found: the verdict, the metrics overall and per slice, the threshold checks."""

    blessed: bool
    reasons: list[str]
    metrics: dict[str, float | None]
    baseline_metrics: dict[str, float | None] | None
    slices: list[dict[str, Any]]
    thresholds: list[dict[str, Any]]
    validated: bool = True  # thresholds were configured (TFX writes no blessing otherwise)
    problem: str = ""
    tfma_eval_config: dict[str, Any] = dataclasses.field(default_factory=dict)
    confidence_intervals: dict[str, Any] | None = None
    seconds: float = 0.0

    def to_json(self, request: EvaluateRequest) -> dict[str, Any]:
        """The whole evaluation as JSON (the metrics file)."""
        return {
            **dataclasses.asdict(self),
            "model": request.model,
            "baseline_model": request.baseline_model,
            "examples": request.examples,
            "splits": list(request.eval_splits),
            "evaluation_dir": request.evaluation_dir,
        }

    def summary(self) -> dict[str, Any]:
        """The printed summary: verdict and overall metrics."""
        out = {
            "blessed": self.blessed,
            "reasons": self.reasons,
            "metrics": self.metrics,
            "baseline_metrics": self.baseline_metrics,
        }
        if self.confidence_intervals:
            out["confidence_intervals"] = self.confidence_intervals
        return out


def run(
    request: EvaluateRequest, before_publish: Callable[[EvaluateResult], None] | None = None
) -> EvaluateResult:
    """Run TFMA in the sandbox, then publish its output, the metrics, the report and the blessing.

    Args:
      request: the evaluate request.
      before_publish: called once everything but the blessing is written.

    Returns:
      The EvaluateResult (NOT_BLESSED with the reason when the sandbox's limits stopped TFMA).
    """
    from generic_trainer.fit import user_module

    started = time.monotonic()
    work = tempfile.mkdtemp(prefix="evaluate-")
    try:
        module_path = None
        if request.module_file:
            module_path = user_module.checked_source(
                request.module_file, work, settings=request.storage
            )
        output = os.path.join(work, "tfma")
        result = _compute_in_sandbox(request, work, output, module_path)
        result.seconds = time.monotonic() - started
        _log_verdict(result)
        write_outputs(request, result, output, before_publish)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return result


def _log_verdict(result: EvaluateResult) -> None:
    for row in result.thresholds:
        log.info("threshold %s: %s", "passed" if row["passed"] else "FAILED", row["message"])
    if not result.validated:
        log.info("no thresholds configured: nothing to fail (TFX's Evaluator writes no blessing)")
    log.info("%s", "BLESSED" if result.blessed else "NOT_BLESSED: " + "; ".join(result.reasons))


def sandbox_limits(request: EvaluateRequest) -> Any:
    """The evaluation process's limits: --timeout without progress, --memory-limit (CPU only)."""
    from generic_trainer.judge import sandbox

    return sandbox.Limits(
        timeout=request.timeout,
        memory_limit=request.memory_limit,
        idle=True,
        cpu_only=bool(request.memory_limit),
    )


def _compute_in_sandbox(
    request: EvaluateRequest, work: str, output: str, module_path: str | None
) -> EvaluateResult:
    from generic_trainer.judge import sandbox, sandbox_outcome

    limits = sandbox_limits(request)
    spec_path, result_path = os.path.join(work, "spec.json"), os.path.join(work, "result.json")
    spec = {"request": request.to_json(), "output": output, "module_path": module_path}
    with open(spec_path, "w", encoding="utf-8") as f:
        json.dump(spec, f)
    outcome = sandbox.run(
        "generic_trainer.judge.sandbox",
        ["generic_trainer.judge.tfma_evaluation:compute_spec", spec_path, result_path],
        limits,
        work,
        "evaluation process",
        echo=True,
    )
    child: dict[str, Any] = {}
    if os.path.isfile(result_path):
        with open(result_path, encoding="utf-8") as f:
            child = json.load(f)
    if "value" in child and outcome.code == 0:
        return EvaluateResult(**child["value"])
    error = child.get("error")
    if error and sandbox_outcome.is_memory_error(error.get("message", "")):
        reason = sandbox_outcome.memory_reason(
            outcome.stage, limits, error["message"][:600], "the evaluation process"
        )
        return failed_result(reason)
    if error:
        if not _is_ours(error):
            _raise_tfma_error(error)
        sandbox.raise_child_error(error)
    return failed_result(
        sandbox_outcome.failure(outcome, limits, what="the evaluation process")
        or "the evaluation process ended without a result"
    )


def _is_ours(error: dict[str, Any]) -> bool:
    """Whether the child's error is one of the runtime's (errors.TrainerError and its kinds)."""
    from generic_trainer import errors

    cls = getattr(errors, str(error.get("class", "")), None)
    return isinstance(cls, type) and issubclass(cls, errors.TrainerError)


def _raise_tfma_error(error: dict[str, Any]) -> None:
    """TFMA's pipeline stopped on the model, the examples or the EvalConfig given: exit 2, with
    TFMA's own message (a model whose signature takes other inputs than the examples give, a
    config naming what the model lacks)."""
    message = str(error.get("message", ""))[:2000]
    raise UserInputError(
        "--model",
        f"TFMA could not evaluate the model on these examples with this EvalConfig: {message}",
    )


def failed_result(reason: str) -> EvaluateResult:
    """NOT_BLESSED without metrics: TFMA could not run to the end (time or memory limit)."""
    return EvaluateResult(
        blessed=False,
        reasons=[reason],
        metrics={},
        baseline_metrics=None,
        slices=[],
        thresholds=[],
    )


def write_outputs(
    request: EvaluateRequest,
    result: EvaluateResult,
    tfma_output: str,
    before_publish: Callable[[EvaluateResult], None] | None = None,
) -> None:
    """The metrics file, the report, TFMA's output, `before_publish`, then the blessing (last)."""
    if request.metrics_file:
        text = files.dumps_strict(result.to_json(request), "evaluation value", indent=2) + "\n"
        storage.write_file_atomic(request.metrics_file, text)
        log.info("metrics: %s", request.metrics_file)
    if request.report_file:
        from generic_trainer.artifacts import report
        from generic_trainer.judge import eval_report

        report.write(request.report_file, eval_report.render(request, result))
        log.info("report: %s", request.report_file)
    if request.evaluation_dir and os.path.isdir(tfma_output):
        with StagedDir(request.evaluation_dir) as stage:
            shutil.copytree(tfma_output, stage.path, dirs_exist_ok=True)
            stage.publish()
        log.info("evaluation (TFMA's output): %s", request.evaluation_dir)
    if before_publish is not None:
        before_publish(result)
    if result.blessed and request.records_dir:  # resolve checks the blessing is published
        from generic_trainer.tfx_kfp import model_records

        model_records.record_blessed(request.records_dir, request.model, request.blessing_dir)
    write_blessing(request.blessing_dir, result.blessed, result.reasons)


def kfp_metadata(request: EvaluateRequest, result: EvaluateResult) -> dict[str, dict[str, Any]]:
    """Metadata of each KFP output artifact of an evaluate run (TFX's blessing properties)."""
    scalars: dict[str, Any] = {k: v for k, v in result.metrics.items() if v is not None}
    baseline = result.baseline_metrics or {}
    scalars.update({f"baseline_{k}": v for k, v in baseline.items() if v is not None})
    scalars["blessed"] = int(result.blessed)
    blessing = {
        "blessed": int(result.blessed),
        "current_model": request.model,
        "baseline_model": request.baseline_model or "",
        "reasons": "; ".join(result.reasons),
    }
    return {
        "metrics": scalars,
        "evaluation": {"validation_ok": int(result.blessed)},
        "blessing": blessing,
        "report": {"blessed": int(result.blessed)},
    }


def kfp_outputs(
    request: EvaluateRequest, result: EvaluateResult
) -> tuple[dict[str, dict[str, Any]], dict[str, Any] | None]:
    """The artifacts' metadata and, when the component declares it, the `blessed` output parameter
    (a pipeline's dsl.If tests it: TFX's Cond on the blessing's `blessed` property)."""
    declared = request.kfp is not None and "blessed" in request.kfp.parameters
    return kfp_metadata(request, result), {"blessed": result.blessed} if declared else None


def describe(r: EvaluateRequest) -> list[str]:
    """The log lines saying what this evaluation will do."""
    config = r.tfma_config or json.dumps(r.eval_config.to_json())
    return [
        f"evaluate request: model={r.model} baseline_model={r.baseline_model} "
        f"examples={r.examples} splits={','.join(r.eval_splits)} schema={r.schema} "
        f"module_file={r.module_file} evaluation_dir={r.evaluation_dir} "
        f"blessing_dir={r.blessing_dir} beam_args={list(r.beam_args)} timeout={r.timeout:g}s "
        f"memory_limit={r.memory_limit or 'none'}",
        f"eval config: {' '.join(config.split())}",
    ]


VERB: VerbContract[EvaluateRequest, EvaluateResult] = VerbContract(
    judge_options.EVALUATE,
    build_evaluate_request,
    describe,
    run,
    kfp_outputs,
    lambda result: result.summary(),
    lock_outputs=True,
)
