"""The project's short eval config (eval_config.py) written as the TFMA `EvalConfig` it means.

TFMA runs every evaluation; the short form only names TFMA metrics and thresholds for the model's
kind of problem. Each built-in name is a TFMA metric reported under that name (its `config` carries
`"name"`), so `thresholds.accuracy` judges the metric reported as `accuracy`:

| name | multiclass | binary | regression |
|---|---|---|---|
| accuracy | SparseCategoricalAccuracy | BinaryAccuracy | - |
| loss | SparseCategoricalCrossentropy | BinaryCrossentropy | MeanSquaredError |
| auc, precision, recall, f1 | AUC, Precision, Recall, F1Score, macro-averaged | the same | - |
| mse, rmse, mae | - | - | MeanSquaredError, RootMeanSquaredError, MeanAbsoluteError |
| mean_label, mean_prediction | - | - | MeanLabel, MeanPrediction |

`example_count` is TFMA's ExampleCount, unweighted; `weighted_example_count` its weighted count.
Custom metrics keep their class and module; slices become slicing specs; slice thresholds per-slice
thresholds; `confidence_intervals` turns on TFMA's (Poisson bootstrap). `label_vocabulary` has no
EvalConfig field: tfma_labels.py hands it to TFMA's pipeline. Pure Python: the dict is the proto's
JSON form, parsed by TFMA's own config message in the evaluation process.
"""

from __future__ import annotations

import json
from typing import Any

from generic_trainer.errors import UserInputError
from generic_trainer.judge.eval_config import EvalConfig, SliceSpec, Threshold

_CLASS = {
    "multiclass": {
        "accuracy": "SparseCategoricalAccuracy",
        "loss": "SparseCategoricalCrossentropy",
    },
    "binary": {"accuracy": "BinaryAccuracy", "loss": "BinaryCrossentropy"},
    "regression": {
        "loss": "MeanSquaredError",
        "mse": "MeanSquaredError",
        "rmse": "RootMeanSquaredError",
        "mae": "MeanAbsoluteError",
        "mean_label": "MeanLabel",
        "mean_prediction": "MeanPrediction",
    },
}
_CONFUSION = {"auc": "AUC", "precision": "Precision", "recall": "Recall", "f1": "F1Score"}
_COUNTS = {"example_count": "ExampleCount", "weighted_example_count": "WeightedExampleCount"}
_LOGITS = ("loss",)  # Keras losses take from_logits; TFMA's confusion metrics do not


def slicing_spec(spec: SliceSpec) -> dict[str, Any]:
    """A TFMA SlicingSpec (JSON) of a short-form slice."""
    out: dict[str, Any] = {}
    if spec.features:
        out["feature_keys"] = list(spec.features)
    if spec.values:
        out["feature_values"] = dict(spec.values)
    return out


def threshold(t: Threshold) -> dict[str, Any]:
    """A TFMA MetricThreshold (JSON) of a short-form threshold."""
    out: dict[str, Any] = {}
    bounds = {k: v for k, v in (("lower_bound", t.lower_bound), ("upper_bound", t.upper_bound))}
    if any(v is not None for v in bounds.values()):
        out["value_threshold"] = {k: v for k, v in bounds.items() if v is not None}
    if t.direction:
        change: dict[str, Any] = {"direction": t.direction.upper()}
        if t.change_absolute is not None:
            change["absolute"] = t.change_absolute
        if t.change_relative is not None:
            change["relative"] = t.change_relative
        out["change_threshold"] = change
    return out


def _builtin(name: str, problem: str, from_logits: bool) -> tuple[str, dict[str, Any]]:
    """(class_name, config) of a built-in metric for `problem`."""
    if name in _COUNTS:
        return _COUNTS[name], {"name": name}
    if name in _CONFUSION and problem != "regression":
        if from_logits:
            raise UserInputError(
                "eval_config.from_logits",
                f"{name!r} reads probabilities; with logits use accuracy and loss, or a TFMA "
                "EvalConfig",
            )
        return _CONFUSION[name], {"name": name}
    if name not in _CLASS[problem]:
        raise UserInputError(
            "eval_config.metrics", f"{name!r} is not defined for a {problem} model"
        )
    config: dict[str, Any] = {"name": name}
    if from_logits and name in _LOGITS and problem != "regression":
        config["from_logits"] = True
    if from_logits and name == "accuracy" and problem == "binary":
        config["threshold"] = 0.0
    return _CLASS[problem][name], config


def _metric_configs(config: EvalConfig, problem: str) -> list[tuple[dict[str, Any], bool]]:
    """(MetricConfig JSON, macro-averaged) of every metric, its thresholds attached."""
    custom = {m.name: m for m in config.custom_metrics}
    out = []
    for name in config.metrics_for(problem):
        if name in custom:
            module, _, cls = custom[name].class_path.rpartition(".")
            entry: dict[str, Any] = {"class_name": cls, "module": module}
            entry["config"] = json.dumps(custom[name].config)
            macro = False
        else:
            cls, cfg = _builtin(name, problem, config.from_logits)
            entry = {"class_name": cls, "config": json.dumps(cfg)}
            macro = problem == "multiclass" and name in _CONFUSION
        # the short form's thresholds judge the overall slice only (TFMA's MetricConfig.threshold
        # would judge every slice); its slice thresholds judge their slice
        overall = [t for t in config.thresholds if t.metric == name][:1]
        per_slice = [{"slicing_specs": [{}], "threshold": threshold(t)} for t in overall]
        per_slice += [
            {"slicing_specs": [slicing_spec(s.slice)], "threshold": threshold(s.threshold)}
            for s in config.slice_thresholds
            if s.threshold.metric == name
        ]
        if per_slice:
            entry["per_slice_thresholds"] = per_slice
        out.append((entry, macro))
    return out


def to_tfma(config: EvalConfig, problem: str, num_classes: int) -> dict[str, Any]:
    """The TFMA EvalConfig (proto JSON) that evaluates `config` on a `problem` model.

    Args:
      config: the short form, read by eval_config_reader.
      problem: multiclass, binary or regression (given, or inferred from the model and labels).
      num_classes: the model's output width (multiclass: the classes macro averages run over).

    Returns:
      The EvalConfig as a JSON-able dict.
    """
    spec: dict[str, Any] = {"label_key": config.label_key, "signature_name": "serving_default"}
    if config.prediction_key:
        spec["prediction_key"] = config.prediction_key
    if config.example_weight_key:
        spec["example_weight_key"] = config.example_weight_key
    plain: list[dict[str, Any]] = []
    counts: list[dict[str, Any]] = []
    macro: list[dict[str, Any]] = []
    for entry, averaged in _metric_configs(config, problem):
        if entry["class_name"] == "ExampleCount":
            counts.append(entry)
        else:
            (macro if averaged else plain).append(entry)
    metrics_specs: list[dict[str, Any]] = [{"metrics": plain}] if plain else []
    if counts:
        metrics_specs.append({"metrics": counts, "example_weights": {"unweighted": True}})
    if macro:
        weights = {str(i): 1.0 for i in range(num_classes)}
        metrics_specs.append(
            {"metrics": macro, "aggregate": {"macro_average": True, "class_weights": weights}}
        )
    out: dict[str, Any] = {
        "model_specs": [spec],
        "slicing_specs": [{}] + [slicing_spec(s) for s in config.slices],
        "metrics_specs": metrics_specs,
    }
    if config.ci_samples:
        out["options"] = {"compute_confidence_intervals": True}
    return out
