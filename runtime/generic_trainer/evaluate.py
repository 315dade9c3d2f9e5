"""The `evaluate` verb: judge the serving model on the eval split and bless it, or not (TFX Evaluator).

One streaming pass over the eval split's TFRecord files (tf.data, `batch_size` serialized tf.Examples
at a time): each batch goes to `serving_default` of the candidate model and of the baseline model
when there is one (signature_feed.py: as serialized tf.Examples, or parsed into the signature's
tensors), and the label and slice features are read from the same serialized examples.
Metrics are accumulated overall and per slice (eval_batch.py reads a batch; eval_metrics.py: fixed-size sums,
so memory does not grow with the data; eval_keras_metrics.py: custom Keras metrics; eval_bootstrap.py:
confidence intervals), then the config's thresholds are applied, overall and per slice (eval_config.py,
eval_thresholds.py). Outputs:

- the blessing dir: a `BLESSED` or `NOT_BLESSED` file (the reasons inside), as TFX's Evaluator writes it;
  KFP metadata `blessed: 1|0`, `current_model`, `baseline_model`;
- the metrics file (the KFP `evaluation` Metrics artifact): everything, as JSON; KFP metadata: the
  overall metrics as flat scalars;
- the HTML report (eval_report.py): verdict, comparison with the baseline, slices, confusion matrix.

The models are served in sandbox.py's sandbox, as infra-validate serves them: the pass runs in a child
process (`compute`) with an address-space limit (`--memory-limit`, then on CPU) and a limit on the time
without progress (`--timeout`: loading, then each batch); this process writes the outputs. A model that
hangs or runs out of memory there is NOT_BLESSED with the reason; input errors found there are raised here.

A model that is NOT_BLESSED is a result, not a failure: the verb exits 0 (the pipeline decides).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from generic_trainer.artifacts import files, storage
from generic_trainer.errors import UserInputError
from generic_trainer.intake import judge_options
from generic_trainer.intake.contract import VerbContract
from generic_trainer.intake.judge_request import EvaluateRequest, build_evaluate_request
from generic_trainer.judge import eval_batch, eval_thresholds
from generic_trainer.judge.blessing import write_blessing
from generic_trainer.judge.eval_config import EvalConfig

if TYPE_CHECKING:  # numpy loads only when the evaluation runs (in the sandbox)
    from generic_trainer.judge import eval_metrics
from generic_trainer.judge.signature_feed import ServingModel
from generic_trainer.records import example_files, schemas

log = logging.getLogger(__name__)

PROGRESS_EVERY_S = 10.0


@dataclasses.dataclass
class EvaluateResult:
    """What an evaluation found: the verdict, the metrics overall and per slice, the threshold checks."""

    blessed: bool
    reasons: list[str]
    problem: str
    classes: list[str]
    prediction_key: str
    metrics: dict[str, float | None]
    baseline_metrics: dict[str, float | None] | None
    details: dict[str, Any]
    baseline_details: dict[str, Any] | None
    slices: list[dict[str, Any]]
    thresholds: list[dict[str, Any]]
    seconds: float = 0.0
    confidence_intervals: dict[str, Any] | None = (
        None  # the model's overall metrics: {name: {lower, upper, ...}}
    )

    def to_json(self, request: EvaluateRequest) -> dict[str, Any]:
        """The whole evaluation as JSON (the metrics file / `evaluation` artifact)."""
        return {
            "blessed": self.blessed,
            "reasons": self.reasons,
            "problem": self.problem,
            "classes": self.classes,
            "label_key": request.eval_config.label_key,
            "prediction_key": self.prediction_key,
            "model": request.model,
            "baseline_model": request.baseline_model,
            "examples": request.examples,
            "splits": list(request.eval_splits),
            "metrics": self.metrics,
            "baseline_metrics": self.baseline_metrics,
            "details": self.details,
            "baseline_details": self.baseline_details,
            "slices": self.slices,
            "thresholds": self.thresholds,
            "confidence_intervals": self.confidence_intervals,
            "eval_config": request.eval_config.to_json(),
        }

    def summary(self) -> dict[str, Any]:
        return {
            "blessed": self.blessed,
            "reasons": self.reasons,
            "metrics": self.metrics,
            "baseline_metrics": self.baseline_metrics,
            **(
                {"confidence_intervals": self.confidence_intervals}
                if self.confidence_intervals
                else {}
            ),
        }


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


def _check_schema(request: EvaluateRequest) -> None:
    """With a schema, the label, weight and slice features must be in it (a clear error before any model loads)."""
    schema = schemas.load_schema(request.schema)
    names = {f.name for f in schema.feature}
    config = request.eval_config
    if config.label_key not in names:
        raise UserInputError(
            "eval_config.label_key",
            f"{config.label_key!r} is not a feature of the schema "
            f"{request.schema}; features: {', '.join(sorted(names))}",
        )
    if config.example_weight_key and config.example_weight_key not in names:
        raise UserInputError(
            "eval_config.example_weight_key",
            f"{config.example_weight_key!r} is not a feature of "
            f"the schema; features: {', '.join(sorted(names))}",
        )
    for i, spec in enumerate(config.slices):
        for feature in spec.columns:
            if feature not in names:
                raise UserInputError(
                    f"eval_config.slices[{i}]",
                    f"{feature!r} is not a feature of the schema; "
                    f"features: {', '.join(sorted(names))}",
                )


def _dataset(request: EvaluateRequest) -> Any:
    """Batches of serialized tf.Examples of the eval splits, in file order, read once."""
    import tensorflow as tf

    patterns = example_files.split_file_patterns(request.examples, request.eval_splits)
    count = example_files.check_readable(patterns)
    log.info(
        "evaluating on %s (%d file(s)), batches of %d",
        ", ".join(patterns),
        count,
        request.batch_size,
    )
    compression_of = example_files.compression_fn(patterns)
    files = tf.data.Dataset.list_files(patterns, shuffle=False)
    records = files.interleave(
        lambda path: tf.data.TFRecordDataset(path, compression_of(path)), cycle_length=1
    )
    return records.batch(request.batch_size).prefetch(2)


def run(
    request: EvaluateRequest, before_publish: Callable[[EvaluateResult], None] | None = None
) -> EvaluateResult:
    """Evaluate the model (and baseline) in the sandbox, apply the thresholds, write the blessing, metrics and report.

    The models are served in a sandboxed child process (sandbox.py: CPU, an address-space limit, a limit on
    the time without progress): a model that hangs or runs out of memory is NOT_BLESSED with the reason.
    Input errors found there (a wrong label key, a signature that does not take tf.Examples) are raised here.
    `before_publish(result)` runs once the metrics file and report are written, before the blessing.
    """
    started = time.monotonic()
    if request.schema:
        _check_schema(request)
    result = _compute_in_sandbox(request)
    result.seconds = time.monotonic() - started
    for row in result.thresholds:
        log.info(
            "threshold %s: %s",
            {True: "passed", False: "FAILED", None: "skipped"}[row["passed"]],
            row["message"],
        )
    log.info("%s", "BLESSED" if result.blessed else "NOT_BLESSED: " + "; ".join(result.reasons))
    write_outputs(request, result, before_publish)
    return result


def sandbox_limits(request: EvaluateRequest) -> Any:
    """The evaluation process's limits: --timeout without progress, --memory-limit (then on CPU only)."""
    from generic_trainer.judge import sandbox

    return sandbox.Limits(
        timeout=request.timeout,
        memory_limit=request.memory_limit,
        idle=True,
        cpu_only=bool(request.memory_limit),
    )


