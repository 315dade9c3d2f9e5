"""A PredictionLog back to its tf.Example with the predictions added as features (TFX's
BulkInferrer `output_examples`, named by its OutputExampleSpec).

As TFX converts: a classification adds the classes' labels (bytes) and scores (floats) of the
first classification; a regression its value; a predict output its tensor, squeezed to one
dimension at most (a scalar is one value); a feature's type follows its first value (bytes,
int64 or float). A multi-head model's results are matched to their columns by signature name.
A column named like a feature the example already has, or a predict output that is not 1-D once
squeezed, is bad input: a DataError naming it (TFX stops on an assertion there).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from generic_trainer.beam.infer_specs import OUTPUT_SPEC_INPUT, Columns, input_error

Values = list[Any]


def _error(message: str) -> Exception:
    return input_error(OUTPUT_SPEC_INPUT, message)


def _classes(classification_result: Any, columns: Columns) -> list[tuple[str, Values]]:
    classes = classification_result.classifications[0].classes
    added = []
    if columns.label_column:
        added.append((columns.label_column, [c.label for c in classes]))
    if columns.score_column:
        added.append((columns.score_column, [c.score for c in classes]))
    return added


def _predict_values(key: str, tensor: Any) -> Values:
    import numpy as np
    import tensorflow as tf

    values = np.squeeze(tf.make_ndarray(tensor))
    if values.ndim > 1:
        raise _error(
            f"output {key!r} has shape {list(values.shape)} per example; a feature holds a list "
            "(1-D once squeezed): map another output, or reshape it in the signature"
        )
    return values.tolist() if values.ndim == 1 else [values.item()]


def _predictions(log: Any, by_signature: Mapping[str, Columns]) -> tuple[Any, list]:
    """(the example, [(feature, values), ...]) of one PredictionLog."""
    from tensorflow.core.example import example_pb2

    kind = log.WhichOneof("log_type")
    example = example_pb2.Example()
    if kind == "predict_log":
        request = log.predict_log.request
        example.ParseFromString(next(iter(request.inputs.values())).string_val[0])
        columns = by_signature[request.model_spec.signature_name]
        outputs = log.predict_log.response.outputs
        return example, [(c, _predict_values(k, outputs[k])) for k, c in columns.predict_columns]
    body = getattr(log, kind)
    example.CopyFrom(body.request.input.example_list.examples[0])
    if kind == "classify_log":
        (columns,) = by_signature.values()
        return example, _classes(body.response.result, columns)
    if kind == "regress_log":
        (columns,) = by_signature.values()
        return example, [(columns.value_column, [body.response.result.regressions[0].value])]
    added = []
    for result in body.response.results:  # multi_inference_log
        columns = by_signature[result.model_spec.signature_name]
        if result.HasField("classification_result"):
            added += _classes(result.classification_result, columns)
        else:
            added.append((columns.value_column, [result.regression_result.regressions[0].value]))
    return example, added


def _add(example: Any, name: str, values: Values) -> None:
    feature = example.features.feature
    if name in feature:
        raise _error(
            f"the examples already have a feature {name!r}; name the prediction's column "
            "otherwise (--output-example-spec)"
        )
    first = values[0] if values else 0.0
    if isinstance(first, (str, bytes)):
        feature[name].bytes_list.value[:] = [
            v.encode() if isinstance(v, str) else v for v in values
        ]
    elif isinstance(first, int):
        feature[name].int64_list.value[:] = values
    else:
        feature[name].float_list.value[:] = values


def to_example(log: Any, columns: Sequence[Columns]) -> bytes:
    """The serialized tf.Example of PredictionLog `log` with its predictions added per `columns`
    (infer_model.output_columns: each with its signature's name)."""
    example, added = _predictions(log, {c.signature_name: c for c in columns})
    for name, values in added:
        _add(example, name, values)
    return example.SerializeToString()
