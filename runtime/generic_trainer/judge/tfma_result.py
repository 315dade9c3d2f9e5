"""What TFMA wrote, as the evaluation's result: the verdict, the metrics overall and per slice.

Read from TFMA's output dir with TFMA's own readers (`tfma.load_metrics`, `load_validation_result`):
the candidate's and the baseline's values per slice, their confidence intervals when TFMA computed
them, and the validation result's failures (the reasons a model is NOT_BLESSED). A metric's name is
TFMA's, qualified only where two keys would share it (`precision[classId:1]`, `loss[unweighted]`).
NaN (a metric without data in a slice) is None.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

OVERALL = "Overall"


def _number(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def slice_name(slice_key: Any) -> str:
    """`island:Biscoe` (TFMA's stringified key); `Overall` for the whole data."""
    from tensorflow_model_analysis import slicer

    key = slicer.deserialize_slice_key(slice_key)
    return slicer.stringify_slice_key(key) if key else OVERALL


def _qualifiers(key: Any) -> list[str]:
    """What tells this key apart from another of the same name."""
    out = []
    if key.HasField("sub_key"):
        sub = key.sub_key
        for field in ("class_id", "k", "top_k"):
            if sub.HasField(field):
                out.append(f"{field}:{getattr(sub, field).value}")
    if key.HasField("aggregation_type"):
        agg = key.aggregation_type
        out += [
            f
            for f in ("micro_average", "macro_average", "weighted_macro_average")
            if getattr(agg, f)
        ]
    if key.HasField("example_weighted") and not key.example_weighted.value:
        out.append("unweighted")
    return out


def metric_names(keys: Iterable[Any]) -> dict[bytes, str]:
    """Each key (serialized) -> its display name: the plain name unless another key shares it."""
    unique = {key.SerializeToString(deterministic=True): key for key in keys}
    by_name: dict[str, list[Any]] = {}
    for key in unique.values():
        by_name.setdefault(key.name, []).append(key)
    names = {}
    for name, group in by_name.items():
        for key in group:
            quals = _qualifiers(key) if len(group) > 1 else []
            names[key.SerializeToString(deterministic=True)] = (
                f"{name}[{','.join(quals)}]" if quals else name
            )
    return names


def _value(entry: Any) -> tuple[float | None, dict[str, float | None] | None]:
    """(the value, its confidence interval or None) of a MetricKeyAndValue; None if not a number."""
    value = entry.value
    number = _number(value.double_value.value) if value.HasField("double_value") else None
    interval = None
    if entry.HasField("confidence_interval"):
        ci = entry.confidence_interval
        interval = {
            "lower": _number(ci.lower_bound.double_value.value),
            "upper": _number(ci.upper_bound.double_value.value),
        }
    return number, interval


def _plain_key(key: Any) -> Any:
    """The key without its model name (one name per metric across models)."""
    plain = type(key)()
    plain.CopyFrom(key)
    plain.ClearField("model_name")
    return plain


def read_slices(output_path: str, candidate: str, baseline: str | None) -> list[dict[str, Any]]:
    """Per slice (Overall first): metrics, baseline_metrics, confidence_intervals (candidate)."""
    import tensorflow_model_analysis as tfma

    records = list(tfma.load_metrics(output_path))
    keys = [
        _plain_key(e.key)
        for r in records
        for e in r.metric_keys_and_values
        if not e.key.is_diff and e.key.model_name in (candidate, baseline)
    ]
    names = metric_names(keys)
    slices = []
    for record in records:
        row: dict[str, Any] = {"slice": slice_name(record.slice_key), "metrics": {}}
        base: dict[str, Any] = {}
        intervals: dict[str, Any] = {}
        for entry in record.metric_keys_and_values:
            if entry.key.is_diff:
                continue
            plain = _plain_key(entry.key).SerializeToString(deterministic=True)
            if plain not in names:
                continue
            value, interval = _value(entry)
            if entry.key.model_name == candidate:
                row["metrics"][names[plain]] = value
                if interval:
                    intervals[names[plain]] = interval
            elif entry.key.model_name == baseline:
                base[names[plain]] = value
        row["baseline_metrics"] = base if baseline is not None else None
        row["confidence_intervals"] = intervals or None
        slices.append(row)
    slices.sort(key=lambda r: (r["slice"] != OVERALL, r["slice"]))
    return slices


def failures(output_path: str) -> tuple[bool, list[str], set[tuple[str, str, bool]]]:
    """(TFMA's validation_ok, a reason per failed threshold or missing slice, the failed
    (slice, metric name, is_diff) triples)."""
    import tensorflow_model_analysis as tfma
    from google.protobuf import text_format

    result = tfma.load_validation_result(output_path)
    reasons, failed = [], set()
    for per_slice in result.metric_validations_per_slice:
        where = slice_name(per_slice.slice_key)
        for failure in per_slice.failures:
            key = failure.metric_key
            failed.add((where, key.name, key.is_diff))
            model = f" of {key.model_name}" if key.model_name else ""
            what = f"{'change of ' if key.is_diff else ''}{key.name}{model}"
            threshold = text_format.MessageToString(failure.metric_threshold, as_one_line=True)
            value = text_format.MessageToString(failure.metric_value, as_one_line=True)
            reasons.append(f"{where}: {what} = {value} fails {threshold}".strip())
    for missing in result.missing_slices:
        spec = text_format.MessageToString(missing, as_one_line=True) or "overall"
        reasons.append(f"slice {{{spec}}} has no examples: its thresholds cannot pass")
    if not result.validation_ok and not reasons:
        reasons.append("TFMA's validation failed: " + text_format.MessageToString(result))
    return result.validation_ok, reasons, failed


def _bound(threshold: Any) -> tuple[str, str]:
    """(check, bound) words of a GenericValueThreshold or GenericChangeThreshold."""
    from google.protobuf import json_format

    check = "change" if "Change" in type(threshold).__name__ else "value"
    return check, json.dumps(json_format.MessageToDict(threshold))


def threshold_rows(
    config: Any, candidate: str, slices: list[dict[str, Any]], failed: set[tuple[str, str, bool]]
) -> list[dict[str, Any]]:
    """A row per threshold of the candidate (overall, or per slice spec): the check, its verdict."""
    from google.protobuf import text_format
    from tensorflow_model_analysis import metrics

    overall = slices[0]["metrics"] if slices and slices[0]["slice"] == OVERALL else {}
    rows = []
    specs = metrics.metric_thresholds_from_metrics_specs(config.metrics_specs, eval_config=config)
    for key, entries in specs.items():
        if key.model_name not in ("", candidate):
            continue
        for slice_spec, threshold in entries:
            spec_text = (
                text_format.MessageToString(slice_spec, as_one_line=True) if slice_spec else ""
            )
            where = f"{{{spec_text}}}" if spec_text else OVERALL
            wrong = [f for f in failed if f[1] == key.name and f[2] == key.is_diff]
            passed = not [f for f in wrong if (f[0] == OVERALL) == (where == OVERALL)]
            check, bound = _bound(threshold)
            value = overall.get(key.name) if where == OVERALL else None
            rows.append(
                {
                    "slice": where,
                    "metric": key.name,
                    "check": check,
                    "bound": bound,
                    "value": value,
                    "passed": passed,
                    "message": f"{where}: {check} of {key.name} {bound}",
                }
            )
    return rows
