"""TFX's BulkInferrer specs as plain values: ModelSpec (signatures, tags) and OutputExampleSpec
(which prediction goes to which feature of the output examples), read from their JSON.

The JSON is TFX's proto JSON (`json_format.MessageToJson` of `tfx.proto.ModelSpec` /
`OutputExampleSpec`: camelCase keys) or the field names of the .proto (snake_case); both are
taken, so a pipeline's `proto_utils.proto_to_json(spec)` is passed as it is. No TensorFlow here:
the specs are checked against the model's signatures by beam/bulk_inference.py.

TFX's defaults when no OutputExampleSpec is given are not TFX's (its BulkInferrer writes no
output examples then); here every prediction is added under the name TF Serving gives it:
`default_columns` (see its docstring).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from typing import Any

from generic_trainer.beam.beam_run import DataError
from generic_trainer.errors import UserInputError

MODEL_SPEC_INPUT = "--model-spec"
OUTPUT_SPEC_INPUT = "--output-example-spec"
KINDS = ("classify", "regress", "predict")


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """TFX's bulk_inferrer_pb2.ModelSpec: the signatures to run (none: serving_default) and the
    MetaGraph's tags (none: serve)."""

    signature_names: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Columns:
    """One OutputColumnsSpec: the features one signature's predictions become.

    kind "classify": `label_column`, `score_column` (either may be ""); "regress": `value_column`;
    "predict": `predict_columns`, (output key, feature name) pairs.
    """

    kind: str
    signature_name: str = ""  # "": the only signature run
    label_column: str = ""
    score_column: str = ""
    value_column: str = ""
    predict_columns: tuple[tuple[str, str], ...] = ()

    def names(self) -> tuple[str, ...]:
        """The feature names these columns add."""
        if self.kind == "predict":
            return tuple(column for _, column in self.predict_columns)
        names = (self.label_column, self.score_column, self.value_column)
        return tuple(n for n in names if n)


def _snake(key: str) -> str:
    return re.sub(r"([A-Z])", r"_\1", key).lower()


