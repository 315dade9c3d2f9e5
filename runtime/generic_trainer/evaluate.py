"""The `evaluate` verb: judge the serving model on the eval split and bless it, or not (TFX Evaluator).

One streaming pass over the eval split's TFRecord files (tf.data, `batch_size` serialized tf.Examples
at a time): each batch goes to `serving_default` of the candidate model and of the baseline model
when there is one (signature_feed.py: as serialized tf.Examples, or parsed into the signature's
tensors), and the label and slice features are read from the same serialized examples.
Metrics are accumulated overall and per slice (eval_metrics.py: fixed-size sums, so memory does not
grow with the data), then the config's thresholds are applied (eval_config.py). Outputs:

- the blessing dir: a `BLESSED` or `NOT_BLESSED` file (the reasons inside), as TFX's Evaluator writes it;
  KFP metadata `blessed: 1|0`, `current_model`, `baseline_model`;
- the metrics file (the KFP `evaluation` Metrics artifact): everything, as JSON; KFP metadata: the
  overall metrics as flat scalars;
- the HTML report: verdict, comparison with the baseline, slices, confusion matrix.

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
import math
import os
import time
from collections.abc import Sequence
from typing import Any

from generic_trainer import data, eval_metrics, storage
from generic_trainer.blessing import write_blessing
from generic_trainer.errors import UserInputError
from generic_trainer.eval_config import EvalConfig
from generic_trainer.request import EvaluateRequest
from generic_trainer.signature_feed import ServingModel

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

    def to_json(self, request: EvaluateRequest) -> dict[str, Any]:
        """The whole evaluation as JSON (the metrics file / `evaluation` artifact)."""
        return {
            "blessed": self.blessed, "reasons": self.reasons, "problem": self.problem, "classes": self.classes,
            "label_key": request.eval_config.label_key, "prediction_key": self.prediction_key,
            "model": request.model, "baseline_model": request.baseline_model, "examples": request.examples,
            "splits": list(request.eval_splits), "metrics": self.metrics, "baseline_metrics": self.baseline_metrics,
            "details": self.details, "baseline_details": self.baseline_details, "slices": self.slices,
            "thresholds": self.thresholds, "eval_config": request.eval_config.to_json(),
        }

    def summary(self) -> dict[str, Any]:
        return {"blessed": self.blessed, "reasons": self.reasons, "metrics": self.metrics,
                "baseline_metrics": self.baseline_metrics}


# --------------------------------------------------------------------------------------------
# Labels, slices and predictions of a batch
# --------------------------------------------------------------------------------------------


def _values(feature: Any) -> list[Any]:
    kind = feature.WhichOneof("kind")
    return list(getattr(feature, kind).value) if kind else []


def read_batch(serialized: Sequence[bytes], config: EvalConfig, slice_features: Sequence[str], offset: int,
               ) -> tuple[list[Any], bool, list[dict[str, list[Any]]]]:
    """(label per example, whether the labels are floats, {feature: values} per example) from tf.Examples."""
    from tensorflow.core.example import example_pb2

    labels, is_float, features = [], False, []
    key = config.label_key
    for i, record in enumerate(serialized):
        example = example_pb2.Example.FromString(record)
        feature_map = example.features.feature
        values = _values(feature_map[key]) if key in feature_map else []
        if len(values) != 1:
            found = ", ".join(sorted(feature_map)) or "none"
            raise UserInputError("eval_config.label_key", f"eval example #{offset + i} has {len(values)} values of "
                                                          f"{key!r}; expected exactly one (its features: {found})")
        is_float = is_float or feature_map[key].WhichOneof("kind") == "float_list"
        labels.append(values[0])
        features.append({f: _values(feature_map[f]) for f in slice_features if f in feature_map})
    return labels, is_float, features


def label_array(labels: list[Any], problem: str, num_classes: int, config: EvalConfig, offset: int) -> Any:
    """Labels as class indices (classification, through label_vocabulary for strings) or floats."""
    import numpy as np

    if labels and isinstance(labels[0], bytes):
        if problem == "regression" or not config.label_vocabulary:
            raise UserInputError("eval_config.label_vocabulary",
                                 f"the labels are strings ({labels[0].decode(errors='replace')!r}); list the class "
                                 "names in label_vocabulary, in the order of the model's outputs")
        index = {v: i for i, v in enumerate(config.label_vocabulary)}
        out = []
        for i, label in enumerate(labels):
            text = label.decode(errors="replace")
            if text not in index:
                raise UserInputError("eval_config.label_vocabulary",
                                     f"eval example #{offset + i} has label {text!r}, not in label_vocabulary")
            out.append(index[text])
        array = np.asarray(out, dtype=np.int64)
    else:
        array = np.asarray(labels, dtype=np.float64)
        if problem == "regression":
            return array
        if not np.all(array == np.round(array)):
            bad = array[array != np.round(array)][0]
            raise UserInputError("eval_config.problem", f"label {bad:g} is not a class index; a {problem} model needs "
                                                        "integer labels (use problem: regression for numbers)")
        array = array.astype(np.int64)
    classes = 2 if problem == "binary" else num_classes
    bad = array[(array < 0) | (array >= classes)]
    if bad.size:
        what = "0 or 1" if problem == "binary" else f"0..{classes - 1} (the model has {classes} outputs)"
        raise UserInputError("eval_config.label_key", f"label {int(bad[0])} is out of range: a {problem} label is "
                                                      f"{what}")
    return array


def _softmax(x: Any) -> Any:
    import numpy as np

    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def predictions(raw: Any, problem: str, from_logits: bool) -> Any:
    """Model output -> what the accumulator takes: probabilities [n, classes], or values [n] (regression)."""
    import numpy as np

    raw = raw.astype(np.float64)
    if problem == "regression":
        return raw.reshape(-1)
    if problem == "binary":
        if raw.ndim == 2 and raw.shape[1] == 2:
            p = (_softmax(raw) if from_logits else raw)[:, 1]
        else:
            p = raw.reshape(-1)
            p = 1.0 / (1.0 + np.exp(-p)) if from_logits else p
        return np.stack([1.0 - p, p], axis=1)
    return _softmax(raw) if from_logits else raw


def infer_problem(config: EvalConfig, raw: Any, labels_are_float: bool, input_name: str) -> tuple[str, int]:
    """(problem, classes) from the config, else from the output's width and the label type."""
    width = 1 if raw.ndim == 1 else int(raw.shape[1])
    problem = config.problem
    if problem is None:
        problem = "multiclass" if width > 1 else ("regression" if labels_are_float else "binary")
        log.info("problem: %s (inferred: %d output column(s), %s labels); set eval_config.problem to choose",
                 problem, width, "float" if labels_are_float else "integer")
    if problem == "multiclass" and width < 2:
        raise UserInputError("eval_config.problem", f"a multiclass model outputs one column per class; "
                                                    f"{input_name}'s output has {width}")
    if problem == "binary" and width > 2:
        raise UserInputError("eval_config.problem", f"a binary model outputs 1 probability (or 2 columns); "
                                                    f"{input_name}'s output has {width} columns (multiclass?)")
    if problem == "regression" and width != 1:
        raise UserInputError("eval_config.problem", f"a regression model outputs one value; {input_name}'s output "
                                                    f"has {width} columns")
    if config.label_vocabulary and problem == "multiclass" and len(config.label_vocabulary) != width:
        raise UserInputError("eval_config.label_vocabulary", f"lists {len(config.label_vocabulary)} classes; the "
                                                             f"model outputs {width}")
    return problem, (width if problem == "multiclass" else 2)


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


