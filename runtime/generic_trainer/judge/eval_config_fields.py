"""Reading the short form's fields (eval_config.py): numbers, names, thresholds and slices.

Every error is a UserInputError naming the key (`eval_config.thresholds.auc`); no TensorFlow here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from generic_trainer.errors import UserInputError
from generic_trainer.judge.eval_config import (
    DIRECTIONS,
    INPUT,
    LOWER_IS_BETTER,
    SliceSpec,
    SliceThreshold,
    Threshold,
)


def number(key: str, value: Any) -> float:
    """A finite number (bools refused), or a UserInputError naming `eval_config.<key>`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UserInputError(f"eval_config.{key}", f"expected a finite number, got {value!r}")
    return float(value)


def string(key: str, value: Any) -> str:
    """A non-empty string (a feature name), or a UserInputError naming `eval_config.<key>`."""
    if value is None:
        raise UserInputError(f"eval_config.{key}", "required (a feature name of the examples)")
    if not isinstance(value, str) or not value.strip():
        raise UserInputError(f"eval_config.{key}", f"expected a non-empty string, got {value!r}")
    return value


def unknown_keys(key: str, given: Mapping[str, Any], known: tuple[str, ...]) -> None:
    """Refuse keys of `given` that are not `known`, naming them and the known ones."""
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise UserInputError(
            f"eval_config.{key}" if key else INPUT,
            f"unknown keys {unknown}; expected some of {', '.join(known)}",
        )


def _optional(key: str, spec: Mapping[str, Any], name: str) -> float | None:
    return number(f"{key}.{name}", spec[name]) if spec.get(name) is not None else None


def _change(key: str, metric: str, change: Any) -> tuple[str, float | None, float | None]:
    """(direction, absolute, relative) of a threshold's `change`."""
    if not isinstance(change, Mapping):
        raise UserInputError(
            f"eval_config.{key}.change",
            'expected an object like {"direction": "higher_is_better", "absolute": -0.01}',
        )
    unknown_keys(f"{key}.change", change, ("direction", "absolute", "relative"))
    direction = change.get("direction") or (
        "lower_is_better" if metric in LOWER_IS_BETTER else "higher_is_better"
    )
    if direction not in DIRECTIONS:
        raise UserInputError(
            f"eval_config.{key}.change.direction",
            f"expected one of {', '.join(DIRECTIONS)}, got {direction!r}",
        )
    absolute = _optional(f"{key}.change", change, "absolute")
    relative = _optional(f"{key}.change", change, "relative")
    if absolute is None and relative is None:
        raise UserInputError(f"eval_config.{key}.change", "expected 'absolute' and/or 'relative'")
    return direction, absolute, relative


def threshold(key: str, metric: str, spec: Any) -> Threshold:
    """The Threshold of `metric` from `{"lower_bound": ..., "upper_bound": ..., "change": ...}`."""
    if not isinstance(spec, Mapping):
        raise UserInputError(
            f"eval_config.{key}",
            'expected an object like {"lower_bound": 0.8, '
            '"change": {"direction": "higher_is_better", "absolute": -0.01}}',
        )
    unknown_keys(key, spec, ("lower_bound", "upper_bound", "change"))
    lower = _optional(key, spec, "lower_bound")
    upper = _optional(key, spec, "upper_bound")
    if lower is not None and upper is not None and lower > upper:
        raise UserInputError(
            f"eval_config.{key}", f"lower_bound {lower} is above upper_bound {upper}"
        )
    direction = absolute = relative = None
    if spec.get("change") is not None:
        direction, absolute, relative = _change(key, metric, spec["change"])
    if lower is None and upper is None and direction is None:
        raise UserInputError(
            f"eval_config.{key}", "expected lower_bound, upper_bound and/or change"
        )
    return Threshold(metric, lower, upper, direction, absolute, relative)


def thresholds(key: str, value: Any, known: set[str]) -> list[Threshold]:
    """The thresholds of `{"accuracy": {...}, ...}`, each metric one of `known`."""
    if not isinstance(value, Mapping):
        raise UserInputError(
            f"eval_config.{key}", 'expected an object like {"accuracy": {"lower_bound": 0.8}}'
        )
    out = []
    for metric, spec in value.items():
        if metric not in known:
            raise UserInputError(
                f"eval_config.{key}.{metric}", f"unknown metric; known: {', '.join(sorted(known))}"
            )
        out.append(threshold(f"{key}.{metric}", metric, spec))
    return out


def value_text(key: str, value: Any) -> str:
    """A slice value as slices name it: strings as they are, integers in decimal, floats as %g."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return f"{value:g}"
    raise UserInputError(
        f"eval_config.{key}", f"expected a feature value (a string or number), got {value!r}"
    )


def slice_spec(key: str, spec: Any) -> SliceSpec:
    """A SliceSpec from `["island", "sex"]`, `"island"` or `{"features": [...], "values": {"island":
    "Biscoe"}}`."""
    features: Any = spec
    values: Any = {}
    if isinstance(spec, str):  # "island" as a shorthand for ["island"]
        features = [spec]
    elif isinstance(spec, Mapping):
        unknown_keys(key, spec, ("features", "values"))
        features, values = spec.get("features") or [], spec.get("values") or {}
        if not isinstance(values, Mapping):
            raise UserInputError(
                f"eval_config.{key}.values",
                f'expected an object like {{"island": "Biscoe"}}, got {values!r}',
            )
    if not isinstance(features, list) or not all(isinstance(f, str) and f for f in features):
        raise UserInputError(
            f"eval_config.{key}",
            f"expected a list of feature names or an object like "
            f'{{"features": ["sex"], "values": {{"island": "Biscoe"}}}}, '
            f"got {spec!r}",
        )
    fixed = tuple((str(f), value_text(f"{key}.values.{f}", v)) for f, v in values.items())
    columns = [f for f, _ in fixed] + features
    if len(set(columns)) != len(columns):
        raise UserInputError(f"eval_config.{key}", f"names a feature twice: {spec!r}")
    return SliceSpec(tuple(features), fixed)


def slices(value: Any) -> list[SliceSpec]:
    """The slicing specs of the short form's `slices` (duplicates and the overall one dropped)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise UserInputError(
            "eval_config.slices",
            f'expected a list of feature lists like [["island"]], got {value!r}',
        )
    slices: list[SliceSpec] = []
    for i, spec in enumerate(value):
        parsed = slice_spec(f"slices[{i}]", spec)
        if parsed.columns and parsed not in slices:
            slices.append(parsed)
    return slices


def slice_thresholds(value: Any, known: set[str]) -> list[SliceThreshold]:
    """The short form's `slice_thresholds`: each threshold with the slices it judges."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise UserInputError(
            "eval_config.slice_thresholds",
            'expected a list like [{"slice": ["island"], '
            '"thresholds": {"accuracy": {"lower_bound": 0.7}}}]',
        )
    out = []
    for i, entry in enumerate(value):
        key = f"slice_thresholds[{i}]"
        if not isinstance(entry, Mapping) or "slice" not in entry or "thresholds" not in entry:
            raise UserInputError(
                f"eval_config.{key}", 'expected an object with "slice" and "thresholds"'
            )
        unknown_keys(key, entry, ("slice", "thresholds"))
        spec = slice_spec(f"{key}.slice", entry["slice"])
        out += [
            SliceThreshold(spec, t)
            for t in thresholds(f"{key}.thresholds", entry["thresholds"], known)
        ]
    return out