def _load(flag: str, value: Any, example: str) -> dict[str, Any]:
    """A JSON object (a str, or the dict KFP may pass) with snake_case keys at every level."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise UserInputError(
                flag, f"not valid JSON ({e.msg} at position {e.pos}); expected e.g. {example}"
            ) from None
    if not isinstance(value, Mapping):
        raise UserInputError(flag, f"expected a JSON object such as {example}, got {value!r}")

    def snake(item: Any) -> Any:
        if isinstance(item, Mapping):
            return {_snake(str(k)): snake(v) for k, v in item.items()}
        if isinstance(item, list):
            return [snake(v) for v in item]
        return item

    return snake(value)


def _strings(flag: str, field: str, value: Any) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) and v.strip() for v in items):
        raise UserInputError(flag, f"{field}: expected a list of names, got {value!r}")
    return tuple(v.strip() for v in items)


def _only(flag: str, where: str, body: Mapping[str, Any], known: tuple[str, ...]) -> None:
    unknown = sorted(set(body) - set(known))
    if unknown:
        raise UserInputError(
            flag, f"{where}: unknown field(s) {', '.join(unknown)}; known: {', '.join(known)}"
        )


def parse_model_spec(value: Any) -> ModelSpec:
    """TFX's ModelSpec from JSON (`{"model_signature_name": [...], "tag": [...]}`).

    Returns:
      The ModelSpec; an empty value is the defaults.
    """
    if value in (None, "", {}):
        return ModelSpec()
    body = _load(MODEL_SPEC_INPUT, value, '{"model_signature_name": ["serving_default"]}')
    _only(MODEL_SPEC_INPUT, "ModelSpec", body, ("model_signature_name", "tag"))
    names = _strings(MODEL_SPEC_INPUT, "model_signature_name", body.get("model_signature_name", []))
    tags = _strings(MODEL_SPEC_INPUT, "tag", body.get("tag", []))
    if len(set(names)) != len(names):
        raise UserInputError(MODEL_SPEC_INPUT, f"a signature name repeats: {', '.join(names)}")
    return ModelSpec(names, tags)


def _columns(index: int, body: Any) -> Columns:
    where = f"output_columns_spec[{index}]"
    if not isinstance(body, Mapping):
        raise UserInputError(OUTPUT_SPEC_INPUT, f"{where}: expected an object, got {body!r}")
    _only(OUTPUT_SPEC_INPUT, where, body, ("signature_name", *(f"{k}_output" for k in KINDS)))
    kinds = [k for k in KINDS if f"{k}_output" in body]
    if len(kinds) != 1:
        raise UserInputError(
            OUTPUT_SPEC_INPUT,
            f"{where}: expected exactly one of classify_output, regress_output, predict_output",
        )
    kind, out = kinds[0], body[f"{kinds[0]}_output"]
    if not isinstance(out, Mapping):
        raise UserInputError(OUTPUT_SPEC_INPUT, f"{where}.{kind}_output: expected an object")
    signature = str(body.get("signature_name") or "")
    fields = {
        "classify": ("label_column", "score_column"),
        "regress": ("value_column",),
        "predict": ("output_columns",),
    }[kind]
    _only(OUTPUT_SPEC_INPUT, f"{where}.{kind}_output", out, fields)
    if kind != "predict":
        names = {f: str(out.get(f) or "") for f in fields}
        return Columns(kind, signature, **names)
    pairs = []
    for col in out.get("output_columns") or []:
        if (
            not isinstance(col, Mapping)
            or not col.get("output_key")
            or not col.get("output_column")
        ):
            raise UserInputError(
                OUTPUT_SPEC_INPUT,
                f"{where}.predict_output.output_columns: expected "
                f'{{"output_key": ..., "output_column": ...}} objects, got {col!r}',
            )
        pairs.append((str(col["output_key"]), str(col["output_column"])))
    return Columns(kind, signature, predict_columns=tuple(pairs))


def parse_output_example_spec(value: Any) -> tuple[Columns, ...]:
    """TFX's OutputExampleSpec from JSON (`{"output_columns_spec": [...]}`).

    Returns:
      Its columns, in order; an empty value is () (the defaults of `default_columns`).
    """
    if value in (None, "", {}):
        return ()
    example = '{"output_columns_spec": [{"predict_output": {"output_columns": [...]}}]}'
    body = _load(OUTPUT_SPEC_INPUT, value, example)
    _only(OUTPUT_SPEC_INPUT, "OutputExampleSpec", body, ("output_columns_spec",))
    specs = body.get("output_columns_spec")
    if not isinstance(specs, list) or not specs:
        raise UserInputError(OUTPUT_SPEC_INPUT, f"output_columns_spec: expected a list: {example}")
    columns = tuple(_columns(i, spec) for i, spec in enumerate(specs))
    names = [n for c in columns for n in c.names()]
    if len(set(names)) != len(names):
        raise UserInputError(OUTPUT_SPEC_INPUT, f"a feature name repeats: {', '.join(names)}")
    return columns


# TF Serving's output names of classification and regression (tensorflow/serving's
# signature_constants: CLASSIFY_OUTPUT_CLASSES, CLASSIFY_OUTPUT_SCORES, REGRESS_OUTPUTS).
DEFAULT_NAMES = {"classify": ("classes", "scores"), "regress": ("outputs",)}


def default_columns(name: str, kind: str, outputs: tuple[str, ...], prefix: str) -> Columns:
    """The columns of a signature without a spec: a predict signature's outputs under their own
    keys, a classify signature's as `classes` and `scores`, a regress signature's as `outputs`;
    each name after `prefix` (the signature's name and "_" when several signatures run)."""
    if kind == "predict":
        return Columns(kind, name, predict_columns=tuple((k, prefix + k) for k in outputs))
    if kind == "classify":
        label, score = DEFAULT_NAMES["classify"]
        return Columns(kind, name, label_column=prefix + label, score_column=prefix + score)
    return Columns(kind, name, value_column=prefix + DEFAULT_NAMES["regress"][0])


def input_error(flag: str, message: str) -> DataError:
    """A DataError whose message starts with the input to blame (`flag_of` reads it back)."""
    return DataError(f"{flag} {message}")


def flag_of(message: str) -> tuple[str, str]:
    """(flag, message) of an `input_error` message (as beam_run.data_error_message
    finds it)."""
    message = re.sub(r"\s*\[while running '[^']*'\]$", "", message)  # Beam's step name
    flag, _, rest = message.partition(" ")
    return (flag, rest) if flag.startswith("--") else ("--examples", message)