def _compute_in_sandbox(request: EvaluateRequest) -> EvaluateResult:
    import shutil
    import tempfile

    from generic_trainer.judge import sandbox

    limits = sandbox_limits(request)
    work = tempfile.mkdtemp(prefix="evaluate-")
    try:
        spec_path, result_path = os.path.join(work, "spec.json"), os.path.join(work, "result.json")
        with open(spec_path, "w", encoding="utf-8") as f:
            json.dump(request.to_json(), f)
        outcome = sandbox.run(
            "generic_trainer.judge.sandbox",
            [f"{__name__}:compute_spec", spec_path, result_path],
            limits,
            work,
            "evaluation process",
            echo=True,
        )
        child: dict[str, Any] = {}
        if os.path.isfile(result_path):
            with open(result_path, encoding="utf-8") as f:
                child = json.load(f)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if "value" in child and outcome.code == 0:
        return EvaluateResult(**child["value"])
    error = child.get("error")
    if error and sandbox.is_memory_error(error.get("message", "")):
        return failed_result(
            request,
            sandbox.memory_reason(
                outcome.stage, limits, error["message"][:600], "the evaluation process"
            ),
        )
    if error:
        sandbox.raise_child_error(error)
    return failed_result(
        request,
        sandbox.failure(outcome, limits, what="the evaluation process")
        or "the evaluation process ended without a result",
    )


