"""TFMA's `EvalConfig` (tensorflow_model_analysis/proto/config.proto), given as JSON or text proto, translated
into the evaluator's own config (eval_config.py).

Two steps. `normalize` checks every field against the part of the proto this module describes (SCHEMA) and
returns it in proto3-JSON form with snake_case names (text proto and JSON with camelCase names both come
out the same: wrappers such as `lower_bound { value: 0.6 }` are plain numbers, maps are objects). A field
that config.proto has but generic-trainer does not implement (UNSUPPORTED) is an error naming it, as is
one the proto does not have: nothing is silently ignored. `to_native` then maps the meaning:

- model_specs: one model (and at most one `is_baseline` spec, with the same keys): label_key,
  prediction_key, example_weight_key; signature_name must be serving_default; model_type tf_keras or
  tf_generic (both are served through serving_default).
- slicing_specs: feature_keys and feature_values -> slices (an empty spec is the overall, always computed).
- metrics_specs: metrics (class_name [+ module] + config: ExampleCount, WeightedExampleCount, MeanLabel,
  MeanPrediction are the built-in ones, any other class is a Keras metric class, keras.metrics.<class_name>
  without a module; a bare AUC gets TFMA's 10000 thresholds), each with threshold / per_slice_thresholds;
  the thresholds and per_slice_thresholds maps; model_names naming the models above. With an
  example_weight_key TFMA weights every metric, ExampleCount too: it is weighted_example_count here then
  (and so are thresholds on example_count); the native example_count always counts examples.
- options: compute_confidence_intervals (Poisson bootstrap, TFMA's 20 samples), include_default_metrics false.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from generic_trainer.errors import UserInputError

# message -> field -> (kind, repeated). Kinds: str, bool, int, double (scalars); wdouble, wbool, wint (the
# google.protobuf wrappers: `{value: x}` in text, plain in JSON); enum; map:<kind> (string keys); or a message.
SCHEMA: dict[str, dict[str, tuple[str, bool]]] = {
    "EvalConfig": {
        "model_specs": ("ModelSpec", True),
        "slicing_specs": ("SlicingSpec", True),
        "metrics_specs": ("MetricsSpec", True),
        "options": ("Options", False),
    },
    "ModelSpec": {
        "name": ("str", False),
        "model_type": ("str", False),
        "signature_name": ("str", False),
        "label_key": ("str", False),
        "prediction_key": ("str", False),
        "example_weight_key": ("str", False),
        "is_baseline": ("bool", False),
    },
    "SlicingSpec": {"feature_keys": ("str", True), "feature_values": ("map:str", False)},
    "MetricsSpec": {
        "metrics": ("MetricConfig", True),
        "model_names": ("str", True),
        "thresholds": ("map:MetricThreshold", False),
        "per_slice_thresholds": ("map:PerSliceMetricThresholds", False),
    },
    "MetricConfig": {
        "class_name": ("str", False),
        "module": ("str", False),
        "config": ("str", False),
        "threshold": ("MetricThreshold", False),
        "per_slice_thresholds": ("PerSliceMetricThreshold", True),
    },
    "MetricThreshold": {
        "value_threshold": ("GenericValueThreshold", False),
        "change_threshold": ("GenericChangeThreshold", False),
    },
    "GenericValueThreshold": {"lower_bound": ("wdouble", False), "upper_bound": ("wdouble", False)},
    "GenericChangeThreshold": {
        "absolute": ("wdouble", False),
        "relative": ("wdouble", False),
        "direction": ("enum", False),
    },
    "PerSliceMetricThreshold": {
        "slicing_specs": ("SlicingSpec", True),
        "threshold": ("MetricThreshold", False),
    },
    "PerSliceMetricThresholds": {"thresholds": ("PerSliceMetricThreshold", True)},
    "Options": {
        "include_default_metrics": ("wbool", False),
        "compute_confidence_intervals": ("wbool", False),
        "confidence_intervals": ("ConfidenceIntervalOptions", False),
    },
    "ConfidenceIntervalOptions": {"method": ("enum", False)},
}
# Fields config.proto has that the evaluator does not implement, with what to do instead.
UNSUPPORTED: dict[str, dict[str, str]] = {
    "EvalConfig": {"cross_slicing_specs": "cross-slice comparisons are not computed"},
    "ModelSpec": {
        "preprocessing_function_names": "the model is called through serving_default only",
        "label_keys": "one output is evaluated: use label_key",
        "prediction_keys": "one output is evaluated: use prediction_key",
        "example_weight_keys": "one output is evaluated: use example_weight_key",
        "padding_options": "labels and predictions are not padded",
        "inference_batch_size": "use --batch-size",
    },
    "SlicingSpec": {"slice_keys_sql": "use feature_keys / feature_values"},
    "MetricsSpec": {
        "output_names": "one output is evaluated: use model_specs.prediction_key",
        "output_weights": "one output is evaluated",
        "binarize": "metrics are not binarized per class",
        "aggregate": "multiclass precision, recall and f1 are macro averages; no other aggregation",
        "example_weights": "example_weight_key weights every metric; no unweighted variants",
        "query_key": "query (ranking) metrics are not computed",
        "cross_slice_thresholds": "cross-slice comparisons are not computed",
    },
    "MetricConfig": {"cross_slice_thresholds": "cross-slice comparisons are not computed"},
    "Options": {
        "min_slice_size": "every slice is reported",
        "disabled_outputs": "outputs are always written",
    },
}
ENUMS = {
    "direction": ("UNKNOWN", "LOWER_IS_BETTER", "HIGHER_IS_BETTER"),
    "method": ("UNKNOWN_CONFIDENCE_INTERVAL_METHOD", "POISSON_BOOTSTRAP", "JACKKNIFE"),
}
TOP_LEVEL = frozenset(SCHEMA["EvalConfig"]) | frozenset(UNSUPPORTED["EvalConfig"])
# TFMA metrics with a built-in equivalent here; other TFMA-only metrics are refused by name.
TFMA_BUILTINS = {
    "ExampleCount": "example_count",
    "WeightedExampleCount": "weighted_example_count",
    "MeanLabel": "mean_label",
    "MeanPrediction": "mean_prediction",
}
TFMA_ONLY = frozenset(
    {
        "AUCPrecisionRecall",
        "BooleanFlipRates",
        "Calibration",
        "CalibrationPlot",
        "CoefficientOfDiscrimination",
        "ConfusionMatrixAtThresholds",
        "ConfusionMatrixPlot",
        "FairnessIndicators",
        "FallOut",
        "FlipCount",
        "FlipRate",
        "MeanAbsoluteAttributions",
        "MeanAttributions",
        "MinLabelPosition",
        "MissRate",
        "ModelCosineSimilarity",
        "MultiClassConfusionMatrixAtThresholds",
        "MultiClassConfusionMatrixPlot",
        "MultiLabelConfusionMatrixPlot",
        "NDCG",
        "QueryStatistics",
        "RelativeCoefficientOfDiscrimination",
        "SetMatchPrecision",
        "SetMatchRecall",
        "SquaredPearsonCorrelation",
        "TotalAttributions",
    }
)
# With an example_weight_key every TFMA metric is weighted (ExampleWeightOptions unset), ExampleCount too:
# it is the native weighted_example_count then (the native example_count always counts examples).
WEIGHTED = {"example_count": "weighted_example_count"}
TFMA_CI_SAMPLES = 20
TFMA_AUC_THRESHOLDS = 10000
SERVED_MODEL_TYPES = ("", "tf_keras", "tf_generic")
_TEXT_PROTO_START = re.compile(r"^\s*(#[^\n]*\n\s*)*(" + "|".join(sorted(TOP_LEVEL)) + r")\s*[:{<]")


def keras_metric_name(class_name: str) -> str:
    """Keras' default metric name for a class: AUC -> auc, SparseCategoricalAccuracy -> sparse_categorical_accuracy."""
    name = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", class_name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


