"""The evaluator's config (`--eval-config FILE_OR_JSON`): a small, TFMA-inspired JSON object.

    {"label_key": "species",                 # required: the label feature of the tf.Examples
     "prediction_key": "outputs",            # which serving_default output (default: the only one)
     "problem": "multiclass",                # multiclass | binary | regression (default: inferred)
     "from_logits": false,                   # outputs are logits, not probabilities
     "label_vocabulary": ["a", "b"],         # string labels: class names in class-id order
     "example_weight_key": "weight",         # weights every metric (default: unweighted)
     "metrics": ["accuracy", "auc",          # built-in names (default: DEFAULT_METRICS)
                 {"class_name": "keras.metrics.AUC", "config": {"num_thresholds": 1000},
                  "name": "keras_auc"},
                 "keras.metrics.Precision"], # ... or any Keras metric class by import path
     "slices": [["island"], ["island", "sex"],            # overall is always computed
                {"features": ["sex"], "values": {"island": "Biscoe"}}],
     "thresholds": {"accuracy": {"lower_bound": 0.8, "upper_bound": 1.0,
                                 "change": {"direction": "higher_is_better", "absolute": -0.01,
                                            "relative": -0.05}}},
     "slice_thresholds": [{"slice": ["island"], "thresholds": {"accuracy": {"lower_bound": 0.7}}},
                          {"slice": {"values": {"island": "Biscoe"}}, "thresholds": {...}}],
     "confidence_intervals": {"samples": 100, "seed": 0, "level": 0.95}}

`thresholds` apply to the overall metrics; `slice_thresholds` to every slice a slice spec matches
(a list of features: every slice of them; `values`: only the slices with those values). `change`
compares the candidate with the baseline model: with `higher_is_better`, `candidate - baseline >=
absolute` and `(candidate - baseline) / |baseline| >= relative`; with `lower_is_better`, `<=`. So
`absolute: -0.01` lets accuracy drop by at most 0.01. The direction defaults to lower_is_better for
loss, mse, rmse and mae and higher_is_better otherwise. Change thresholds are skipped when there is
no baseline (the first model is judged on bounds only).

TFMA computes everything: eval_short_form.py writes this config as the TFMA `EvalConfig` it means.
The config may also be a TFMA `EvalConfig` itself (JSON or text proto), handed to TFMA as it is.
`eval_config_reader.parse_eval_config` reads either (no TensorFlow); every error in the short form
is a UserInputError naming the key (`eval_config.thresholds.auc`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from generic_trainer.errors import UserInputError

PROBLEMS = ("multiclass", "binary", "regression")
CLASSIFICATION_METRICS = (
    "example_count",
    "weighted_example_count",
    "accuracy",
    "loss",
    "auc",
    "precision",
    "recall",
    "f1",
)
REGRESSION_METRICS = (
    "example_count",
    "weighted_example_count",
    "loss",
    "mse",
    "rmse",
    "mae",
    "mean_label",
    "mean_prediction",
)
BUILTIN_METRICS = frozenset(CLASSIFICATION_METRICS) | frozenset(REGRESSION_METRICS)
METRICS_BY_PROBLEM = {
    "multiclass": CLASSIFICATION_METRICS,
    "binary": CLASSIFICATION_METRICS,
    "regression": REGRESSION_METRICS,
}
DEFAULT_METRICS = {
    "multiclass": ("example_count", "accuracy", "loss", "auc", "precision", "recall"),
    "binary": ("example_count", "accuracy", "loss", "auc", "precision", "recall"),
    "regression": ("example_count", "loss", "mse", "rmse", "mae"),
}
LOWER_IS_BETTER = frozenset({"loss", "mse", "rmse", "mae"})
DIRECTIONS = ("higher_is_better", "lower_is_better")
KNOWN_KEYS = (
    "label_key",
    "prediction_key",
    "problem",
    "from_logits",
    "label_vocabulary",
    "example_weight_key",
    "metrics",
    "slices",
    "thresholds",
    "slice_thresholds",
    "confidence_intervals",
)
MAX_CI_SAMPLES = 10000
INPUT = "--eval-config"


@dataclasses.dataclass(frozen=True)
class SliceSpec:
    """Slices over `features` (one per combination of their values), within the fixed `values`
    (TFMA's SlicingSpec: feature_keys, feature_values). Neither: the overall "slice"."""

    features: tuple[str, ...] = ()
    values: tuple[tuple[str, str], ...] = ()

    @property
    def columns(self) -> tuple[str, ...]:
        """Every feature a slice key of this spec names: the fixed ones first."""
        return tuple(f for f, _ in self.values) + self.features


@dataclasses.dataclass(frozen=True)
class CustomMetric:
    """A Keras metric class (import path) with its constructor config, reported as `name`."""

    name: str
    class_path: str
    config: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Threshold:
    """The bounds one metric must meet (absolute, and relative to the baseline)."""

    metric: str
    lower_bound: float | None = None
    upper_bound: float | None = None
    direction: str | None = None  # set whenever a change bound is
    change_absolute: float | None = None
    change_relative: float | None = None


@dataclasses.dataclass(frozen=True)
class SliceThreshold:
    """A threshold on every slice `slice` matches."""

    slice: SliceSpec
    threshold: Threshold


@dataclasses.dataclass(frozen=True)
class EvalConfig:
    """What to evaluate: the label, the prediction, the metrics, the slices and the thresholds."""

    label_key: str
    prediction_key: str | None = None
    problem: str | None = None
    from_logits: bool = False
    label_vocabulary: tuple[str, ...] | None = None
    metrics: tuple[str, ...] | None = (
        None  # None: DEFAULT_METRICS of the problem; custom metrics by name
    )
    slices: tuple[SliceSpec, ...] = ()
    thresholds: tuple[Threshold, ...] = ()
    example_weight_key: str | None = None
    custom_metrics: tuple[CustomMetric, ...] = ()
    slice_thresholds: tuple[SliceThreshold, ...] = ()
    ci_samples: int = 0  # bootstrap confidence intervals: 0 = none
    ci_seed: int = 0
    ci_level: float = 0.95

    def metrics_for(self, problem: str) -> tuple[str, ...]:
        """The metrics to compute for `problem`: the configured (or default) ones plus any with a
        threshold.

        Raises UserInputError when a built-in one is not defined for `problem`.
        """
        names = list(self.metrics if self.metrics is not None else DEFAULT_METRICS[problem])
        names += [t.metric for t in self.all_thresholds() if t.metric not in names]
        if "example_count" not in names:
            names.insert(0, "example_count")
        if self.example_weight_key and "weighted_example_count" not in names:
            names.insert(names.index("example_count") + 1, "weighted_example_count")
        allowed = METRICS_BY_PROBLEM[problem]
        custom = {m.name for m in self.custom_metrics}
        for name in names:
            if name not in allowed and name not in custom:
                key = (
                    "metrics"
                    if self.metrics is not None and name in self.metrics
                    else f"thresholds.{name}"
                )
                raise UserInputError(
                    f"eval_config.{key}",
                    f"{name!r} is not defined for a {problem} model; "
                    f"{problem} metrics: {', '.join(allowed)}",
                )
        return tuple(names)

    def all_thresholds(self) -> list[Threshold]:
        """The overall thresholds, then the per-slice ones."""
        return list(self.thresholds) + [s.threshold for s in self.slice_thresholds]

    def to_json(self) -> dict[str, Any]:
        """The config as a JSON-able dict (for reports, metadata and the sandbox: `from_json` reads
        it back)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> EvalConfig:
        """The EvalConfig of `to_json()` (exactly)."""

        def tupled(v: Any) -> Any:
            return tuple(v) if v is not None else None

        def spec(s: Mapping[str, Any]) -> SliceSpec:
            return SliceSpec(tuple(s["features"]), tuple(tuple(p) for p in s["values"]))

        return cls(
            **{
                **value,
                "label_vocabulary": tupled(value["label_vocabulary"]),
                "metrics": tupled(value["metrics"]),
                "slices": tuple(spec(s) for s in value["slices"]),
                "thresholds": tuple(Threshold(**t) for t in value["thresholds"]),
                "custom_metrics": tuple(CustomMetric(**m) for m in value["custom_metrics"]),
                "slice_thresholds": tuple(
                    SliceThreshold(spec(s["slice"]), Threshold(**s["threshold"]))
                    for s in value["slice_thresholds"]
                ),
            }
        )