def failed_result(request: EvaluateRequest, reason: str) -> EvaluateResult:
    """NOT_BLESSED without metrics: the models could not be served to the end (time or memory limit)."""
    config = request.eval_config
    return EvaluateResult(
        blessed=False,
        reasons=[reason],
        problem=config.problem or "unknown",
        classes=[],
        prediction_key=config.prediction_key or "",
        metrics={},
        baseline_metrics=None,
        details={},
        baseline_details=None,
        slices=[],
        thresholds=[],
    )


def config_from_json(value: dict[str, Any]) -> EvalConfig:
    """The EvalConfig of `EvalConfig.to_json()` (exactly)."""
    return EvalConfig.from_json(value)


def compute_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """In the sandbox (`python -m generic_trainer.judge.sandbox generic_trainer.evaluate:compute_spec ...`): the
    evaluation of the request `_compute_in_sandbox` wrote (EvaluateRequest.to_json), as JSON."""
    return dataclasses.asdict(compute(EvaluateRequest.from_json(spec)))


def _load_models(
    request: EvaluateRequest,
) -> tuple[ServingModel, ServingModel | None, str, str | None]:
    """The candidate and baseline (None without one) and the output key to read from each."""
    from generic_trainer.judge import sandbox

    sandbox.progress("loading the model")
    candidate = ServingModel(request.model, "--model", request.schema)
    baseline = None
    if request.baseline_model:
        sandbox.progress("loading the baseline model")
        baseline = ServingModel(request.baseline_model, "--baseline-model", request.schema)
    log.info(
        "model: %s (serving_default outputs %s)", candidate.path, ", ".join(candidate.output_keys)
    )
    if baseline:
        log.info(
            "baseline model: %s (serving_default outputs %s)",
            baseline.path,
            ", ".join(baseline.output_keys),
        )
    else:
        log.info(
            "no baseline model: change thresholds are skipped; the model is judged on its bounds only"
        )
    prediction_key = request.eval_config.prediction_key
    key = candidate.output_key(prediction_key)
    base_key = (
        baseline.output_key(prediction_key or (key if key in baseline.output_keys else None))
        if baseline
        else None
    )
    return candidate, baseline, key, base_key


def _problem(config: EvalConfig, raw: dict[str, Any], labels_float: Any) -> tuple[str, int]:
    """The problem and class count the first batch shows; the baseline must be the same kind of model."""
    problem, num_classes = eval_batch.infer_problem(config, raw["model"], labels_float, "--model")
    if "baseline" in raw:
        base_problem = eval_batch.infer_problem(
            dataclasses.replace(config, problem=problem),
            raw["baseline"],
            labels_float,
            "--baseline-model",
        )
        if base_problem != (problem, num_classes):
            raise UserInputError(
                "--baseline-model",
                f"the baseline is a {base_problem[0]} model with "
                f"{base_problem[1]} classes; the model: {problem} with "
                f"{num_classes}",
            )
    return problem, num_classes


