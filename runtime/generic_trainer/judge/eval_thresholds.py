"""The evaluator's threshold checks: each bound of each threshold, on the overall metrics and on every slice a
slice threshold's spec matches (numpy-free, no TensorFlow).

A row per bound: slice, metric, check (lower_bound, upper_bound, change.absolute, change.relative), bound,
value, baseline, direction, change, passed and a message (a NOT_BLESSED reason when it failed; slice
thresholds name their slice: `slice island=Biscoe: accuracy 0.61 < lower bound 0.7`). `passed` is None for
a change bound without a baseline model (skipped). A slice threshold whose spec matches no slice of the
eval split fails: a bound that cannot be checked is not met.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

OVERALL = "Overall"

Metrics = Mapping[str, float | None]


def _checks(t: Any) -> list[tuple[str, float]]:
    checks: list[tuple[str, float]] = []
    if t.lower_bound is not None:
        checks.append(("lower_bound", t.lower_bound))
    if t.upper_bound is not None:
        checks.append(("upper_bound", t.upper_bound))
    if t.change_absolute is not None:
        checks.append(("change.absolute", t.change_absolute))
    if t.change_relative is not None:
        checks.append(("change.relative", t.change_relative))
    return checks


def _outcome(
    t: Any, check: str, bound: float, value: float | None, base: float | None, has_baseline: bool
) -> dict[str, Any]:
    if check.startswith("change") and not has_baseline:
        return {"passed": None, "message": f"{t.metric} {check}: skipped, no baseline model"}
    if value is None or (check.startswith("change") and base is None):
        return {
            "passed": False,
            "message": f"{t.metric} is undefined on this data, so {check} {bound:g} cannot be met",
        }
    if check == "lower_bound":
        return {
            "passed": value >= bound,
            "message": f"{t.metric} {value:.4g} {'>=' if value >= bound else '<'} lower bound {bound:g}",
        }
    if check == "upper_bound":
        return {
            "passed": value <= bound,
            "message": f"{t.metric} {value:.4g} {'<=' if value <= bound else '>'} upper bound {bound:g}",
        }
    assert base is not None
    diff = value - base
    if check == "change.absolute":
        change = diff
        change_text, bound_text = f"{change:+.4g}", f"{bound:+g}"
    else:
        change = diff / abs(base) if base else (0.0 if diff == 0 else math.copysign(math.inf, diff))
        change_text, bound_text = f"{change:+.2%} (relative)", f"{bound:+.2%}"
    higher = t.direction == "higher_is_better"
    return {
        "change": change,
        "passed": change >= bound if higher else change <= bound,
        "message": f"{t.metric} changed by {change_text} vs baseline ({value:.4g} vs {base:.4g}); "
        f"{t.direction.replace('_', ' ')} needs {'>=' if higher else '<='} {bound_text}",
    }


def check_thresholds(
    thresholds: Sequence[Any],
    candidate: Metrics,
    baseline: Metrics | None,
    slice_name: str = OVERALL,
) -> list[dict[str, Any]]:
    """One row per bound of each threshold (eval_config.Threshold) on one slice's metrics (module docstring)."""
    rows = []
    for t in thresholds:
        value = candidate.get(t.metric)
        base = baseline.get(t.metric) if baseline is not None else None
        for check, bound in _checks(t):
            row: dict[str, Any] = {
                "slice": slice_name,
                "metric": t.metric,
                "check": check,
                "bound": bound,
                "value": value,
                "baseline": base,
                "direction": t.direction,
            }
            row.update(_outcome(t, check, bound, value, base, baseline is not None))
            if slice_name != OVERALL:
                row["message"] = f"slice {slice_name}: {row['message']}"
            rows.append(row)
    return rows


def check_slice_thresholds(
    slice_thresholds: Sequence[Any],
    overall: Metrics,
    overall_baseline: Metrics | None,
    slices: Sequence[Mapping[str, Any]],
    has_baseline: bool,
) -> list[dict[str, Any]]:
    """Rows for each slice threshold (eval_config.SliceThreshold) on every slice its spec matches.

    `slices` are the evaluation's slice rows: {"slice", "features" ({feature: value}), "metrics",
    "baseline_metrics"}.
    """
    rows = []
    for st in slice_thresholds:
        if not st.slice.columns:  # the empty spec: the overall
            rows += check_thresholds([st.threshold], overall, overall_baseline)
            continue
        matched = [s for s in slices if st.slice.matches(tuple(s["features"].items()))]
        for s in matched:
            base = (s["baseline_metrics"] or {}) if has_baseline else None
            rows += check_thresholds([st.threshold], s["metrics"], base, s["slice"])
        if not matched:
            t = st.threshold
            rows.append(
                {
                    "slice": st.slice.describe(),
                    "metric": t.metric,
                    "check": "slice",
                    "bound": None,
                    "value": None,
                    "baseline": None,
                    "direction": t.direction,
                    "passed": False,
                    "message": f"slice {st.slice.describe()}: no eval example is in this slice, so the "
                    f"{t.metric} threshold cannot be checked",
                }
            )
    return rows