def _snake(name: str) -> str:
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name)


def _key(path: str) -> str:
    return f"eval_config.{path}" if path else "--eval-config"


def looks_like_text_proto(text: str) -> bool:
    """Whether `text` starts like a TFMA EvalConfig in text format (`model_specs { ...`)."""
    return bool(_TEXT_PROTO_START.match(text))


def is_tfma_config(value: Mapping[str, Any]) -> bool:
    """Whether a parsed JSON object is a TFMA EvalConfig (its top-level fields), not the native config."""
    return any(_snake(k) in TOP_LEVEL for k in value)


def parse_text_proto(text: str) -> dict[str, Any]:
    """A TFMA EvalConfig in text format, normalized (see `normalize`)."""
    from generic_trainer.judge import textproto

    try:
        fields = textproto.parse(text)
    except ValueError as e:
        raise UserInputError(
            "--eval-config", f"not a valid text proto (TFMA EvalConfig): {e}"
        ) from None
    return normalize(fields)


def _scalar(kind: str, value: Any, path: str) -> Any:
    from generic_trainer.judge.textproto import Scalar

    if kind.startswith("w"):  # a google.protobuf wrapper: {value: x} in text, x in JSON
        kind = kind[1:]
        if isinstance(value, (list, Mapping)):
            inner = dict(_field_items(value, path))
            if set(inner) != {"value"}:
                raise UserInputError(
                    _key(path), f"expected {{value: ...}}, got fields {sorted(inner)}"
                )
            value = inner["value"]
    text = value.text if isinstance(value, Scalar) else value
    try:
        if kind == "str":
            if isinstance(value, Scalar) and value.kind != "string" or not isinstance(text, str):
                raise ValueError
            return text
        if kind == "bool":
            if isinstance(text, bool):
                return text
            return {
                "true": True,
                "True": True,
                "t": True,
                "1": True,
                "false": False,
                "False": False,
                "f": False,
                "0": False,
            }[text]
        if kind == "enum":
            if not isinstance(text, str) or text not in ENUMS[path.rsplit(".", 1)[-1]]:
                raise ValueError
            return text
        if isinstance(text, bool):
            raise ValueError
        number = float(text) if kind == "double" else int(text)
        return number
    except (ValueError, KeyError, TypeError):
        expected = {
            "str": "a quoted string",
            "bool": "true or false",
            "double": "a number",
            "int": "an integer",
            "enum": "one of " + ", ".join(ENUMS.get(path.rsplit(".", 1)[-1], ())),
        }[kind]
        raise UserInputError(_key(path), f"expected {expected}, got {text!r}") from None


