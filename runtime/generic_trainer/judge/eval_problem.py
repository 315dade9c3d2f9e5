"""The kind of model the short eval config judges, when it does not say: from the model and a label.

multiclass when the served output has more than one column; else regression when the first eval
example's label is a float list, binary otherwise (as the short form always inferred it). String
labels need `label_vocabulary`, one name per class (tfma_labels.py hands it to TFMA).
"""

from __future__ import annotations

import logging
from typing import Any

from generic_trainer.errors import UserInputError

log = logging.getLogger(__name__)


def output_width(serving_path: str, prediction_key: str | None) -> int:
    """The last dimension of serving_default's output (`prediction_key`, or its only one)."""
    import tensorflow as tf

    signature = tf.saved_model.load(serving_path).signatures.get("serving_default")
    if signature is None:
        raise UserInputError("--model", f"{serving_path} has no serving_default signature")
    outputs = signature.structured_outputs
    if prediction_key:
        if prediction_key not in outputs:
            raise UserInputError(
                "eval_config.prediction_key",
                f"{prediction_key!r} is not an output of serving_default; outputs: "
                f"{', '.join(sorted(outputs))}",
            )
        spec = outputs[prediction_key]
    elif len(outputs) == 1:
        [spec] = outputs.values()
    else:
        raise UserInputError(
            "eval_config.prediction_key",
            f"serving_default has several outputs ({', '.join(sorted(outputs))}); name one",
        )
    shape = spec.shape
    return 1 if shape.rank is None or shape.rank < 2 else int(shape[-1] or 1)


def label_kind(first_record: bytes, label_key: str) -> str:
    """The kind of the label of a serialized tf.Example: int64_list, float_list or bytes_list."""
    import tensorflow as tf

    example = tf.train.Example.FromString(first_record)
    if label_key not in example.features.feature:
        raise UserInputError(
            "eval_config.label_key",
            f"{label_key!r} is not a feature of the eval examples; features: "
            f"{', '.join(sorted(example.features.feature))}",
        )
    return example.features.feature[label_key].WhichOneof("kind") or "int64_list"


def check_vocabulary(config: Any, kind: str, width: int) -> None:
    """String labels need `label_vocabulary` (one class name per output column), and only they."""
    vocabulary = config.label_vocabulary
    key = "eval_config.label_vocabulary"
    if kind == "bytes_list" and not vocabulary:
        raise UserInputError(
            key,
            f"the label {config.label_key!r} holds strings; give the class names in class-id "
            'order (the model\'s output columns), e.g. "label_vocabulary": ["Adelie", "Gentoo"]',
        )
    if kind != "bytes_list" and vocabulary:
        raise UserInputError(
            key, f"maps string labels to class ids; the label {config.label_key!r} holds numbers"
        )
    if vocabulary and width > 1 and len(vocabulary) != width:
        raise UserInputError(
            key, f"names {len(vocabulary)} classes; the model outputs {width} columns (one a class)"
        )


def infer(config: Any, serving_path: str, first_record: bytes) -> tuple[str, int]:
    """(problem, output width) of the short form `config` for this model."""
    width = output_width(serving_path, config.prediction_key)
    kind = label_kind(first_record, config.label_key)
    check_vocabulary(config, kind, width)
    problem = config.problem
    if problem is None:
        floats = kind == "float_list"
        problem = "multiclass" if width > 1 else ("regression" if floats else "binary")
        log.info(
            "problem: %s (inferred: %d output column(s), %s labels); set eval_config.problem "
            "to choose",
            problem,
            width,
            {"float_list": "float", "bytes_list": "string"}.get(kind, "integer"),
        )
    if problem == "binary" and len(config.label_vocabulary or ("", "")) != 2:
        raise UserInputError(
            "eval_config.label_vocabulary",
            f"a binary label has 2 classes; {len(config.label_vocabulary)} given",
        )
    if problem == "multiclass" and width < 2:
        raise UserInputError(
            "eval_config.problem",
            f"a multiclass model outputs one column per class; this one outputs {width}",
        )
    if problem != "multiclass" and width > 1:
        raise UserInputError(
            "eval_config.problem",
            f"a {problem} model outputs one column; this one outputs {width} (multiclass?)",
        )
    return problem, width