def compute(request: EvaluateRequest) -> EvaluateResult:
    """Serve the eval split to the model (and baseline) and compute the metrics and verdict (no outputs written)."""
    from generic_trainer.judge import eval_metrics, sandbox

    started = time.monotonic()
    config = request.eval_config
    sandbox.progress("importing TensorFlow")
    dataset = _dataset(request)
    if config.custom_metrics:
        from generic_trainer.judge import eval_keras_metrics

        for (
            metric
        ) in config.custom_metrics:  # a class that does not import fails before any model loads
            eval_keras_metrics.resolve(metric.class_path, metric.name)
    candidate, baseline, key, base_key = _load_models(request)
    slice_features = config.slice_features
    resampler = None
    if config.ci_samples:
        from generic_trainer.judge.eval_bootstrap import Resampler

        resampler = Resampler(config.ci_samples, config.ci_seed)
    problem, num_classes = None, 0
    evals: dict[str, eval_metrics.SlicedEvaluation] = {}
    seen = 0
    loop_started = last_log = time.monotonic()
    warned_range = set()
    for batch in dataset:
        sandbox.progress(f"serving batch {seen // request.batch_size + 1} (after {seen} examples)")
        serialized = batch.numpy().tolist()
        labels, labels_float, features, weights = eval_batch.read_batch(
            serialized, config, slice_features, seen
        )
        raw = {"model": candidate.predict(batch, key)}
        if baseline:
            raw["baseline"] = baseline.predict(batch, base_key)
        if problem is None:
            problem, num_classes = _problem(config, raw, labels_float)
            evals = {name: _sliced_evaluation(config, problem, num_classes) for name in raw}
        label_values = eval_batch.label_array(labels, problem, num_classes, config, seen)
        multiplicity = resampler.draw(len(serialized)) if resampler else None
        keys = [eval_metrics.slice_keys(values, config.slices) for values in features]
        for name, out in raw.items():
            if (
                problem != "regression"
                and not config.from_logits
                and name not in warned_range
                and (out.min() < -1e-3 or out.max() > 1 + 1e-3)
            ):
                warned_range.add(name)
                log.warning(
                    "%s outputs values outside [0, 1] (%.3g..%.3g): if they are logits, set "
                    "eval_config.from_logits: true",
                    name,
                    out.min(),
                    out.max(),
                )
            evals[name].add(
                label_values,
                eval_batch.predictions(out, problem, config.from_logits),
                keys,
                weights,
                multiplicity,
            )
        seen += len(serialized)
        if time.monotonic() - last_log >= PROGRESS_EVERY_S:
            last_log = time.monotonic()
            log.info("evaluated %d examples (%.0f/s)", seen, seen / (last_log - loop_started))
    if not seen:
        raise UserInputError(
            "--examples", f"the eval split(s) {', '.join(request.eval_splits)} hold no examples"
        )
    result = _result(request, problem, key, evals)
    result.seconds = time.monotonic() - started
    log.info(
        "evaluated %d examples in %.1f s (%.1f s with loading): %s",
        seen,
        time.monotonic() - loop_started,
        result.seconds,
        " ".join(f"{k}={v:.4g}" for k, v in result.metrics.items() if v is not None),
    )
    return result


def _sliced_evaluation(
    config: EvalConfig, problem: str, num_classes: int
) -> eval_metrics.SlicedEvaluation:
    from generic_trainer.judge import eval_metrics

    make_custom = None
    if config.custom_metrics:
        import functools

        from generic_trainer.judge.eval_keras_metrics import KerasMetrics

        make_custom = functools.partial(KerasMetrics, config.custom_metrics, problem, num_classes)
    return eval_metrics.SlicedEvaluation(
        problem, num_classes, config.slices, make_custom, config.ci_samples
    )


