"""The kind of model the short eval config judges, when it does not say: from the model and a label.

multiclass when the served output has more than one column; else regression when the first eval
example's label is a float list, binary otherwise (as the short form always inferred it).
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


def label_is_float(first_record: bytes, label_key: str) -> bool:
    """Whether the label of a serialized tf.Example is a float list."""
    import tensorflow as tf

    example = tf.train.Example.FromString(first_record)
    if label_key not in example.features.feature:
        raise UserInputError(
            "eval_config.label_key",
            f"{label_key!r} is not a feature of the eval examples; features: "
            f"{', '.join(sorted(example.features.feature))}",
        )
    return example.features.feature[label_key].WhichOneof("kind") == "float_list"


def infer(config: Any, serving_path: str, first_record: bytes) -> tuple[str, int]:
    """(problem, output width) of the short form `config` for this model."""
    width = output_width(serving_path, config.prediction_key)
    problem = config.problem
    if problem is None:
        floats = label_is_float(first_record, config.label_key)
        problem = "multiclass" if width > 1 else ("regression" if floats else "binary")
        log.info(
            "problem: %s (inferred: %d output column(s), %s labels); set eval_config.problem "
            "to choose",
            problem,
            width,
            "float" if floats else "integer",
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