def _check_schema(request: EvaluateRequest) -> None:
    """With a schema, the label and slice features must be in it (a clear error before any model loads)."""
    schema = data.load_schema(request.schema)
    names = {f.name for f in schema.feature}
    config = request.eval_config
    if config.label_key not in names:
        raise UserInputError("eval_config.label_key", f"{config.label_key!r} is not a feature of the schema "
                                                      f"{request.schema}; features: {', '.join(sorted(names))}")
    for i, spec in enumerate(config.slices):
        for feature in spec:
            if feature not in names:
                raise UserInputError(f"eval_config.slices[{i}]", f"{feature!r} is not a feature of the schema; "
                                                                  f"features: {', '.join(sorted(names))}")


def _dataset(request: EvaluateRequest) -> Any:
    """Batches of serialized tf.Examples of the eval splits, in file order, read once."""
    import tensorflow as tf

    patterns = data.split_file_patterns(request.examples, request.eval_splits)
    count = data.check_readable(patterns)
    log.info("evaluating on %s (%d file(s)), batches of %d", ", ".join(patterns), count, request.batch_size)
    compression_of = data.compression_fn(patterns)
    files = tf.data.Dataset.list_files(patterns, shuffle=False)
    records = files.interleave(lambda path: tf.data.TFRecordDataset(path, compression_of(path)), cycle_length=1)
    return records.batch(request.batch_size).prefetch(2)


