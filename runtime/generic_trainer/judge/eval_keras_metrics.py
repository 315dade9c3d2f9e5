"""Custom evaluator metrics: any Keras metric class, named by import path with its constructor config
(`{"class_name": "keras.metrics.AUC", "config": {"num_thresholds": 1000}}`), computed streaming: one
instance per model, slice and bootstrap sample, fed batch by batch with `update_state`.

What a metric is fed (`y_true`, `y_pred`, `sample_weight` = the example weights):
- binary: the label 0/1 [n, 1] and the probability of the positive class [n, 1];
- multiclass: the one-hot label [n, classes] and the probabilities [n, classes];
- regression: the label [n, 1] and the prediction [n, 1];
- a metric whose class name starts with `Sparse` (SparseCategoricalAccuracy, ...) gets the class index
  [n, 1] and the probabilities [n, classes] (binary: two columns) instead.
The probabilities are the ones the built-in metrics see (after `from_logits`' softmax / sigmoid). A metric
must give a scalar result. Errors (a class that does not import, is not a Keras metric, a bad config, a
non-scalar result) name the metric's `eval_config.metrics` entry. TensorFlow/Keras are imported here only.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from generic_trainer.errors import UserInputError


def _key(name: str) -> str:
    return f"eval_config.metrics.{name}"


def resolve(class_path: str, name: str) -> Any:
    """The class at `class_path` (`keras.metrics.AUC`, `tensorflow.keras.metrics.Precision`, `mypkg.m.MyMetric`)."""
    parts = class_path.split(".")
    module, i = None, len(parts) - 1
    while i > 0 and module is None:  # the longest importable prefix, then attributes
        try:
            module = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            i -= 1
    if module is None:
        raise UserInputError(_key(name), f"{class_path}: no module of it can be imported")
    obj = module
    for attr in parts[i:]:
        if not hasattr(obj, attr):
            raise UserInputError(_key(name), f"{class_path}: {'.'.join(parts[:i])} has no {attr!r}")
        obj = getattr(obj, attr)
        i += 1
    import keras

    if not isinstance(obj, type) or not issubclass(obj, keras.metrics.Metric):
        raise UserInputError(
            _key(name), f"{class_path} is not a Keras metric class (a keras.metrics.Metric)"
        )
    return obj


class KerasMetrics:
    """Instances of the custom metrics for one model on one slice (the eval_metrics.CustomMetrics protocol)."""

    def __init__(self, specs: Sequence[Any], problem: str, num_classes: int):
        self.problem, self.num_classes = problem, num_classes
        self.metrics = []
        for spec in specs:
            cls = resolve(spec.class_path, spec.name)
            try:
                metric = cls(**spec.config)
            except Exception as e:
                raise UserInputError(
                    _key(spec.name),
                    f"{spec.class_path}(**{spec.config}) failed: {type(e).__name__}: {e}",
                ) from e
            self.metrics.append((spec, metric, cls.__name__.startswith("Sparse")))

    def _inputs(
        self, labels: np.ndarray, predictions: np.ndarray, sparse: bool
    ) -> tuple[np.ndarray, np.ndarray]:
        if self.problem == "regression":
            return labels.reshape(-1, 1).astype(np.float32), predictions.reshape(-1, 1).astype(
                np.float32
            )
        if sparse:
            return labels.reshape(-1, 1), predictions.astype(np.float32)
        if self.problem == "binary":
            return labels.reshape(-1, 1).astype(np.float32), predictions[:, 1:2].astype(np.float32)
        return np.eye(self.num_classes, dtype=np.float32)[labels], predictions.astype(np.float32)

    def add(self, labels: np.ndarray, predictions: np.ndarray, weights: np.ndarray | None) -> None:
        """Feed a batch (labels and predictions as eval_metrics.Accumulator takes them) to every metric."""
        if not len(labels):
            return
        for spec, metric, sparse in self.metrics:
            y_true, y_pred = self._inputs(labels, predictions, sparse)
            try:
                metric.update_state(
                    y_true,
                    y_pred,
                    sample_weight=None
                    if weights is None
                    else np.asarray(weights, dtype=np.float32),
                )
            except Exception as e:
                raise UserInputError(
                    _key(spec.name),
                    f"{spec.class_path}.update_state failed on y_true "
                    f"{list(y_true.shape)}, y_pred {list(y_pred.shape)}: "
                    f"{type(e).__name__}: {str(e)[:400]}",
                ) from e

    def result(self) -> dict[str, float | None]:
        """{name: scalar value}; None where the value is not finite (no data)."""
        out: dict[str, float | None] = {}
        for spec, metric, _ in self.metrics:
            value = np.asarray(metric.result())
            if value.size != 1:
                raise UserInputError(
                    _key(spec.name),
                    f"{spec.class_path} gives a result of shape {list(value.shape)};"
                    " the evaluator needs a scalar (e.g. set average= or class_id=)",
                )
            number = float(value.reshape(()))
            out[spec.name] = number if np.isfinite(number) else None
        return out