def _field_items(value: Any, path: str) -> list[tuple[str, Any]]:
    if isinstance(value, Mapping):
        items: list[tuple[str, Any]] = []
        for name, v in value.items():
            items += [(_snake(name), x) for x in v] if isinstance(v, list) else [(_snake(name), v)]
        return items
    if isinstance(value, list):
        return list(value)
    raise UserInputError(_key(path), f"expected a message (an object), got {value!r}")


def _map(kind: str, value: Any, path: str) -> dict[str, Any]:
    """A proto map: an object in JSON; `{key: ... value: ...}` entries in text."""
    if isinstance(value, Mapping):
        return {str(k): _value(kind, v, f"{path}.{k}") for k, v in value.items()}
    entry = dict(_field_items(value, path))
    if set(entry) != {"key", "value"}:
        raise UserInputError(
            _key(path), f"expected a map entry {{key: ... value: ...}}, got fields {sorted(entry)}"
        )
    key = _scalar("str", entry["key"], f"{path}.key")
    return {key: _value(kind, entry["value"], f"{path}.{key}")}


def _value(kind: str, value: Any, path: str) -> Any:
    return normalize(value, kind, path) if kind in SCHEMA else _scalar(kind, value, path)


def normalize(value: Any, message: str = "EvalConfig", path: str = "") -> dict[str, Any]:
    """`value` (text-proto fields or JSON) checked against SCHEMA, in proto3-JSON form with snake_case names."""
    fields, unsupported = SCHEMA[message], UNSUPPORTED.get(message, {})
    out: dict[str, Any] = {}
    for name, v in _field_items(value, path):
        where = f"{path}.{name}" if path else name
        if name in unsupported:
            raise UserInputError(
                _key(where),
                f"TFMA's {message}.{name} is not supported by generic-trainer's "
                f"evaluator ({unsupported[name]})",
            )
        if name not in fields:
            raise UserInputError(
                _key(where),
                f"{message} has no field {name!r} (config.proto); supported: {', '.join(fields)}",
            )
        kind, repeated = fields[name]
        if kind.startswith("map:"):
            out.setdefault(name, {}).update(_map(kind[4:], v, where))
        elif repeated:
            out.setdefault(name, []).append(_value(kind, v, f"{where}[{len(out.get(name, []))}]"))
        elif name in out:
            raise UserInputError(_key(where), "set twice (not a repeated field)")
        else:
            out[name] = _value(kind, v, where)
    return out