def run(request: EvaluateRequest) -> EvaluateResult:
    """Evaluate the model (and baseline) in the sandbox, apply the thresholds, write the blessing, metrics and report.

    The models are served in a sandboxed child process (sandbox.py: CPU, an address-space limit, a limit on
    the time without progress): a model that hangs or runs out of memory is NOT_BLESSED with the reason.
    Input errors found there (a wrong label key, a signature that does not take tf.Examples) are raised here.
    """
    started = time.monotonic()
    if request.schema:
        _check_schema(request)
    result = _compute_in_sandbox(request)
    result.seconds = time.monotonic() - started
    for row in result.thresholds:
        log.info("threshold %s: %s", {True: "passed", False: "FAILED", None: "skipped"}[row["passed"]], row["message"])
    log.info("%s", "BLESSED" if result.blessed else "NOT_BLESSED: " + "; ".join(result.reasons))
    write_outputs(request, result)
    return result


def sandbox_limits(request: EvaluateRequest) -> Any:
    """The evaluation process's limits: --timeout without progress, --memory-limit (then on CPU only)."""
    from generic_trainer import sandbox

    return sandbox.Limits(timeout=request.timeout, memory_limit=request.memory_limit, idle=True,
                          cpu_only=bool(request.memory_limit))


def _compute_in_sandbox(request: EvaluateRequest) -> EvaluateResult:
    import shutil
    import tempfile

    from generic_trainer import sandbox

    limits = sandbox_limits(request)
    work = tempfile.mkdtemp(prefix="evaluate-")
    try:
        spec_path, result_path = os.path.join(work, "spec.json"), os.path.join(work, "result.json")
        spec = {"model": request.model, "baseline_model": request.baseline_model, "examples": request.examples,
                "eval_splits": list(request.eval_splits), "batch_size": request.batch_size,
                "eval_config": request.eval_config.to_json(), "gcs_root": request.gcs_root,
                "schema": request.schema}
        with open(spec_path, "w", encoding="utf-8") as f:
            json.dump(spec, f)
        outcome = sandbox.run("generic_trainer.sandbox", [f"{__name__}:compute_spec", spec_path, result_path],
                              limits, work, "evaluation process", echo=True)
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
        return failed_result(request, sandbox.memory_reason(outcome.stage, limits, error["message"][:600],
                                                                 "the evaluation process"))
    if error:
        sandbox.raise_child_error(error)
    return failed_result(request, sandbox.failure(outcome, limits, what="the evaluation process")
                         or "the evaluation process ended without a result")


def failed_result(request: EvaluateRequest, reason: str) -> EvaluateResult:
    """NOT_BLESSED without metrics: the models could not be served to the end (time or memory limit)."""
    config = request.eval_config
    return EvaluateResult(blessed=False, reasons=[reason], problem=config.problem or "unknown", classes=[],
                          prediction_key=config.prediction_key or "", metrics={}, baseline_metrics=None, details={},
                          baseline_details=None, slices=[], thresholds=[])


def config_from_json(value: dict[str, Any]) -> EvalConfig:
    """The EvalConfig of `EvalConfig.to_json()` (exactly)."""
    from generic_trainer.eval_config import Threshold

    def tupled(v: Any) -> Any:
        return tuple(v) if v is not None else None

    return EvalConfig(**{**value, "label_vocabulary": tupled(value["label_vocabulary"]),
                         "metrics": tupled(value["metrics"]), "slices": tuple(tuple(s) for s in value["slices"]),
                         "thresholds": tuple(Threshold(**t) for t in value["thresholds"])})


