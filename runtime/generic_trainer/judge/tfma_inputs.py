"""Whether TFMA can feed a model's signature, checked before TFMA runs (evaluation process).

A signature that takes serialized tf.Examples (one string input that names no feature) TFMA feeds
the records as they are. Any other signature (a Keras `model.export()`, a Keras model with named
inputs, the Task API's default export) TFMA feeds by name, as its ModelSignaturesDoFn does:

- each input takes the feature of its name (or of its name without Keras' `_input` suffix);
- TFMA does not cast: the input's dtype must be the feature's as TFMA reads it (INT: int64, FLOAT:
  float32, BYTES: string);
- TFMA reshapes a dense feature to the input's shape, the batch kept: the input needs a batch
  dimension and at most one unknown dimension besides it; a fixed-shape schema feature must hold
  as many values as the input takes per example.

An input that breaks a rule is a UserInputError naming the model, the signature, the input and the
features (exit 2), instead of TFMA's error from deep inside its pipeline. Models given by the module
file's `custom_eval_shared_model`, and model specs with `preprocessing_function_names` (their inputs
may come from the preprocessing), are left to TFMA.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from typing import Any

from generic_trainer.errors import UserInputError
from generic_trainer.judge.signature_feed import Feature, describe_features

TFMA_DTYPES = {"INT": "int64", "FLOAT": "float32", "BYTES": "string"}
KERAS_INPUT_SUFFIX = "_input"  # tfma.utils.model_util.KERAS_INPUT_SUFFIX


def signature_inputs(model_path: str, name: str) -> dict[str, tuple[str, list[int] | None]] | None:
    """{input: (dtype name, shape or None)} of signature `name` in saved_model.pb; None when the
    SavedModel or the signature is not there (TFMA then reports what it finds)."""
    import tensorflow as tf
    from tensorflow.core.protobuf import saved_model_pb2

    path = os.path.join(model_path, "saved_model.pb")
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        saved = saved_model_pb2.SavedModel.FromString(f.read())
    for graph in saved.meta_graphs:
        if name in graph.signature_def:
            inputs = graph.signature_def[name].inputs
            return {
                key: (
                    tf.dtypes.as_dtype(info.dtype).name,
                    None
                    if info.tensor_shape.unknown_rank
                    else [d.size for d in info.tensor_shape.dim],
                )
                for key, info in inputs.items()
            }
    return None


def takes_examples(inputs: Mapping[str, tuple[str, list[int] | None]], features: Any) -> bool:
    """Whether TFMA feeds serialized tf.Examples: one string input that names no feature."""
    if len(inputs) != 1:
        return False
    [(name, (dtype, _))] = inputs.items()
    return dtype == "string" and _feature_name(name, features) is None


def _feature_name(name: str, features: Any) -> str | None:
    if name in features:
        return name
    bare = name[: -len(KERAS_INPUT_SUFFIX)] if name.endswith(KERAS_INPUT_SUFFIX) else None
    return bare if bare and bare in features else None


def input_problem(dtype: str, shape: list[int] | None, feature: Feature) -> str:
    """What keeps TFMA from feeding `feature` to an input (dtype, shape); "" when nothing does."""
    wanted = TFMA_DTYPES.get(feature.kind)
    if dtype != wanted:
        return (
            f"is {dtype}, but TFMA feeds the {feature.kind} feature as {wanted or 'nothing'} and "
            "does not cast: take that dtype and cast inside the model"
        )
    if shape is None:  # unknown rank: TFMA feeds the feature as it reads it
        return ""
    if not shape:
        return "has no batch dimension (TFMA feeds a batch of examples)"
    inner = shape[1:]
    if sum(d < 0 for d in inner) > 1:
        return "has more than one unknown dimension besides the batch: TFMA cannot reshape to it"
    size = math.prod(d for d in inner if d >= 0)
    if feature.size is not None and all(d >= 0 for d in inner) and size != feature.size:
        return f"takes {size} value(s) per example; the feature holds {feature.size}"
    return ""


def _describe(dtype: str, shape: list[int] | None) -> str:
    dims = "[?]" if shape is None else str([None if d < 0 else d for d in shape])
    return f"{dtype}{dims}"


def check_model(
    flag: str, path: str, signature: str, features: Callable[[], tuple[dict[str, Feature], str]]
) -> None:
    """Refuse, naming the input, a signature TFMA cannot feed from the examples' features.

    Args:
      flag: the model's input (--model, --baseline-model).
      path: its SavedModel dir.
      signature: the signature TFMA calls.
      features: () -> (the examples' features, where they were read), called when needed.
    """
    inputs = signature_inputs(path, signature)
    if not inputs:
        return
    known, source = features()
    if takes_examples(inputs, known):
        return
    for name, (dtype, shape) in sorted(inputs.items()):
        feature = _feature_name(name, known)
        problem = (
            input_problem(dtype, shape, known[feature])
            if feature
            else "matches no feature of the examples (TFMA feeds inputs by feature name)"
        )
        if problem:
            raise UserInputError(
                flag,
                f"TFMA cannot feed {signature} of {path}: input {name!r} "
                f"({_describe(dtype, shape)}) {problem}; features ({source}): "
                f"{describe_features(known)}. Export a {signature} that takes serialized "
                "tf.Examples, or name and type each input after the feature it takes",
            )


def check(
    config: Any,
    paths: Mapping[bool, str],
    features: Callable[[], tuple[dict[str, Feature], str]],
) -> None:
    """check_model for every model spec of `config` TFMA feeds from the examples directly.

    Args:
      config: the prepared EvalConfig.
      paths: the serving model dir by `is_baseline`.
      features: as for check_model.
    """
    for spec in config.model_specs:
        if spec.preprocessing_function_names or spec.is_baseline not in paths:
            continue
        flag = "--baseline-model" if spec.is_baseline else "--model"
        check_model(
            flag, paths[spec.is_baseline], spec.signature_name or "serving_default", features
        )
