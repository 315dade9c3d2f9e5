"""Streaming evaluation metrics and slices (numpy only, no TensorFlow).

An `Accumulator` takes (labels, predictions, weights) batch by batch and keeps only fixed-size sums: the
confusion matrix, the summed loss and, for AUC, per-class histograms of the predicted probability
(`NUM_BINS` bins); so memory does not grow with the data. Every sum is weighted by the example weight
(1 without `example_weight_key`) times the example's bootstrap multiplicity (1 outside a bootstrap
sample); `example_count` counts examples (times multiplicity), `weighted_example_count` sums weights.
`SliceMetrics` holds, for one model on one slice, the built-in accumulator, the custom (Keras) metrics,
and one of each per bootstrap sample (eval_bootstrap.py). `SlicedEvaluation` keeps one SliceMetrics
overall and one per slice value (a slice is one or more features: `island=Biscoe`, or
`island=Biscoe, sex=female` for a cross; features in name order); an example with several values of a
feature is in each of their slices, one without the feature is in none of that feature's slices (TFMA's
rules).

Definitions: accuracy = correct / count; loss = mean cross-entropy (classification, probabilities
clipped to [1e-7, 1]) or mean squared error (regression). Binary precision, recall and f1 are the
positive class's at probability 0.5; multiclass ones are macro averages over the classes present in
the labels. AUC is the ROC AUC (binary) or the macro one-vs-rest ROC AUC (multiclass), from the
histograms; undefined values (no positives, no predictions) are None.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

log = logging.getLogger(__name__)

NUM_BINS = 1000
MAX_SLICES = 1000  # per slice spec; further values are counted in no slice (a warning says so)
EPSILON = 1e-7
OVERALL = "Overall"

SliceKey = tuple[tuple[str, str], ...]  # (("island", "Biscoe"), ("sex", "male")); () is overall


def slice_name(key: SliceKey) -> str:
    """`island=Biscoe, sex=male`; `Overall` for the empty key."""
    return ", ".join(f"{feature}={value}" for feature, value in key) if key else OVERALL


def _ratio(num: float, den: float) -> float | None:
    return float(num) / float(den) if den else None


def _auc(negatives: np.ndarray, positives: np.ndarray) -> float | None:
    """ROC AUC from histograms of the score of negatives and positives (ties within a bin count half)."""
    n_pos, n_neg = positives.sum(), negatives.sum()
    if not n_pos or not n_neg:
        return None
    above = np.concatenate([np.cumsum(positives[::-1])[::-1][1:], [0]])  # positives in higher bins
    return float((negatives * (above + 0.5 * positives)).sum() / (n_pos * n_neg))


class Accumulator:
    """Sums for the built-in metrics of one model on one slice, added to batch by batch."""

    def __init__(self, problem: str, num_classes: int = 2):
        self.problem = problem
        self.num_classes = num_classes if problem == "multiclass" else 2
        self.count = 0.0  # examples (times their bootstrap multiplicity)
        self.weight_sum = 0.0
        self.loss_sum = 0.0
        if problem == "regression":
            self.sq_error = self.abs_error = self.label_sum = self.prediction_sum = 0.0
        else:
            k = self.num_classes
            self.confusion = np.zeros((k, k), dtype=np.float64)  # [label, predicted], weighted
            self.counts = np.zeros(
                (k, k), dtype=np.int64
            )  # the same, counted (the report's confusion matrix)
            # For AUC: [class, negative|positive, bin]; binary needs the positive class only.
            self.histograms = np.zeros(
                (k if problem == "multiclass" else 1, 2, NUM_BINS), dtype=np.float64
            )

    def add(
        self,
        labels: np.ndarray,
        predictions: np.ndarray,
        weights: np.ndarray | None = None,
        multiplicity: np.ndarray | None = None,
    ) -> None:
        """Add a batch: class indices and probabilities [n, classes] (classification), or numbers [n]; example
        weights [n] (default 1) and bootstrap multiplicities [n] (default 1)."""
        n = len(labels)
        if not n:
            return
        m = np.ones(n) if multiplicity is None else multiplicity.astype(np.float64)
        w = m if weights is None else weights.astype(np.float64) * m
        self.count += float(m.sum())
        self.weight_sum += float(w.sum())
        if self.problem == "regression":
            labels = labels.astype(np.float64)
            error = predictions.astype(np.float64) - labels
            self.sq_error += float((w * error**2).sum())
            self.abs_error += float((w * np.abs(error)).sum())
            self.label_sum += float((w * labels).sum())
            self.prediction_sum += float((w * predictions).sum())
            self.loss_sum += float((w * error**2).sum())
            return
        probs = predictions.astype(np.float64)
        predicted = probs.argmax(axis=1)
        np.add.at(self.confusion, (labels, predicted), w)
        if multiplicity is None:
            np.add.at(self.counts, (labels, predicted), 1)
        self.loss_sum += float(
            (w * -np.log(np.clip(probs[np.arange(n), labels], EPSILON, 1.0))).sum()
        )
        classes = range(self.num_classes) if self.problem == "multiclass" else (1,)
        for row, k in enumerate(classes):
            bins = np.clip((probs[:, k] * NUM_BINS).astype(np.int64), 0, NUM_BINS - 1)
            positive = labels == k
            np.add.at(self.histograms[row, 1], bins[positive], w[positive])
            np.add.at(self.histograms[row, 0], bins[~positive], w[~positive])

    def _per_class(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        tp = np.diag(self.confusion).astype(np.float64)
        return (
            tp,
            self.confusion.sum(axis=0).astype(np.float64),
            self.confusion.sum(axis=1).astype(np.float64),
        )

    def _precision_recall_f1(self) -> tuple[float | None, float | None, float | None]:
        tp, predicted, support = self._per_class()
        if self.problem == "binary":
            p, r = _ratio(tp[1], predicted[1]), _ratio(tp[1], support[1])
            if p is None or r is None:
                return p, r, None
            return p, r, 2 * p * r / (p + r) if p + r > 0 else 0.0
        present = support > 0
        if not present.any():
            return None, None, None
        precision = np.divide(tp, predicted, out=np.zeros_like(tp), where=predicted > 0)
        recall = tp / np.where(present, support, 1)
        f1 = np.divide(
            2 * precision * recall,
            precision + recall,
            out=np.zeros_like(tp),
            where=(precision + recall) > 0,
        )
        return (
            float(precision[present].mean()),
            float(recall[present].mean()),
            float(f1[present].mean()),
        )

    def result(self, names: Sequence[str]) -> dict[str, float | None]:
        """The metrics `names` (see eval_config.METRICS_BY_PROBLEM) as numbers, None where undefined."""
        n = self.weight_sum
        values: dict[str, float | None] = {
            "example_count": float(self.count),
            "weighted_example_count": n,
            "loss": _ratio(self.loss_sum, n),
        }
        if self.problem == "regression":
            mse = _ratio(self.sq_error, n)
            values.update(
                mse=mse,
                rmse=math.sqrt(mse) if mse is not None else None,
                mae=_ratio(self.abs_error, n),
                mean_label=_ratio(self.label_sum, n),
                mean_prediction=_ratio(self.prediction_sum, n),
            )
        else:
            precision, recall, f1 = self._precision_recall_f1()
            aucs = [_auc(h[0], h[1]) for h in self.histograms]
            aucs = [a for a in aucs if a is not None]
            values.update(
                accuracy=_ratio(float(np.trace(self.confusion)), n),
                precision=precision,
                recall=recall,
                f1=f1,
                auc=float(np.mean(aucs)) if aucs else None,
            )
        return {name: values[name] for name in names if name in values}

    def details(self) -> dict[str, Any]:
        """Per-class counts and the confusion matrix (classification; unweighted), for the report and the metrics
        file."""
        if self.problem == "regression":
            return {}
        return {
            "confusion_matrix": self.counts.tolist(),
            "label_counts": self.counts.sum(axis=1).tolist(),
            "prediction_counts": self.counts.sum(axis=0).tolist(),
        }


def _value_text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def slice_keys(values: Mapping[str, Sequence[Any]], specs: Sequence[Any]) -> list[SliceKey]:
    """The slices one example is in, each once: per spec (eval_config.SliceSpec), each combination of its values
    of the spec's features that has the spec's fixed values."""
    keys: dict[SliceKey, None] = {}
    for spec in specs:
        fixed = dict(spec.values)
        columns = sorted(spec.columns)
        lists = [
            [v for v in values.get(f) or () if f not in fixed or _value_text(v) == fixed[f]]
            for f in columns
        ]
        if all(lists):
            for combo in itertools.product(*lists):
                keys[
                    tuple(
                        (feature, _value_text(v)) for feature, v in zip(columns, combo, strict=True)
                    )
                ] = None
    return list(keys)


class CustomMetrics(Protocol):
    """Metrics computed outside this module (eval_keras_metrics.KerasMetrics): fed like an Accumulator."""

    def add(
        self, labels: np.ndarray, predictions: np.ndarray, weights: np.ndarray | None
    ) -> None: ...

    def result(self) -> dict[str, float | None]: ...


class SliceMetrics:
    """Every metric of one model on one slice: the built-in sums, the custom metrics (from `make_custom`), and
    the same again per bootstrap sample."""

    def __init__(
        self,
        problem: str,
        num_classes: int,
        make_custom: Callable[[], CustomMetrics] | None,
        samples: int,
    ):
        self.main = Accumulator(problem, num_classes)
        self.custom = make_custom() if make_custom else None
        self.samples = [
            (Accumulator(problem, num_classes), make_custom() if make_custom else None)
            for _ in range(samples)
        ]

    def add(
        self,
        labels: np.ndarray,
        predictions: np.ndarray,
        weights: np.ndarray | None,
        multiplicity: np.ndarray | None,
    ) -> None:
        """Add a batch; `multiplicity` is [samples, n], each example's count in each bootstrap sample."""
        self.main.add(labels, predictions, weights)
        if self.custom is not None:
            self.custom.add(labels, predictions, weights)
        for s, (acc, custom) in enumerate(self.samples):
            acc.add(labels, predictions, weights, multiplicity[s])
            if custom is not None:
                custom.add(
                    labels, predictions, multiplicity[s] * (1.0 if weights is None else weights)
                )

    @staticmethod
    def _merged(
        acc: Accumulator, custom: CustomMetrics | None, names: Sequence[str]
    ) -> dict[str, float | None]:
        values = {**acc.result(names), **(custom.result() if custom is not None else {})}
        return {name: values.get(name) for name in names}

    def result(self, names: Sequence[str]) -> dict[str, float | None]:
        """The metrics `names` (built-in or custom), in that order; None where undefined."""
        return self._merged(self.main, self.custom, names)

    def intervals(
        self, names: Sequence[str], level: float
    ) -> dict[str, dict[str, float] | None] | None:
        """Per metric, the bootstrap interval (eval_bootstrap.interval); None without bootstrap samples."""
        from generic_trainer.judge.eval_bootstrap import interval

        if not self.samples:
            return None
        results = [self._merged(acc, custom, names) for acc, custom in self.samples]
        return {name: interval([r[name] for r in results], level) for name in names}


