"""Reading `--eval-config` (a JSON object, a file, or a gs:// file) into an
`eval_config.EvalConfig`.

Every error is a UserInputError naming the key (`eval_config.thresholds.auc`); no TensorFlow here.
The format is described in eval_config.py.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from typing import Any

from generic_trainer.artifacts import bounded_parse
from generic_trainer.errors import UserInputError
from generic_trainer.judge.eval_config import (
    BUILTIN_METRICS,
    DIRECTIONS,
    INPUT,
    KNOWN_KEYS,
    LOWER_IS_BETTER,
    MAX_CI_SAMPLES,
    PROBLEMS,
    CustomMetric,
    EvalConfig,
    SliceSpec,
    SliceThreshold,
    Threshold,
)

_CLASS_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")
_NAME = re.compile(r"^[A-Za-z_][\w-]*$")


def _number(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UserInputError(f"eval_config.{key}", f"expected a finite number, got {value!r}")
    return float(value)


def _string(key: str, value: Any) -> str:
    if value is None:
        raise UserInputError(f"eval_config.{key}", "required (a feature name of the examples)")
    if not isinstance(value, str) or not value.strip():
        raise UserInputError(f"eval_config.{key}", f"expected a non-empty string, got {value!r}")
    return value


def _unknown(key: str, given: Mapping[str, Any], known: tuple[str, ...]) -> None:
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise UserInputError(
            f"eval_config.{key}" if key else INPUT,
            f"unknown keys {unknown}; expected some of {', '.join(known)}",
        )


def _threshold(key: str, metric: str, spec: Any) -> Threshold:
    if not isinstance(spec, Mapping):
        raise UserInputError(
            f"eval_config.{key}",
            'expected an object like {"lower_bound": 0.8, '
            '"change": {"direction": "higher_is_better", "absolute": -0.01}}',
        )
    _unknown(key, spec, ("lower_bound", "upper_bound", "change"))
    lower = (
        _number(f"{key}.lower_bound", spec["lower_bound"])
        if spec.get("lower_bound") is not None
        else None
    )
    upper = (
        _number(f"{key}.upper_bound", spec["upper_bound"])
        if spec.get("upper_bound") is not None
        else None
    )
    if lower is not None and upper is not None and lower > upper:
        raise UserInputError(
            f"eval_config.{key}", f"lower_bound {lower} is above upper_bound {upper}"
        )
    change = spec.get("change")
    direction = absolute = relative = None
    if change is not None:
        if not isinstance(change, Mapping):
            raise UserInputError(
                f"eval_config.{key}.change",
                'expected an object like {"direction": "higher_is_better", "absolute": -0.01}',
            )
        _unknown(f"{key}.change", change, ("direction", "absolute", "relative"))
        direction = change.get("direction") or (
            "lower_is_better" if metric in LOWER_IS_BETTER else "higher_is_better"
        )
        if direction not in DIRECTIONS:
            raise UserInputError(
                f"eval_config.{key}.change.direction",
                f"expected one of {', '.join(DIRECTIONS)}, got {direction!r}",
            )
        if change.get("absolute") is not None:
            absolute = _number(f"{key}.change.absolute", change["absolute"])
        if change.get("relative") is not None:
            relative = _number(f"{key}.change.relative", change["relative"])
        if absolute is None and relative is None:
            raise UserInputError(
                f"eval_config.{key}.change", "expected 'absolute' and/or 'relative'"
            )
    if lower is None and upper is None and direction is None:
        raise UserInputError(
            f"eval_config.{key}", "expected lower_bound, upper_bound and/or change"
        )
    return Threshold(metric, lower, upper, direction, absolute, relative)


def _thresholds(key: str, value: Any, known: set[str]) -> list[Threshold]:
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
        out.append(_threshold(f"{key}.{metric}", metric, spec))
    return out


def _value_text(key: str, value: Any) -> str:
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
        _unknown(key, spec, ("features", "values"))
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
    fixed = tuple((str(f), _value_text(f"{key}.values.{f}", v)) for f, v in values.items())
    columns = [f for f, _ in fixed] + features
    if len(set(columns)) != len(columns):
        raise UserInputError(f"eval_config.{key}", f"names a feature twice: {spec!r}")
    return SliceSpec(tuple(features), fixed)


def _slices(value: Any) -> list[SliceSpec]:
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


def _custom_metric(key: str, entry: Any) -> CustomMetric:
    from generic_trainer.judge import eval_tfma

    if isinstance(entry, str):
        entry = {"class_name": entry}
    if not isinstance(entry, Mapping):
        raise UserInputError(
            f"eval_config.{key}",
            "expected a metric name, an import path or an object like "
            '{"class_name": "keras.metrics.AUC", "config": {...}}',
        )
    _unknown(key, entry, ("class_name", "module", "config", "name"))
    class_name, module = entry.get("class_name"), entry.get("module")
    if (
        not isinstance(class_name, str)
        or not class_name
        or (module is not None and not isinstance(module, str))
    ):
        raise UserInputError(
            f"eval_config.{key}.class_name",
            f"expected a class import path like keras.metrics.AUC, got {class_name!r}",
        )
    path = f"{module}.{class_name}" if module else class_name
    if not _CLASS_PATH.match(path):
        raise UserInputError(
            f"eval_config.{key}.class_name",
            f"{path!r} is not an import path like keras.metrics.AUC (module.Class)",
        )
    config = entry.get("config") or {}
    if isinstance(config, str):  # TFMA writes the config as a JSON string
        config = bounded_parse.load_json(
            config if config.lstrip().startswith("{") else "{" + config + "}",
            f"eval_config.{key}.config",
        )
    if not isinstance(config, Mapping):
        raise UserInputError(
            f"eval_config.{key}.config",
            f"expected an object of constructor arguments, got {config!r}",
        )
    name = (
        entry.get("name")
        or config.get("name")
        or eval_tfma.keras_metric_name(path.rsplit(".", 1)[1])
    )
    if not isinstance(name, str) or not _NAME.match(name):
        raise UserInputError(
            f"eval_config.{key}.name", f"expected a metric name (letters, digits, _), got {name!r}"
        )
    return CustomMetric(name, path, {**config, "name": name})


def _metrics(value: Any) -> tuple[tuple[str, ...] | None, tuple[CustomMetric, ...]]:
    if value is None:
        return None, ()
    if not isinstance(value, list):
        raise UserInputError(
            "eval_config.metrics", f"expected a list of metric names, got {value!r}"
        )
    names: list[str] = []
    custom: list[CustomMetric] = []
    for i, entry in enumerate(value):
        if isinstance(entry, str) and "." not in entry:
            if entry not in BUILTIN_METRICS:
                raise UserInputError(
                    "eval_config.metrics",
                    f"unknown metric {entry!r}; known: "
                    f"{', '.join(sorted(BUILTIN_METRICS))}, or a Keras "
                    "metric class by import path (keras.metrics.AUC)",
                )
            name = entry
            if any(m.name == name for m in custom):
                raise UserInputError(
                    f"eval_config.metrics[{i}]",
                    f"the built-in {name!r} and a custom metric of "
                    "that name are both listed; give the custom one "
                    'another "name"',
                )
        else:
            metric = _custom_metric(f"metrics[{i}]", entry)
            if metric.name in names:
                raise UserInputError(
                    f"eval_config.metrics[{i}]",
                    f"a metric named {metric.name!r} is listed "
                    'already; give this one another "name"',
                )
            custom.append(metric)
            name = metric.name
        if name not in names:
            names.append(name)
    return tuple(names), tuple(custom)


def _slice_thresholds(value: Any, known: set[str]) -> list[SliceThreshold]:
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
        _unknown(key, entry, ("slice", "thresholds"))
        spec = slice_spec(f"{key}.slice", entry["slice"])
        out += [
            SliceThreshold(spec, t)
            for t in _thresholds(f"{key}.thresholds", entry["thresholds"], known)
        ]
    return out


def _confidence_intervals(value: Any) -> tuple[int, int, float]:
    key = "eval_config.confidence_intervals"
    if value is None:
        return 0, 0, 0.95
    if not isinstance(value, Mapping):
        raise UserInputError(key, f'expected an object like {{"samples": 100}}, got {value!r}')
    _unknown("confidence_intervals", value, ("samples", "seed", "level"))
    samples, seed, level = value.get("samples", 100), value.get("seed", 0), value.get("level", 0.95)
    if (
        isinstance(samples, bool)
        or not isinstance(samples, int)
        or not 2 <= samples <= MAX_CI_SAMPLES
    ):
        raise UserInputError(
            f"{key}.samples",
            f"expected a whole number of bootstrap samples in 2..{MAX_CI_SAMPLES}, got {samples!r}",
        )
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise UserInputError(f"{key}.seed", f"expected a whole number >= 0, got {seed!r}")
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise UserInputError(
            f"{key}.level", f"expected a number between 0 and 1 (0.95), got {level!r}"
        )
    return samples, seed, float(level)


def _read(value: Any, gcs_root: str) -> Any:
    """The config as a dict (JSON), or the text of a TFMA text proto (checked); inline or a file."""
    from generic_trainer.judge import eval_tfma

    if not isinstance(value, str):
        return value
    text = value
    if not value.lstrip().startswith("{") and not eval_tfma.looks_like_text_proto(value):
        from generic_trainer.artifacts import storage

        path = storage.local_path(value, gcs_root)
        if not os.path.isfile(path):
            raise UserInputError(
                INPUT,
                f"{value} is neither a JSON object, a TFMA EvalConfig text proto nor an "
                "existing file",
            )
        text = bounded_parse.read_text(path, INPUT)
    if not text.lstrip().startswith("{"):
        eval_tfma.parse_text_proto(text)
        return text
    return bounded_parse.load_json(text, INPUT)


def parse_eval_config(value: Any, gcs_root: str = "/gcs") -> EvalConfig | str:
    """The short form's EvalConfig from a dict, a JSON string, a path (or gs:// URI) of a JSON file;
    or a TFMA EvalConfig (a dict, JSON, or text proto, inline or in a file) as its JSON or text,
    which TFMA parses in the evaluation process."""
    from generic_trainer.judge import eval_tfma

    if value is None or value == "" or value == {}:
        raise UserInputError(
            INPUT, 'required: a JSON object (or file) with at least {"label_key": "..."}'
        )
    value = _read(value, gcs_root)
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and eval_tfma.is_tfma_config(value):
        import json

        return json.dumps(value)
    if not isinstance(value, Mapping):
        raise UserInputError(INPUT, f"expected a JSON object, got {type(value).__name__}")
    _unknown("", value, KNOWN_KEYS)
    label_key = _string("label_key", value.get("label_key"))
    prediction_key = (
        _string("prediction_key", value["prediction_key"]) if value.get("prediction_key") else None
    )
    weight_key = (
        _string("example_weight_key", value["example_weight_key"])
        if value.get("example_weight_key")
        else None
    )
    problem = value.get("problem") or None
    if problem is not None and problem not in PROBLEMS:
        raise UserInputError(
            "eval_config.problem", f"expected one of {', '.join(PROBLEMS)}, got {problem!r}"
        )
    from_logits = value.get("from_logits", False)
    if not isinstance(from_logits, bool):
        raise UserInputError(
            "eval_config.from_logits", f"expected true or false, got {from_logits!r}"
        )
    vocabulary = value.get("label_vocabulary")
    if vocabulary is not None:
        if (
            not isinstance(vocabulary, list)
            or not vocabulary
            or not all(isinstance(v, str) for v in vocabulary)
        ):
            raise UserInputError(
                "eval_config.label_vocabulary", f"expected a list of strings, got {vocabulary!r}"
            )
        if len(set(vocabulary)) != len(vocabulary):
            raise UserInputError("eval_config.label_vocabulary", "lists a label twice")
        if problem == "regression":
            raise UserInputError(
                "eval_config.label_vocabulary", "a regression label is a number, not a class name"
            )
        raise UserInputError(
            "eval_config.label_vocabulary",
            "string labels are not mapped to classes: TFMA reads the label as the examples hold "
            "it. Give integer class labels, or a TFMA EvalConfig whose model has a "
            "preprocessing function that makes them (preprocessing_function_names)",
        )
    metrics, custom = _metrics(value.get("metrics"))
    known = set(BUILTIN_METRICS) | {m.name for m in custom}
    thresholds = _thresholds("thresholds", value.get("thresholds") or {}, known)
    slice_thresholds = _slice_thresholds(value.get("slice_thresholds"), known)
    slices = _slices(value.get("slices"))
    slices += [
        s.slice for s in slice_thresholds if s.slice.columns and s.slice not in slices
    ]  # computed, so judged
    samples, seed, level = _confidence_intervals(value.get("confidence_intervals"))
    config = EvalConfig(
        label_key=label_key,
        prediction_key=prediction_key,
        problem=problem,
        from_logits=from_logits,
        label_vocabulary=vocabulary,
        metrics=metrics,
        slices=tuple(slices),
        thresholds=tuple(thresholds),
        example_weight_key=weight_key,
        custom_metrics=custom,
        slice_thresholds=tuple(slice_thresholds),
        ci_samples=samples,
        ci_seed=seed,
        ci_level=level,
    )
    if problem:
        config.metrics_for(
            problem
        )  # metrics not defined for the problem fail now, before TensorFlow loads
    return config
