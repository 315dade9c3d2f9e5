"""The evaluator's HTML report (KFP system.HTML), derived from TFMA's result: the verdict and every
threshold check (with its slice), the metrics of the model and baseline with TFMA's confidence
intervals when computed, the slices and the inputs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


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


def render(request: Any, result: Any) -> str:
    """The evaluation report of an evaluate.EvaluateRequest and its EvaluateResult."""
    from generic_trainer.artifacts import report

    has_base = result.baseline_metrics is not None
    intervals = result.confidence_intervals
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
    verdict_html = (
        f'<p style="font-size:18px;font-weight:bold;color:{color}">{verdict}</p>'
        + "".join(f"<p>{report.esc(r)}</p>" for r in result.reasons)
        + (
            report.table(
                checks,
                ("slice", "metric", "check", "bound", "model", "result"),
            )
            if checks
            else '<p class="note">No thresholds configured: nothing failed, so BLESSED '
            "(TFX's Evaluator writes no blessing then).</p>"
        )
    )
    names = list(result.metrics)
    level = "confidence interval (TFMA)"
    comparison = report.table(
        [
            (
                n,
                result.metrics[n],
                *((ci_text((intervals or {}).get(n)),) if intervals else ()),
                *(
                    (
                        result.baseline_metrics.get(n),
                        _change(result.metrics[n], result.baseline_metrics.get(n)),
                    )
                    if has_base
                    else ()
                ),
            )
            for n in names
        ],
        (
            "metric",
            "model",
            *((f"model {level}",) if intervals else ()),
            *(("baseline", "change") if has_base else ()),
        ),
    )
    slice_header = ["slice"] + [
        h for n in names for h in ((n, f"{n} (baseline)") if has_base else (n,))
    ]
    slice_rows = []
    for s in result.slices:
        row: list[Any] = [s["slice"]]
        for n in names:
            row.append(_with_ci(s["metrics"].get(n), s.get("confidence_intervals"), n))
            if has_base:
                row.append((s["baseline_metrics"] or {}).get(n))
        slice_rows.append(row)
    slices = (
        report.table(slice_rows, slice_header)
        if slice_rows
        else '<p class="note">No slices beyond the overall one.</p>'
    )
    sections = [
        ("Verdict", verdict_html),
        ("Comparison" if has_base else "Metrics (no baseline model)", comparison),
        ("Slices", slices),
    ]
    inputs = {
        "model": request.model,
        "baseline model": request.baseline_model,
        "examples": request.examples,
        "splits": ", ".join(request.eval_splits),
        "problem": result.problem or None,
        "evaluation (TFMA's output)": request.evaluation_dir,
        "eval config (TFMA, as run)": result.tfma_eval_config,
        "seconds": round(result.seconds, 1) if math.isfinite(result.seconds) else None,
    }
    sections.append(("Inputs", report.key_value_table(inputs)))
    count = result.metrics.get("example_count")
    return report.page(
        "generic-trainer: model evaluation",
        sections,
        subtitle=f"{verdict} · {int(count or 0)} examples"
        + (f" · {result.problem}" if result.problem else ""),
    )