def _result(
    request: EvaluateRequest,
    problem: str,
    key: str,
    evals: dict[str, eval_metrics.SlicedEvaluation],
) -> EvaluateResult:
    from generic_trainer.judge import eval_metrics

    config = request.eval_config
    names = config.metrics_for(problem)
    model, baseline = evals["model"], evals.get("baseline")
    metrics = model.overall.result(names)
    baseline_metrics = baseline.overall.result(names) if baseline else None
    slices = []
    for slice_key, acc in model.sorted_slices():
        base_acc = baseline.slices.get(slice_key) if baseline else None
        row = {
            "slice": eval_metrics.slice_name(slice_key),
            "features": dict(slice_key),
            "metrics": acc.result(names),
            "baseline_metrics": base_acc.result(names) if base_acc else None,
        }
        if config.ci_samples:
            row["confidence_intervals"] = acc.intervals(names, config.ci_level)
        slices.append(row)
    thresholds = eval_thresholds.check_thresholds(config.thresholds, metrics, baseline_metrics)
    thresholds += eval_thresholds.check_slice_thresholds(
        config.slice_thresholds, metrics, baseline_metrics, slices, baseline is not None
    )
    reasons = [row["message"] for row in thresholds if row["passed"] is False]
    if problem == "regression":
        classes: list[str] = []
    elif config.label_vocabulary:
        classes = list(config.label_vocabulary)
    else:
        classes = [str(i) for i in range(model.num_classes)]
    return EvaluateResult(
        blessed=not reasons,
        reasons=reasons,
        problem=problem,
        classes=classes,
        prediction_key=key,
        metrics=metrics,
        baseline_metrics=baseline_metrics,
        details=model.overall.main.details(),
        baseline_details=baseline.overall.main.details() if baseline else None,
        slices=slices,
        thresholds=thresholds,
        confidence_intervals=model.overall.intervals(names, config.ci_level),
    )


def write_outputs(
    request: EvaluateRequest,
    result: EvaluateResult,
    before_publish: Callable[[EvaluateResult], None] | None = None,
) -> None:
    """The metrics file, the report, `before_publish`, then the blessing (last: a blessing means everything else
    is written)."""
    if request.metrics_file:
        text = files.dumps_strict(result.to_json(request), "evaluation value", indent=2) + "\n"
        storage.write_file_atomic(request.metrics_file, text)
        log.info("metrics: %s", request.metrics_file)
    if request.report_file:
        from generic_trainer.artifacts import report
        from generic_trainer.judge import eval_report

        report.write(request.report_file, eval_report.render(request, result))
        log.info("report: %s", request.report_file)
    if before_publish is not None:
        before_publish(result)
    write_blessing(request.blessing_dir, result.blessed, result.reasons)


def kfp_metadata(request: EvaluateRequest, result: EvaluateResult) -> dict[str, dict[str, Any]]:
    """Metadata of each KFP output artifact of an evaluate run (TFX's blessing properties)."""
    scalars = {k: v for k, v in result.metrics.items() if v is not None}
    scalars.update(
        {f"baseline_{k}": v for k, v in (result.baseline_metrics or {}).items() if v is not None}
    )
    scalars["blessed"] = int(result.blessed)
    blessing = {
        "blessed": int(result.blessed),
        "current_model": request.model,
        "baseline_model": request.baseline_model or "",
        "reasons": "; ".join(result.reasons),
    }
    return {"evaluation": scalars, "blessing": blessing, "report": {"blessed": int(result.blessed)}}


def describe(r: EvaluateRequest) -> list[str]:
    """The log lines saying what this evaluation will do."""
    return [
        f"evaluate request: model={r.model} baseline_model={r.baseline_model} examples={r.examples} "
        f"splits={','.join(r.eval_splits)} schema={r.schema} blessing_dir={r.blessing_dir} "
        f"eval_config={json.dumps(r.eval_config.to_json())} timeout={r.timeout:g}s "
        f"memory_limit={r.memory_limit or 'none'}"
    ]


VERB: VerbContract[EvaluateRequest, EvaluateResult] = VerbContract(
    judge_options.EVALUATE,
    build_evaluate_request,
    describe,
    run,
    lambda request, result: (kfp_metadata(request, result), None),
    lambda result: result.summary(),
    lock_outputs=True,
)