def compute_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """In the sandbox (`python -m generic_trainer.sandbox generic_trainer.evaluate:compute_spec ...`): the
    evaluation of the spec `_compute_in_sandbox` wrote, as JSON."""
    request = EvaluateRequest(model=spec["model"], examples=spec["examples"],
                              eval_config=config_from_json(spec["eval_config"]), blessing_dir="",
                              baseline_model=spec["baseline_model"], eval_splits=tuple(spec["eval_splits"]),
                              batch_size=spec["batch_size"], gcs_root=spec["gcs_root"],
                              schema=spec.get("schema"))
    return dataclasses.asdict(compute(request))


def compute(request: EvaluateRequest) -> EvaluateResult:
    """Serve the eval split to the model (and baseline) and compute the metrics and verdict (no outputs written)."""
    from generic_trainer import sandbox

    started = time.monotonic()
    config = request.eval_config
    sandbox.progress("importing TensorFlow")
    dataset = _dataset(request)
    sandbox.progress("loading the model")
    candidate = ServingModel(request.model, "--model", request.schema)
    baseline = None
    if request.baseline_model:
        sandbox.progress("loading the baseline model")
        baseline = ServingModel(request.baseline_model, "--baseline-model", request.schema)
    log.info("model: %s (serving_default outputs %s)", candidate.path, ", ".join(candidate.output_keys))
    if baseline:
        log.info("baseline model: %s (serving_default outputs %s)", baseline.path, ", ".join(baseline.output_keys))
    else:
        log.info("no baseline model: change thresholds are skipped; the model is judged on its bounds only")
    key = candidate.output_key(config.prediction_key)
    base_key = baseline.output_key(config.prediction_key or (key if key in baseline.output_keys else None)) \
        if baseline else None
    slice_features = sorted({f for spec in config.slices for f in spec})
    problem, num_classes = None, 0
    evals: dict[str, eval_metrics.SlicedEvaluation] = {}
    seen = 0
    loop_started = last_log = time.monotonic()
    warned_range = set()
    for batch in dataset:
        sandbox.progress(f"serving batch {seen // request.batch_size + 1} (after {seen} examples)")
        serialized = batch.numpy().tolist()
        labels, labels_float, features = read_batch(serialized, config, slice_features, seen)
        raw = {"model": candidate.predict(batch, key)}
        if baseline:
            raw["baseline"] = baseline.predict(batch, base_key)
        if problem is None:
            problem, num_classes = infer_problem(config, raw["model"], labels_float, "--model")
            if baseline:
                base_problem = infer_problem(dataclasses.replace(config, problem=problem), raw["baseline"],
                                             labels_float, "--baseline-model")
                if base_problem != (problem, num_classes):
                    raise UserInputError("--baseline-model", f"the baseline is a {base_problem[0]} model with "
                                                             f"{base_problem[1]} classes; the model: {problem} with "
                                                             f"{num_classes}")
            evals = {name: eval_metrics.SlicedEvaluation(problem, num_classes, config.slices) for name in raw}
        label_values = label_array(labels, problem, num_classes, config, seen)
        keys = [eval_metrics.slice_keys(values, config.slices) for values in features]
        for name, out in raw.items():
            if problem != "regression" and not config.from_logits and name not in warned_range and (
                    out.min() < -1e-3 or out.max() > 1 + 1e-3):
                warned_range.add(name)
                log.warning("%s outputs values outside [0, 1] (%.3g..%.3g): if they are logits, set "
                            "eval_config.from_logits: true", name, out.min(), out.max())
            evals[name].add(label_values, predictions(out, problem, config.from_logits), keys)
        seen += len(serialized)
        if time.monotonic() - last_log >= PROGRESS_EVERY_S:
            last_log = time.monotonic()
            log.info("evaluated %d examples (%.0f/s)", seen, seen / (last_log - loop_started))
    if not seen:
        raise UserInputError("--examples", f"the eval split(s) {', '.join(request.eval_splits)} hold no examples")
    result = _result(request, problem, key, evals)
    result.seconds = time.monotonic() - started
    log.info("evaluated %d examples in %.1f s (%.1f s with loading): %s", seen, time.monotonic() - loop_started,
             result.seconds,
             " ".join(f"{k}={v:.4g}" for k, v in result.metrics.items() if v is not None))
    return result