class SlicedEvaluation:
    """One model's metrics: overall and per slice."""

    def __init__(
        self,
        problem: str,
        num_classes: int,
        specs: Sequence[Any],
        make_custom: Callable[[], CustomMetrics] | None = None,
        samples: int = 0,
    ):
        self.problem, self.num_classes, self.specs = problem, num_classes, list(specs)
        self.make_custom, self.num_samples = make_custom, samples
        self.overall = self._new()
        self.slices: dict[SliceKey, SliceMetrics] = {}
        self._per_spec: dict[tuple[str, ...], int] = {}
        self._warned: set[tuple[str, ...]] = set()

    def _new(self) -> SliceMetrics:
        return SliceMetrics(self.problem, self.num_classes, self.make_custom, self.num_samples)

    def _metrics(self, key: SliceKey) -> SliceMetrics | None:
        metrics = self.slices.get(key)
        if metrics is None:
            columns = tuple(f for f, _ in key)
            if self._per_spec.get(columns, 0) >= MAX_SLICES:
                if columns not in self._warned:
                    self._warned.add(columns)
                    log.warning(
                        "slice %s has more than %d values; further values are left out",
                        columns,
                        MAX_SLICES,
                    )
                return None
            self._per_spec[columns] = self._per_spec.get(columns, 0) + 1
            metrics = self.slices[key] = self._new()
        return metrics

    def add(
        self,
        labels: np.ndarray,
        predictions: np.ndarray,
        keys: Sequence[Iterable[SliceKey]],
        weights: np.ndarray | None = None,
        multiplicity: np.ndarray | None = None,
    ) -> None:
        """Add a batch; `keys[i]` are the slices of example i, `weights` [n] the example weights, `multiplicity`
        [samples, n] the bootstrap counts (when there are samples)."""
        self.overall.add(labels, predictions, weights, multiplicity)
        rows: dict[SliceKey, list[int]] = {}
        for i, example_keys in enumerate(keys):
            for key in example_keys:
                rows.setdefault(key, []).append(i)
        for key, index in rows.items():
            metrics = self._metrics(key)
            if metrics is not None:
                metrics.add(
                    labels[index],
                    predictions[index],
                    None if weights is None else weights[index],
                    None if multiplicity is None else multiplicity[:, index],
                )

    def sorted_slices(self) -> list[tuple[SliceKey, SliceMetrics]]:
        """Slices in the order of the specs, then by value."""

        def order(key: SliceKey) -> int:
            return next(
                (i for i, spec in enumerate(self.specs) if spec.matches(key)), len(self.specs)
            )

        return sorted(self.slices.items(), key=lambda kv: (order(kv[0]), kv[0]))