# --------------------------------------------------------------------------------------------
# The translation
# --------------------------------------------------------------------------------------------


def _model(specs: list[dict[str, Any]]) -> tuple[dict[str, str], set[str]]:
    """The native keys from model_specs, and the model names metrics_specs may name."""
    candidates = [i for i, s in enumerate(specs) if not s.get("is_baseline")]
    baselines = [i for i, s in enumerate(specs) if s.get("is_baseline")]
    if len(candidates) != 1 or len(baselines) > 1:
        raise UserInputError(
            "eval_config.model_specs",
            f"expected one model spec (and at most one with is_baseline: "
            f"true), got {len(candidates)} and {len(baselines)}: the "
            "evaluator judges one model (--model) against --baseline-model",
        )
    for i, spec in enumerate(specs):
        if spec.get("signature_name", "") not in ("", "serving_default"):
            raise UserInputError(
                f"eval_config.model_specs[{i}].signature_name",
                "the evaluator calls serving_default only",
            )
        if spec.get("model_type", "") not in SERVED_MODEL_TYPES:
            raise UserInputError(
                f"eval_config.model_specs[{i}].model_type",
                f"{spec['model_type']!r} is not "
                "supported: the model is a SavedModel "
                "served through serving_default "
                "(tf_keras, tf_generic)",
            )
    model = specs[candidates[0]]
    keys = {
        k: model[k] for k in ("label_key", "prediction_key", "example_weight_key") if model.get(k)
    }
    for i in baselines:
        for k in ("label_key", "prediction_key", "example_weight_key"):
            if specs[i].get(k) and specs[i][k] != keys.get(k):
                raise UserInputError(
                    f"eval_config.model_specs[{i}].{k}",
                    f"the baseline's {k} must be the model's "
                    f"({keys.get(k)!r}): one config judges both",
                )
    return keys, {s.get("name", "") for s in specs}


def _slice(spec: dict[str, Any]) -> dict[str, Any]:
    return {"features": spec.get("feature_keys", []), "values": spec.get("feature_values", {})}