def _result(request: EvaluateRequest, problem: str, key: str,
            evals: dict[str, eval_metrics.SlicedEvaluation]) -> EvaluateResult:
    config = request.eval_config
    names = config.metrics_for(problem)
    model, baseline = evals["model"], evals.get("baseline")
    metrics = model.overall.result(names)
    baseline_metrics = baseline.overall.result(names) if baseline else None
    slices = []
    for slice_key, acc in model.sorted_slices():
        base_acc = baseline.slices.get(slice_key) if baseline else None
        slices.append({"slice": eval_metrics.slice_name(slice_key), "features": dict(slice_key),
                       "metrics": acc.result(names), "baseline_metrics": base_acc.result(names) if base_acc else None})
    thresholds = eval_metrics.check_thresholds(config.thresholds, metrics, baseline_metrics)
    reasons = [row["message"] for row in thresholds if row["passed"] is False]
    if problem == "regression":
        classes: list[str] = []
    elif config.label_vocabulary:
        classes = list(config.label_vocabulary)
    else:
        classes = [str(i) for i in range(model.num_classes)]
    return EvaluateResult(
        blessed=not reasons, reasons=reasons, problem=problem, classes=classes, prediction_key=key, metrics=metrics,
        baseline_metrics=baseline_metrics, details=model.overall.details(),
        baseline_details=baseline.overall.details() if baseline else None, slices=slices, thresholds=thresholds)


def write_outputs(request: EvaluateRequest, result: EvaluateResult) -> None:
    """The metrics file, the report, then the blessing (last: a blessing means everything else is written)."""
    if request.metrics_file:
        storage.write_file_atomic(request.metrics_file, json.dumps(result.to_json(request), indent=2) + "\n")
        log.info("metrics: %s", request.metrics_file)
    if request.report_file:
        from generic_trainer import report

        report.write(request.report_file, render_report(request, result))
        log.info("report: %s", request.report_file)
    write_blessing(request.blessing_dir, result.blessed, result.reasons)


def kfp_metadata(request: EvaluateRequest, result: EvaluateResult) -> dict[str, dict[str, Any]]:
    """Metadata of each KFP output artifact of an evaluate run (TFX's blessing properties)."""
    scalars = {k: v for k, v in result.metrics.items() if v is not None}
    scalars.update({f"baseline_{k}": v for k, v in (result.baseline_metrics or {}).items() if v is not None})
    scalars["blessed"] = int(result.blessed)
    blessing = {"blessed": int(result.blessed), "current_model": request.model,
                "baseline_model": request.baseline_model or "", "reasons": "; ".join(result.reasons)}
    return {"evaluation": scalars, "blessing": blessing, "report": {"blessed": int(result.blessed)}}


# --------------------------------------------------------------------------------------------
# The HTML report
# --------------------------------------------------------------------------------------------


def confusion_matrix_chart(title: str, classes: Sequence[str], matrix: Sequence[Sequence[int]],
                           cell: int = 56) -> str:
    """An inline SVG heat map: rows are labels, columns predictions; shade = share of the row, text = count."""
    from generic_trainer.report import esc

    k = len(classes)
    left, top = 110, 64
    width, height = left + cell * k + 16, top + cell * k + 16
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             f'aria-label="{esc(title)}" font-size="11" font-family="sans-serif">',
             f'<text x="{width / 2:.0f}" y="14" text-anchor="middle" font-size="13" font-weight="bold">{esc(title)}'
             "</text>",
             f'<text x="{left + cell * k / 2:.0f}" y="32" text-anchor="middle">predicted</text>',
             f'<text x="12" y="{top + cell * k / 2:.0f}" text-anchor="middle" '
             f'transform="rotate(-90 12 {top + cell * k / 2:.0f})">label</text>']
    for j, name in enumerate(classes):
        parts.append(f'<text x="{left + cell * j + cell / 2:.0f}" y="{top - 8}" text-anchor="middle">'
                     f"{esc(name[:10])}</text>")
    for i, name in enumerate(classes):
        row_total = sum(matrix[i]) or 1
        y = top + cell * i
        parts.append(f'<text x="{left - 6}" y="{y + cell / 2 + 4:.0f}" text-anchor="end">{esc(name[:14])}</text>')
        for j in range(k):
            count = matrix[i][j]
            share = count / row_total
            shade = round(255 - share * 200)
            color = f"rgb({shade},{shade},255)" if i != j else f"rgb({shade},255,{shade})"
            parts.append(f'<rect x="{left + cell * j}" y="{y}" width="{cell}" height="{cell}" fill="{color}" '
                         f'stroke="#fff"><title>label {esc(name)}, predicted {esc(classes[j])}: {count} '
                         f"({share:.1%} of the label)</title></rect>"
                         f'<text x="{left + cell * j + cell / 2:.0f}" y="{y + cell / 2 + 4:.0f}" '
                         f'text-anchor="middle">{count}</text>')
    parts.append("</svg>")
    return f'<div class="chart">{"".join(parts)}</div>'


