"""Calling a SavedModel's `serving_default` with tf.Examples, as infra-validate's probe does.

(evaluate is TFMA's pipeline, which feeds a signature itself: tfma_inputs.py checks that it can.)
A serving signature takes either

- serialized tf.Examples: one 1-D string input, fed the records as they are (TFX's convention); or
- tensors (what `model.export()` and the Task API's default export write): every input is matched by
  name to a feature of the examples, and each batch of records is parsed into tensors of the input's
  dtype and shape. The features are described by the schema when one is given (`--schema`), else by
  the first eval example. Rules (per input, the batch dimension first):
  - the feature's type must suit the input's dtype: INT -> an integer or float dtype, FLOAT -> a
    float dtype, BYTES -> string (values are cast);
  - a fully known shape `[None, d1, ...]` takes exactly d1 x ... values per example (reshaped; a
    schema feature with a fixed shape must hold that many); `[None, None]` takes a variable-length
    list, padded with 0 or "" to the longest of the batch; other unknown dimensions cannot be fed.
  An input no feature matches, or matches with the wrong type or size, is a UserInputError naming
  the input, what it expected and the features available (exit 2).

`SignatureFeed` builds the inputs of one signature from records (the probe loads the model itself,
since a model that does not load is a verdict there). `warmup_record` turns records into a TF
Serving warm-up request (a serialized `PredictionLog` holding a `PredictRequest` in the signature's
input form, as TFX's InfraValidator writes them) and `replay` calls the signature with one, as TF
Serving does at load time. TensorFlow is imported inside the functions.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from generic_trainer.errors import UserInputError

SIGNATURE = "serving_default"
_INTEGER = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
_FLOAT = ("float16", "bfloat16", "float32", "float64")
_SUITS = {"INT": _INTEGER + _FLOAT, "FLOAT": _FLOAT, "BYTES": ("string",)}


@dataclasses.dataclass(frozen=True)
class Feature:
    """A feature of the examples: its type (INT, FLOAT or BYTES) and values per example when
    fixed."""

    kind: str
    size: int | None = None


def describe_specs(specs: Mapping[str, Any]) -> str:
    """`{examples: string[None]}` for a dict of TensorSpecs."""
    return "{" + ", ".join(f"{k}: {describe_spec(v)}" for k, v in specs.items()) + "}"


def describe_spec(spec: Any) -> str:
    """`float32[None, 4]` for a TensorSpec."""
    return f"{spec.dtype.name}{spec.shape.as_list() if spec.shape.rank is not None else '[?]'}"


def takes_examples(specs: Mapping[str, Any]) -> bool:
    """Whether a signature's inputs are one 1-D (or unknown-rank) string tensor: serialized
    tf.Examples."""
    if len(specs) != 1:
        return False
    spec = next(iter(specs.values()))
    return spec.dtype.name == "string" and spec.shape.rank in (None, 1)


def schema_features(schema_path: str) -> dict[str, Feature]:
    """The features of a tensorflow-metadata Schema (a file or a dir holding one)."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    from generic_trainer.records import schemas

    features = {}
    for f in schemas.load_schema(schema_path).feature:
        kind = schema_pb2.FeatureType.Name(f.type)
        size = math.prod(d.size for d in f.shape.dim) if f.HasField("shape") else None
        features[f.name] = Feature(kind, size)
    return features


def example_features(record: bytes) -> dict[str, Feature]:
    """The features of one serialized tf.Example (their sizes are not taken as fixed)."""
    from tensorflow.core.example import example_pb2

    kinds = {"int64_list": "INT", "float_list": "FLOAT", "bytes_list": "BYTES"}
    example = example_pb2.Example.FromString(record)
    return {
        name: Feature(kinds.get(value.WhichOneof("kind") or "", "UNKNOWN"))
        for name, value in example.features.feature.items()
    }


def describe_features(features: Mapping[str, Feature]) -> str:
    """`a (FLOAT[1]), s (BYTES)`: the features available, for an error message."""
    text = ", ".join(
        f"{n} ({f.kind}{'' if f.size is None else f'[{f.size}]'})"
        for n, f in sorted(features.items())
    )
    return text or "none"


def _parse_feature(name: str, spec: Any, feature: Feature) -> tuple[str, Any]:
    """(what keeps `feature` from feeding input `spec`, or "", and its tf.io parse spec)."""
    import tensorflow as tf

    if spec.dtype.name not in _SUITS.get(feature.kind, ()):
        return f"cannot take feature {name!r} of type {feature.kind}", None
    if spec.shape.rank is None or spec.shape.rank == 0:
        return "has no batch dimension (a known rank of at least 1 is needed)", None
    per_example = spec.shape.as_list()[1:]
    dtype = {"INT": tf.int64, "FLOAT": tf.float32, "BYTES": tf.string}[feature.kind]
    if all(d is not None for d in per_example):
        size = math.prod(per_example)
        if feature.size is not None and feature.size != size:
            return f"takes {size} value(s) per example; feature {name!r} has {feature.size}", None
        return "", tf.io.FixedLenFeature([size], dtype)
    if len(per_example) == 1:
        if feature.size is not None:
            return "", tf.io.FixedLenFeature([feature.size], dtype)
        return "", tf.io.VarLenFeature(dtype)
    return (
        "has unknown dimensions besides the batch and a list: it cannot be fed from a tf.Example "
        "feature",
        None,
    )