def _threshold(threshold: dict[str, Any], path: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    value = threshold.get("value_threshold")
    if value is not None:
        out.update({k: value[k] for k in ("lower_bound", "upper_bound") if k in value})
    change = threshold.get("change_threshold")
    if change is not None:
        direction = {
            "HIGHER_IS_BETTER": "higher_is_better",
            "LOWER_IS_BETTER": "lower_is_better",
        }.get(change.get("direction", "UNKNOWN"))
        out["change"] = {k: change[k] for k in ("absolute", "relative") if k in change}
        if direction:
            out["change"]["direction"] = direction
    if not out:
        raise UserInputError(_key(path), "expected value_threshold and/or change_threshold")
    return out


def _per_slice(entries: list[dict[str, Any]], metric: str, path: str) -> list[dict[str, Any]]:
    out = []
    for i, entry in enumerate(entries):
        if not entry.get("slicing_specs") or "threshold" not in entry:
            raise UserInputError(_key(f"{path}[{i}]"), "expected slicing_specs and a threshold")
        threshold = _threshold(entry["threshold"], f"{path}[{i}].threshold")
        out += [
            {"slice": _slice(s), "thresholds": {metric: threshold}} for s in entry["slicing_specs"]
        ]
    return out


def _metric(config: dict[str, Any], path: str, weighted: bool) -> tuple[Any, str]:
    """(the native metrics entry, its TFMA name) of a MetricConfig."""
    class_name, module = config.get("class_name", ""), config.get("module", "")
    if not class_name:
        raise UserInputError(_key(f"{path}.class_name"), "required")
    if module.startswith("tensorflow_model_analysis") or not module:
        if class_name in TFMA_BUILTINS:
            if config.get("config", "").strip() not in ("", "{}"):
                raise UserInputError(_key(f"{path}.config"), f"{class_name} takes no config here")
            name = TFMA_BUILTINS[class_name]
            return (WEIGHTED.get(name, name) if weighted else name), name
        if module or class_name in TFMA_ONLY:
            raise UserInputError(
                _key(f"{path}.class_name"),
                f"TFMA's {class_name} is not supported; use a Keras "
                f"metric or one of {', '.join(TFMA_BUILTINS)}",
            )
        module = "keras.metrics"  # TFMA looks a bare class name up in its metrics, then in Keras'
    from generic_trainer.artifacts import bounded_parse

    text = config.get("config", "")
    settings = (
        bounded_parse.load_json(
            text if text.lstrip().startswith("{") else "{" + text + "}", _key(f"{path}.config")
        )
        if text
        else {}
    )
    if not isinstance(settings, Mapping):
        raise UserInputError(
            _key(f"{path}.config"), f"expected a JSON object of constructor arguments, got {text!r}"
        )
    if class_name == "AUC" and module == "keras.metrics" and not config.get("module"):
        settings = {
            "num_thresholds": TFMA_AUC_THRESHOLDS,
            **settings,
        }  # TFMA's AUC default, not Keras' 200
    name = settings.get("name")
    return {
        "class_name": class_name,
        "module": module,
        "config": settings,
    }, name or keras_metric_name(class_name)


def _metrics_spec(
    spec: dict[str, Any], path: str, native: dict[str, Any], models: set[str]
) -> None:
    """Adds one MetricsSpec's metrics and thresholds to `native` (thresholds keyed by TFMA's metric names)."""
    weighted = bool(native.get("example_weight_key"))

    def rename(metric: str) -> str:
        return WEIGHTED.get(metric, metric) if weighted else metric

    unknown = [m for m in spec.get("model_names", []) if m not in models]
    if unknown:
        raise UserInputError(
            _key(f"{path}.model_names"),
            f"{unknown} name no model_specs entry (names: {sorted(models) or 'none'})",
        )
    thresholds, slice_thresholds = (
        native.setdefault("thresholds", {}),
        native.setdefault("slice_thresholds", []),
    )

    def add(metric: str, threshold: dict[str, Any], where: str) -> None:
        if metric in thresholds:
            raise UserInputError(
                _key(where), f"a second threshold on {metric!r}; give one per metric"
            )
        thresholds[metric] = _threshold(threshold, where)

    for i, config in enumerate(spec.get("metrics", [])):
        where = f"{path}.metrics[{i}]"
        entry, name = _metric(config, where, weighted)
        native.setdefault("metrics", []).append(entry)
        if "threshold" in config:
            add(rename(name), config["threshold"], f"{where}.threshold")
        slice_thresholds += _per_slice(
            config.get("per_slice_thresholds", []), rename(name), f"{where}.per_slice_thresholds"
        )
    for name, threshold in spec.get("thresholds", {}).items():
        add(rename(name), threshold, f"{path}.thresholds.{name}")
    for name, entries in spec.get("per_slice_thresholds", {}).items():
        slice_thresholds += _per_slice(
            entries.get("thresholds", []), rename(name), f"{path}.per_slice_thresholds.{name}"
        )


def to_native(value: Mapping[str, Any]) -> dict[str, Any]:
    """The native config (a dict for eval_config_reader.parse_eval_config) of a TFMA EvalConfig (JSON or normalized)."""
    config = normalize(value)
    if not config.get("model_specs"):
        raise UserInputError(
            "eval_config.model_specs",
            "required: a TFMA EvalConfig needs a model spec with a label_key",
        )
    keys, models = _model(config["model_specs"])
    if "label_key" not in keys:
        raise UserInputError(
            "eval_config.model_specs[0].label_key", "required (the label feature of the examples)"
        )
    native: dict[str, Any] = dict(keys)
    slices = [
        _slice(s)
        for s in config.get("slicing_specs", [])
        if s.get("feature_keys") or s.get("feature_values")
    ]
    if slices:
        native["slices"] = slices
    for i, spec in enumerate(config.get("metrics_specs", [])):
        _metrics_spec(spec, f"metrics_specs[{i}]", native, models)
    options = config.get("options", {})
    if options.get("include_default_metrics"):
        raise UserInputError(
            "eval_config.options.include_default_metrics",
            "the model's compiled metrics are not "
            "known to the evaluator: list the "
            "metrics in metrics_specs",
        )
    method = options.get("confidence_intervals", {}).get(
        "method", "UNKNOWN_CONFIDENCE_INTERVAL_METHOD"
    )
    if method == "JACKKNIFE":
        raise UserInputError(
            "eval_config.options.confidence_intervals.method", "only POISSON_BOOTSTRAP is supported"
        )
    if options.get("compute_confidence_intervals"):
        native["confidence_intervals"] = {"samples": TFMA_CI_SAMPLES}
    return {k: v for k, v in native.items() if v not in ({}, [])}
