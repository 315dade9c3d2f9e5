"""What bulk inference runs of a SavedModel: its signatures, read and checked before any pipeline
starts, and the output columns each one's predictions become.

The rules are those of tfx_bsl's RunInference (TFX's BulkInferrer engine): one signature may
classify, regress or predict; several (a multi-head model) must each classify or regress; every
signature run takes one string input (the serialized tf.Example), and all of them the same one.
A model that breaks a rule is bad input (UserInputError naming --model or --model-spec), said
before anything is written, rather than tfx_bsl's error from inside the pipeline.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any

from generic_trainer.beam.infer_specs import (
    MODEL_SPEC_INPUT,
    OUTPUT_SPEC_INPUT,
    Columns,
    ModelSpec,
    default_columns,
)
from generic_trainer.errors import UserInputError

DEFAULT_SIGNATURE = "serving_default"
DEFAULT_TAGS = ("serve",)
METHODS = {
    "tensorflow/serving/classify": "classify",
    "tensorflow/serving/regress": "regress",
    "tensorflow/serving/predict": "predict",
}


@dataclasses.dataclass(frozen=True)
class Signature:
    """A signature bulk inference runs: its name, kind (classify|regress|predict), its input's
    key and its outputs' keys."""

    name: str
    kind: str
    input_key: str
    outputs: tuple[str, ...]


def _saved_model(model_path: str) -> Any:
    from google.protobuf import text_format
    from tensorflow.core.protobuf import saved_model_pb2

    binary = os.path.join(model_path, "saved_model.pb")
    try:
        if os.path.isfile(binary):
            with open(binary, "rb") as f:
                return saved_model_pb2.SavedModel.FromString(f.read())
        with open(os.path.join(model_path, "saved_model.pbtxt"), encoding="utf-8") as f:
            return text_format.Parse(f.read(), saved_model_pb2.SavedModel())
    except Exception as e:  # a damaged file: protobuf's DecodeError, text_format's ParseError
        raise UserInputError(
            "--model", f"{model_path} is not a readable SavedModel: {type(e).__name__}: {e}"
        ) from None


def _meta_graph(saved_model: Any, model_path: str, tags: Sequence[str]) -> Any:
    for graph in saved_model.meta_graphs:
        if set(graph.meta_info_def.tags) == set(tags):
            return graph
    found = [sorted(g.meta_info_def.tags) for g in saved_model.meta_graphs]
    raise UserInputError(
        MODEL_SPEC_INPUT,
        f"{model_path} has no MetaGraph tagged {sorted(tags)}; it has {found} (give its tags "
        'as {"tag": [...]})',
    )


def _signature(graph: Any, name: str, model_path: str, spec: ModelSpec) -> Signature:
    flag = MODEL_SPEC_INPUT if spec.signature_names else "--model"
    usable = sorted(k for k in graph.signature_def if not k.startswith("__"))
    if name not in graph.signature_def:
        raise UserInputError(
            flag, f"{model_path} has no signature {name!r}; it has {', '.join(usable) or 'none'}"
        )
    definition = graph.signature_def[name]
    inputs = {k: v.dtype for k, v in definition.inputs.items()}
    string = 7  # tensorflow's DT_STRING
    if len(inputs) != 1 or next(iter(inputs.values())) != string:
        raise UserInputError(
            flag,
            f"signature {name!r} of {model_path} takes inputs {sorted(inputs)}; bulk inference "
            "feeds each example as one serialized tf.Example: export a signature with a single "
            "string input (as TFX's BulkInferrer needs), e.g. tf.function(input_signature="
            "[tf.TensorSpec([None], tf.string)]) parsing it with tf.io.parse_example",
        )
    kind = METHODS.get(definition.method_name)
    if kind is None:
        raise UserInputError(
            flag,
            f"signature {name!r} has method {definition.method_name!r}; expected one of "
            f"{', '.join(METHODS)}",
        )
    return Signature(name, kind, next(iter(inputs)), tuple(sorted(definition.outputs)))


def read_signatures(model_path: str, spec: ModelSpec) -> tuple[Signature, ...]:
    """The signatures `spec` names (default serving_default) of the SavedModel at `model_path`.

    Raises:
      UserInputError: the model, a MetaGraph of the tags or a signature is missing or unfit.
    """
    graph = _meta_graph(_saved_model(model_path), model_path, spec.tags or DEFAULT_TAGS)
    names = spec.signature_names or (DEFAULT_SIGNATURE,)
    signatures = tuple(_signature(graph, n, model_path, spec) for n in names)
    if len(signatures) > 1:
        wrong = [s.name for s in signatures if s.kind == "predict"]
        if wrong:
            raise UserInputError(
                MODEL_SPEC_INPUT,
                f"several signatures run as one multi-head model must classify or regress; "
                f"{', '.join(wrong)} predict(s): run one predict signature at a time",
            )
        if len({s.input_key for s in signatures}) != 1:
            raise UserInputError(
                MODEL_SPEC_INPUT, "the signatures run together must share their one input"
            )
    return signatures


def _match(columns: Columns, signature: Signature) -> Columns:
    if columns.kind != signature.kind:
        raise UserInputError(
            OUTPUT_SPEC_INPUT,
            f"signature {signature.name!r} has kind {signature.kind}, so its columns need a "
            f"{signature.kind}_output, not a {columns.kind}_output",
        )
    missing = [k for k, _ in columns.predict_columns if k not in signature.outputs]
    if missing:
        raise UserInputError(
            OUTPUT_SPEC_INPUT,
            f"signature {signature.name!r} has no output {', '.join(map(repr, missing))}; its "
            f"outputs: {', '.join(signature.outputs)}",
        )
    return dataclasses.replace(columns, signature_name=signature.name)


def output_columns(
    given: tuple[Columns, ...], signatures: tuple[Signature, ...]
) -> tuple[Columns, ...]:
    """The columns of each signature, in the signatures' order: `given` (TFX's OutputExampleSpec)
    checked against them, or the defaults (infer_specs.default_columns) when none is given."""
    if not given:
        prefix = len(signatures) > 1
        return tuple(
            default_columns(s.name, s.kind, s.outputs, f"{s.name}_" if prefix else "")
            for s in signatures
        )
    if len(signatures) == 1:
        if len(given) != 1:
            raise UserInputError(
                OUTPUT_SPEC_INPUT,
                f"one signature runs, so output_columns_spec holds one entry, not {len(given)}",
            )
        return (_match(given[0], signatures[0]),)
    by_name = {c.signature_name or DEFAULT_SIGNATURE: c for c in given}
    names = [s.name for s in signatures]
    if sorted(by_name) != sorted(names) or len(by_name) != len(given):
        raise UserInputError(
            OUTPUT_SPEC_INPUT,
            f"expected one output_columns_spec entry per signature run ({', '.join(names)}), "
            f"each with its signature_name; got {', '.join(sorted(by_name))}",
        )
    return tuple(_match(by_name[s.name], s) for s in signatures)