class SignatureFeed:
    """The inputs of one signature, from a batch of serialized tf.Examples (see the module
    docstring)."""

    def __init__(self, fn: Any, input_name: str, schema_path: str | None = None):
        self.fn = fn
        self.input_name = input_name
        self.specs = dict(fn.structured_input_signature[1])
        self.schema_path = schema_path
        self.examples = takes_examples(self.specs)
        self._parse: dict[str, tuple[Any, Any]] | None = None  # input -> (parse feature, spec)
        if not self.examples and schema_path:
            self._plan(schema_features(schema_path), f"in the schema {schema_path}")

    def describe(self) -> str:
        """How the signature is fed, for the log."""
        if self.examples:
            return f"serialized tf.Examples ({next(iter(self.specs))})"
        return (
            "tensors " + describe_specs(self.specs) + " parsed from the features of the same names"
        )

    def _plan(self, features: Mapping[str, Feature], source: str) -> None:
        available = describe_features(features)

        def fail(name: str, spec: Any, problem: str) -> UserInputError:
            return UserInputError(
                self.input_name,
                f"{SIGNATURE} input {name!r} ({describe_spec(spec)}) {problem}; "
                f"features ({source}): {available}. Name each model input after "
                "the feature it takes (e.g. keras.Input(name=...)), or export a "
                f"{SIGNATURE} that takes serialized tf.Examples",
            )

        plan = {}
        for name, spec in sorted(self.specs.items()):
            feature = features.get(name)
            if feature is None:
                raise fail(name, spec, "matches no feature of the examples")
            problem, parse = _parse_feature(name, spec, feature)
            if problem:
                raise fail(name, spec, problem)
            plan[name] = (parse, spec)
        self._parse = plan

    def inputs(self, serialized: Any) -> dict[str, Any]:
        """The signature's keyword arguments for a batch of serialized tf.Examples (a list or a
        string tensor)."""
        import tensorflow as tf

        batch = tf.convert_to_tensor(serialized, dtype=tf.string)
        if self.examples:
            return {next(iter(self.specs)): batch}
        if self._parse is None:
            first = batch[0].numpy() if batch.shape[0] else b""
            self._plan(example_features(first), "in the first eval example")
        assert self._parse is not None
        try:
            parsed = tf.io.parse_example(
                batch, {name: parse for name, (parse, _) in self._parse.items()}
            )
        except (tf.errors.InvalidArgumentError, ValueError) as e:
            from generic_trainer.judge.sandbox_outcome import compact_error

            raise UserInputError(
                self.input_name,
                f"the eval examples do not fit {SIGNATURE}'s inputs "
                f"{describe_specs(self.specs)}: {compact_error(e)}",
            ) from e
        fed = {}
        for name, (_, spec) in self._parse.items():
            value = parsed[name]
            if isinstance(value, tf.SparseTensor):
                value = tf.sparse.to_dense(value)  # [n, longest list]
            per_example = spec.shape.as_list()[1:]
            if all(d is not None for d in per_example):
                value = tf.reshape(value, [-1, *per_example])
            fed[name] = tf.cast(value, spec.dtype)
        return fed

    def __call__(self, serialized: Any) -> dict[str, Any]:
        """The signature's outputs for a batch of serialized tf.Examples."""
        return self.fn(**self.inputs(serialized))

    def warmup_record(self, serialized: Sequence[bytes]) -> bytes:
        """A serialized TF Serving `PredictionLog` (a PredictRequest to serving_default) of these
        examples."""
        import tensorflow as tf
        from tensorflow_serving.apis import predict_pb2, prediction_log_pb2

        request = predict_pb2.PredictRequest()
        request.model_spec.signature_name = SIGNATURE
        for name, value in self.inputs(list(serialized)).items():
            request.inputs[name].CopyFrom(tf.make_tensor_proto(value.numpy()))
        return prediction_log_pb2.PredictionLog(
            predict_log=prediction_log_pb2.PredictLog(request=request)
        ).SerializeToString()


def replay(fn: Any, record: bytes) -> dict[str, Any]:
    """Call a signature with one warm-up record (a serialized PredictionLog), as TF Serving does at
    load time."""
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    log = prediction_log_pb2.PredictionLog.FromString(record)
    if log.WhichOneof("log_type") != "predict_log":
        raise ValueError(
            f"a warm-up record holds a {log.WhichOneof('log_type')}, not a predict_log"
        )
    request = log.predict_log.request
    specs = fn.structured_input_signature[1]
    if sorted(request.inputs) != sorted(specs):
        raise ValueError(
            f"a warm-up request has inputs {sorted(request.inputs)}; {SIGNATURE} takes "
            f"{sorted(specs)}"
        )
    return fn(
        **{
            name: tf.constant(tf.make_ndarray(proto), dtype=specs[name].dtype)
            for name, proto in request.inputs.items()
        }
    )
