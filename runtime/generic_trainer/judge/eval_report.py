"""The evaluator's HTML report (KFP system.HTML): the verdict and every threshold check (with its slice), the
metrics of the model and baseline with their bootstrap confidence intervals when computed, the slices, the
confusion matrices and the inputs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any


def confusion_matrix_chart(
    title: str, classes: Sequence[str], matrix: Sequence[Sequence[int]], cell: int = 56
) -> str:
    """An inline SVG heat map: rows are labels, columns predictions; shade = share of the row, text = count."""
    from generic_trainer.artifacts.report import esc

    k = len(classes)
    left, top = 110, 64
    width, height = left + cell * k + 16, top + cell * k + 16
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="{esc(title)}" font-size="11" font-family="sans-serif">',
        f'<text x="{width / 2:.0f}" y="14" text-anchor="middle" font-size="13" font-weight="bold">{esc(title)}'
        "</text>",
        f'<text x="{left + cell * k / 2:.0f}" y="32" text-anchor="middle">predicted</text>',
        f'<text x="12" y="{top + cell * k / 2:.0f}" text-anchor="middle" '
        f'transform="rotate(-90 12 {top + cell * k / 2:.0f})">label</text>',
    ]
    for j, name in enumerate(classes):
        parts.append(
            f'<text x="{left + cell * j + cell / 2:.0f}" y="{top - 8}" text-anchor="middle">'
            f"{esc(name[:10])}</text>"
        )
    for i, name in enumerate(classes):
        row_total = sum(matrix[i]) or 1
        y = top + cell * i
        parts.append(
            f'<text x="{left - 6}" y="{y + cell / 2 + 4:.0f}" text-anchor="end">{esc(name[:14])}</text>'
        )
        for j in range(k):
            count = matrix[i][j]
            share = count / row_total
            shade = round(255 - share * 200)
            color = f"rgb({shade},{shade},255)" if i != j else f"rgb({shade},255,{shade})"
            parts.append(
                f'<rect x="{left + cell * j}" y="{y}" width="{cell}" height="{cell}" fill="{color}" '
                f'stroke="#fff"><title>label {esc(name)}, predicted {esc(classes[j])}: {count} '
                f"({share:.1%} of the label)</title></rect>"
                f'<text x="{left + cell * j + cell / 2:.0f}" y="{y + cell / 2 + 4:.0f}" '
                f'text-anchor="middle">{count}</text>'
            )
    parts.append("</svg>")
    return f'<div class="chart">{"".join(parts)}</div>'


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
            r.get("slice", "Overall"),
            r["metric"],
            r["check"],
            r["bound"],
            r["value"],
            r["baseline"],
            r.get("change"),
            {True: "pass", False: "FAIL", None: "skipped (no baseline)"}[r["passed"]],
        )
        for r in result.thresholds
    ]
    verdict_html = (
        f'<p style="font-size:18px;font-weight:bold;color:{color}">{verdict}</p>'
        + "".join(f"<p>{report.esc(r)}</p>" for r in result.reasons)
        + (
            report.table(
                checks,
                ("slice", "metric", "check", "bound", "model", "baseline", "change", "result"),
            )
            if checks
            else '<p class="note">No thresholds configured: the model is blessed.</p>'
        )
    )
    names = list(result.metrics)
    level = f"{request.eval_config.ci_level:.0%} interval"
    comparison = report.table(
        [
            (
                n,
                result.metrics[n],
                *((ci_text((intervals or {}).get(n)),) if intervals else ()),
                *(
                    (
                        result.baseline_metrics[n],
                        _change(result.metrics[n], result.baseline_metrics[n]),
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
            *(
                (f"model {level} ({request.eval_config.ci_samples} bootstrap samples)",)
                if intervals
                else ()
            ),
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
            row.append(_with_ci(s["metrics"][n], s.get("confidence_intervals"), n))
            if has_base:
                row.append((s["baseline_metrics"] or {}).get(n))
        slice_rows.append(row)
    slices = (
        report.table(slice_rows, slice_header)
        if slice_rows
        else '<p class="note">No slices configured (eval_config.slices, e.g. [["island"]]).</p>'
    )
    if slice_rows and intervals:
        slices += f'<p class="note">[lower, upper]: the {level} from the bootstrap samples.</p>'
    sections = [
        ("Verdict", verdict_html),
        ("Comparison" if has_base else "Metrics (no baseline model)", comparison),
        ("Slices", slices),
    ]
    if result.details:
        charts = [
            confusion_matrix_chart("model", result.classes, result.details["confusion_matrix"])
        ]
        if result.baseline_details:
            charts.append(
                confusion_matrix_chart(
                    "baseline", result.classes, result.baseline_details["confusion_matrix"]
                )
            )
        counts = [
            (
                c,
                result.details["label_counts"][i],
                result.details["prediction_counts"][i],
                *(
                    (result.baseline_details["prediction_counts"][i],)
                    if result.baseline_details
                    else ()
                ),
            )
            for i, c in enumerate(result.classes)
        ]
        sections.append(("Confusion matrix", f'<div class="charts">{"".join(charts)}</div>'))
        sections.append(
            (
                "Per-class counts",
                report.table(
                    counts,
                    (
                        "class",
                        "labels",
                        "predicted by model",
                        *(("predicted by baseline",) if has_base else ()),
                    ),
                ),
            )
        )
    inputs = {
        "model": request.model,
        "baseline model": request.baseline_model,
        "examples": request.examples,
        "splits": ", ".join(request.eval_splits),
        "problem": result.problem,
        "prediction key": result.prediction_key,
        "eval config": request.eval_config.to_json(),
        "seconds": round(result.seconds, 1) if math.isfinite(result.seconds) else None,
    }
    sections.append(("Inputs", report.key_value_table(inputs)))
    count = result.metrics.get("example_count")
    return report.page(
        "generic-trainer: model evaluation",
        sections,
        subtitle=f"{verdict} · {int(count or 0)} examples · {result.problem}",
    )