def _change(value: float | None, base: float | None) -> float | None:
    return value - base if value is not None and base is not None else None


def render_report(request: EvaluateRequest, result: EvaluateResult) -> str:
    """The evaluation report (KFP system.HTML): verdict, comparison, slices, confusion matrix, inputs."""
    from generic_trainer import report

    has_base = result.baseline_metrics is not None
    verdict = ("BLESSED" if result.blessed else "NOT_BLESSED")
    color = "#2ca02c" if result.blessed else "#d62728"
    checks = [(r["metric"], r["check"], r["bound"], r["value"], r["baseline"], r.get("change"),
               {True: "pass", False: "FAIL", None: "skipped (no baseline)"}[r["passed"]]) for r in result.thresholds]
    verdict_html = (f'<p style="font-size:18px;font-weight:bold;color:{color}">{verdict}</p>'
                    + "".join(f"<p>{report.esc(r)}</p>" for r in result.reasons)
                    + (report.table(checks, ("metric", "check", "bound", "model", "baseline", "change", "result"))
                       if checks else '<p class="note">No thresholds configured: the model is blessed.</p>'))
    names = list(result.metrics)
    comparison = report.table(
        [(n, result.metrics[n], *((result.baseline_metrics[n], _change(result.metrics[n], result.baseline_metrics[n]))
                                  if has_base else ())) for n in names],
        ("metric", "model", *(("baseline", "change") if has_base else ())))
    slice_header = ["slice"] + [h for n in names for h in ((n, f"{n} (baseline)") if has_base else (n,))]
    slice_rows = []
    for s in result.slices:
        row: list[Any] = [s["slice"]]
        for n in names:
            row.append(s["metrics"][n])
            if has_base:
                row.append((s["baseline_metrics"] or {}).get(n))
        slice_rows.append(row)
    slices = report.table(slice_rows, slice_header) if slice_rows else '<p class="note">No slices configured ' \
        '(eval_config.slices, e.g. [["island"]]).</p>'
    sections = [("Verdict", verdict_html),
                ("Comparison" if has_base else "Metrics (no baseline model)", comparison),
                ("Slices", slices)]
    if result.details:
        charts = [confusion_matrix_chart("model", result.classes, result.details["confusion_matrix"])]
        if result.baseline_details:
            charts.append(confusion_matrix_chart("baseline", result.classes,
                                                 result.baseline_details["confusion_matrix"]))
        counts = [(c, result.details["label_counts"][i], result.details["prediction_counts"][i],
                   *((result.baseline_details["prediction_counts"][i],) if result.baseline_details else ()))
                  for i, c in enumerate(result.classes)]
        sections.append(("Confusion matrix", f'<div class="charts">{"".join(charts)}</div>'))
        sections.append(("Per-class counts", report.table(counts, ("class", "labels", "predicted by model",
                                                                   *(("predicted by baseline",) if has_base else ())))))
    inputs = {"model": request.model, "baseline model": request.baseline_model, "examples": request.examples,
              "splits": ", ".join(request.eval_splits), "problem": result.problem,
              "prediction key": result.prediction_key, "eval config": request.eval_config.to_json(),
              "seconds": round(result.seconds, 1) if math.isfinite(result.seconds) else None}
    sections.append(("Inputs", report.key_value_table(inputs)))
    count = result.metrics.get("example_count")
    return report.page("generic-trainer: model evaluation", sections,
                       subtitle=f"{verdict} · {int(count or 0)} examples · {result.problem}")
