"""The evaluator's HTML report (KFP system.HTML), derived from TFMA's result: the verdict and every
threshold check (with its slice), the metrics of the model and baseline with TFMA's confidence
intervals when computed, the slices and the inputs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

CI_LEVEL = "confidence interval (TFMA)"


def _change(value: float | None, base: float | None) -> float | None:
    return value - base if value is not None and base is not None else None


def ci_text(interval: Mapping[str, float] | None) -> str:
    """`[0.81, 0.93]` for a bootstrap interval; empty when there is none."""
    from generic_trainer.artifacts.report import fmt

    return f"[{fmt(interval['lower'])}, {fmt(interval['upper'])}]" if interval else ""


def _with_ci(value: Any, intervals: Mapping[str, Any] | None, name: str) -> Any:
    if not intervals or not intervals.get(name) or value is None:
        return value
    from generic_trainer.artifacts.report import fmt

    return f"{fmt(value)} {ci_text(intervals[name])}"


def _verdict(result: Any) -> str:
    """The verdict, its reasons and every threshold check."""
    from generic_trainer.artifacts import report

    verdict = "BLESSED" if result.blessed else "NOT_BLESSED"
    color = "#2ca02c" if result.blessed else "#d62728"
    checks = [
        (
            r["slice"],
            r["metric"],
            r["check"],
            r["bound"],
            r["value"],
            "pass" if r["passed"] else "FAIL",
        )
        for r in result.thresholds
    ]
    table = (
        report.table(checks, ("slice", "metric", "check", "bound", "model", "result"))
        if checks
        else '<p class="note">No thresholds configured: nothing failed, so BLESSED '
        "(TFX's Evaluator writes no blessing then).</p>"
    )
    reasons = "".join(f"<p>{report.esc(r)}</p>" for r in result.reasons)
    return f'<p style="font-size:18px;font-weight:bold;color:{color}">{verdict}</p>{reasons}{table}'


def _comparison(result: Any) -> str:
    """The overall metrics: the model's (with its intervals), the baseline's and the change."""
    from generic_trainer.artifacts import report

    base, intervals = result.baseline_metrics, result.confidence_intervals
    rows = []
    for name, value in result.metrics.items():
        row: list[Any] = [name, value]
        if intervals:
            row.append(ci_text(intervals.get(name)))
        if base is not None:
            row += [base.get(name), _change(value, base.get(name))]
        rows.append(row)
    header = ["metric", "model"] + ([f"model {CI_LEVEL}"] if intervals else [])
    header += ["baseline", "change"] if base is not None else []
    return report.table(rows, header)


def _slices(result: Any) -> str:
    """Every slice's metrics (and the baseline's)."""
    from generic_trainer.artifacts import report

    has_base = result.baseline_metrics is not None
    names = list(result.metrics)
    header = ["slice"] + [h for n in names for h in ((n, f"{n} (baseline)") if has_base else (n,))]
    rows = []
    for s in result.slices:
        row: list[Any] = [s["slice"]]
        for n in names:
            row.append(_with_ci(s["metrics"].get(n), s.get("confidence_intervals"), n))
            if has_base:
                row.append((s["baseline_metrics"] or {}).get(n))
        rows.append(row)
    if not rows:
        return '<p class="note">No slices beyond the overall one.</p>'
    return report.table(rows, header)


def _inputs(request: Any, result: Any) -> dict[str, Any]:
    return {
        "model": request.model,
        "baseline model": request.baseline_model,
        "examples": request.examples,
        "splits": ", ".join(request.eval_splits),
        "problem": result.problem or None,
        "evaluation (TFMA's output)": request.evaluation_dir,
        "eval config (TFMA, as run)": result.tfma_eval_config,
        "seconds": round(result.seconds, 1) if math.isfinite(result.seconds) else None,
    }


def render(request: Any, result: Any) -> str:
    """The evaluation report of an evaluate.EvaluateRequest and its EvaluateResult.

    Args:
      request: the evaluate request.
      result: its EvaluateResult.

    Returns:
      The HTML page.
    """
    from generic_trainer.artifacts import report

    has_base = result.baseline_metrics is not None
    sections = [
        ("Verdict", _verdict(result)),
        ("Comparison" if has_base else "Metrics (no baseline model)", _comparison(result)),
        ("Slices", _slices(result)),
        ("Inputs", report.key_value_table(_inputs(request, result))),
    ]
    verdict = "BLESSED" if result.blessed else "NOT_BLESSED"
    count = result.metrics.get("example_count")
    return report.page(
        "generic-trainer: model evaluation",
        sections,
        subtitle=f"{verdict} · {int(count or 0)} examples"
        + (f" · {result.problem}" if result.problem else ""),
    )
