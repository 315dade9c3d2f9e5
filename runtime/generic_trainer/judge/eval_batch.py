"""The evaluator's reading of one batch: labels, example weights and slice features from the serialized
tf.Examples, labels as class indices or numbers, model outputs as probabilities, and the problem
(multiclass, binary, regression) inferred from the first batch. Errors name the eval_config key.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from generic_trainer.errors import UserInputError
from generic_trainer.judge.eval_config import EvalConfig

log = logging.getLogger(__name__)


def _values(feature: Any) -> list[Any]:
    kind = feature.WhichOneof("kind")
    return list(getattr(feature, kind).value) if kind else []


def _weight(feature_map: Any, key: str, index: int) -> float:
    values = _values(feature_map[key]) if key in feature_map else []
    if len(values) != 1 or isinstance(values[0], bytes):
        found = ", ".join(sorted(feature_map)) or "none"
        kind = "string " if values and isinstance(values[0], bytes) else ""
        raise UserInputError(
            "eval_config.example_weight_key",
            f"eval example #{index} has {len(values)} {kind}values "
            f"of {key!r}; expected exactly one number (its "
            f"features: {found})",
        )
    weight = float(values[0])
    if not weight >= 0:
        raise UserInputError(
            "eval_config.example_weight_key",
            f"eval example #{index} has weight {weight:g}; expected a number >= 0",
        )
    return weight


def read_batch(
    serialized: Sequence[bytes],
    config: EvalConfig,
    slice_features: Sequence[str],
    offset: int,
) -> tuple[list[Any], bool, list[dict[str, list[Any]]], Any]:
    """(label per example, whether the labels are floats, {feature: values} per example, the example weights
    as a numpy array or None without example_weight_key) from tf.Examples."""
    import numpy as np
    from tensorflow.core.example import example_pb2

    labels, is_float, features, weights = [], False, [], []
    key, weight_key = config.label_key, config.example_weight_key
    for i, record in enumerate(serialized):
        example = example_pb2.Example.FromString(record)
        feature_map = example.features.feature
        values = _values(feature_map[key]) if key in feature_map else []
        if len(values) != 1:
            found = ", ".join(sorted(feature_map)) or "none"
            raise UserInputError(
                "eval_config.label_key",
                f"eval example #{offset + i} has {len(values)} values of "
                f"{key!r}; expected exactly one (its features: {found})",
            )
        is_float = is_float or feature_map[key].WhichOneof("kind") == "float_list"
        labels.append(values[0])
        features.append({f: _values(feature_map[f]) for f in slice_features if f in feature_map})
        if weight_key:
            weights.append(_weight(feature_map, weight_key, offset + i))
    return labels, is_float, features, np.asarray(weights, dtype=np.float64) if weight_key else None


def label_array(
    labels: list[Any], problem: str, num_classes: int, config: EvalConfig, offset: int
) -> Any:
    """Labels as class indices (classification, through label_vocabulary for strings) or floats."""
    import numpy as np

    if labels and isinstance(labels[0], bytes):
        if problem == "regression" or not config.label_vocabulary:
            raise UserInputError(
                "eval_config.label_vocabulary",
                f"the labels are strings ({labels[0].decode(errors='replace')!r}); list the class "
                "names in label_vocabulary, in the order of the model's outputs",
            )
        index = {v: i for i, v in enumerate(config.label_vocabulary)}
        out = []
        for i, label in enumerate(labels):
            text = label.decode(errors="replace")
            if text not in index:
                raise UserInputError(
                    "eval_config.label_vocabulary",
                    f"eval example #{offset + i} has label {text!r}, not in label_vocabulary",
                )
            out.append(index[text])
        array = np.asarray(out, dtype=np.int64)
    else:
        array = np.asarray(labels, dtype=np.float64)
        if problem == "regression":
            return array
        if not np.all(array == np.round(array)):
            bad = array[array != np.round(array)][0]
            raise UserInputError(
                "eval_config.problem",
                f"label {bad:g} is not a class index; a {problem} model needs "
                "integer labels (use problem: regression for numbers)",
            )
        array = array.astype(np.int64)
    classes = 2 if problem == "binary" else num_classes
    bad = array[(array < 0) | (array >= classes)]
    if bad.size:
        what = (
            "0 or 1"
            if problem == "binary"
            else f"0..{classes - 1} (the model has {classes} outputs)"
        )
        raise UserInputError(
            "eval_config.label_key",
            f"label {int(bad[0])} is out of range: a {problem} label is {what}",
        )
    return array


def _softmax(x: Any) -> Any:
    import numpy as np

    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def predictions(raw: Any, problem: str, from_logits: bool) -> Any:
    """Model output -> what the accumulator takes: probabilities [n, classes], or values [n] (regression)."""
    import numpy as np

    raw = raw.astype(np.float64)
    if problem == "regression":
        return raw.reshape(-1)
    if problem == "binary":
        if raw.ndim == 2 and raw.shape[1] == 2:
            p = (_softmax(raw) if from_logits else raw)[:, 1]
        else:
            p = raw.reshape(-1)
            p = 1.0 / (1.0 + np.exp(-p)) if from_logits else p
        return np.stack([1.0 - p, p], axis=1)
    return _softmax(raw) if from_logits else raw


def infer_problem(
    config: EvalConfig, raw: Any, labels_are_float: bool, input_name: str
) -> tuple[str, int]:
    """(problem, classes) from the config, else from the output's width and the label type."""
    width = 1 if raw.ndim == 1 else int(raw.shape[1])
    problem = config.problem
    if problem is None:
        problem = "multiclass" if width > 1 else ("regression" if labels_are_float else "binary")
        log.info(
            "problem: %s (inferred: %d output column(s), %s labels); set eval_config.problem to choose",
            problem,
            width,
            "float" if labels_are_float else "integer",
        )
    if problem == "multiclass" and width < 2:
        raise UserInputError(
            "eval_config.problem",
            f"a multiclass model outputs one column per class; {input_name}'s output has {width}",
        )
    if problem == "binary" and width > 2:
        raise UserInputError(
            "eval_config.problem",
            f"a binary model outputs 1 probability (or 2 columns); "
            f"{input_name}'s output has {width} columns (multiclass?)",
        )
    if problem == "regression" and width != 1:
        raise UserInputError(
            "eval_config.problem",
            f"a regression model outputs one value; {input_name}'s output has {width} columns",
        )
    if (
        config.label_vocabulary
        and problem == "multiclass"
        and len(config.label_vocabulary) != width
    ):
        raise UserInputError(
            "eval_config.label_vocabulary",
            f"lists {len(config.label_vocabulary)} classes; the model outputs {width}",
        )
    return problem, (width if problem == "multiclass" else 2)
