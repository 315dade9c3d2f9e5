"""The check of a TFLite conversion: eval examples fed to both models, their outputs compared.

Up to MAX_EXAMPLES eval examples (random inputs without any) become the signature's inputs; the
TFLite interpreter and the SavedModel run on the same inputs, and the largest absolute difference
of their outputs is what export.py holds against the tolerance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from generic_trainer.tflite import cut
from generic_trainer.tflite.options import MAX_EXAMPLES, TFLiteExportError


def examples_used(records: Sequence[bytes]) -> str:
    """What the check ran on, in words."""
    return f"{len(records)} eval examples" if records else "random inputs (no examples given)"


def read_examples(example_files: Sequence[str]) -> list[bytes]:
    """Up to MAX_EXAMPLES serialized records of the eval files, in order."""
    from generic_trainer.records.example_files import read_records, split_files

    records: list[bytes] = []
    for pattern in example_files:
        for path in split_files(pattern):
            records += list(read_records(path, MAX_EXAMPLES - len(records)))
            if len(records) >= MAX_EXAMPLES:
                return records
    return records


def features_for(
    specs: Mapping[str, Any], records: Sequence[bytes], schema_file: str | None
) -> dict[str, Any]:
    """The signature's inputs made of serialized examples.

    Each input is the feature of its name (typed by the schema when given, else by the input), cast
    to the input's dtype.

    Args:
      specs: the signature's input specs by name.
      records: serialized tf.Examples (none: random values).
      schema_file: the schema typing the features (None: typed by the inputs).

    Returns:
      {input name: array}.

    Raises:
      TFLiteExportError: an input that cannot be fed from tf.Examples.
    """
    import tensorflow as tf

    if not records:
        return cut.random_features(specs)
    parse_spec = _parse_spec(specs, schema_file)
    try:
        parsed = tf.io.parse_example(tf.constant(list(records)), parse_spec)
    except tf.errors.InvalidArgumentError as e:
        raise TFLiteExportError(
            f"cannot check the TFLite model: the eval examples cannot be fed to the serving "
            f"signature's inputs {sorted(specs)} (each input is read as the feature of its "
            f"name): {e.message}"
        ) from None
    return {name: tf.cast(parsed[name], specs[name].dtype).numpy() for name in specs}


def _parse_spec(specs: Mapping[str, Any], schema_file: str | None) -> dict[str, Any]:
    """The parse spec reading each input as the feature of its name, as the schema stores it."""
    import tensorflow as tf

    schema_types = {}
    if schema_file:
        from generic_trainer.records import schemas

        schema_types = {f.name: f.type for f in schemas.load_schema(schema_file).feature}
    # tensorflow_metadata's FeatureType BYTES, INT, FLOAT
    kinds = {1: tf.string, 2: tf.int64, 3: tf.float32}
    parse_spec = {}
    for name, spec in specs.items():
        stored = kinds.get(schema_types.get(name), None)
        if stored is None:
            stored = (
                tf.string
                if spec.dtype == tf.string
                else tf.float32
                if spec.dtype.is_floating
                else tf.int64
            )
        if spec.shape.rank is None or any(d is None for d in spec.shape[1:]):
            raise TFLiteExportError(
                f"cannot feed the signature's input {name!r} ({spec}) from tf.Examples: its "
                "shape past the batch dimension is not fixed"
            )
        parse_spec[name] = tf.io.FixedLenFeature(spec.shape[1:].as_list(), stored)
    return parse_spec


def max_abs_diff(tflite: bytes, features: Mapping[str, Any], reference: Mapping[str, Any]) -> float:
    """Run the TFLite model on `features` and compare its outputs with `reference`.

    Args:
      tflite: the model.tflite bytes.
      features: its inputs by feature key.
      reference: the SavedModel's outputs on the same inputs.

    Returns:
      The largest absolute difference (inf for unequal strings or shapes).

    Raises:
      TFLiteExportError: the interpreter fails, or an output is missing.
    """
    import warnings

    import numpy as np
    import tensorflow as tf

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tf.lite.Interpreter's deprecation notice (LiteRT)
        interpreter = tf.lite.Interpreter(model_content=tflite)
    runner = interpreter.get_signature_runner("serving_default")
    names = interpreter.get_signature_list()["serving_default"]["inputs"]
    by_name = {cut.input_name(k): v for k, v in features.items()}
    try:
        got = runner(**{n: by_name[n] for n in names})
    except Exception as e:
        raise TFLiteExportError(
            f"the TFLite model was converted but fails in the TFLite interpreter: {e}. Export "
            "a serving signature without what fails (e.g. vocabularies read from files)"
        ) from None
    diff = 0.0
    for key, want in reference.items():
        if key not in got:
            raise TFLiteExportError(
                f"the TFLite model has no output {key!r} (it has {sorted(got)})"
            )
        have = np.asarray(got[key])
        if want.dtype.kind in "SOU" or have.shape != want.shape:
            equal = have.shape == want.shape and bool(np.all(have == want))
            diff = max(diff, 0.0 if equal else float("inf"))
        else:
            diff = max(
                diff,
                float(
                    np.max(np.abs(have.astype(np.float64) - want.astype(np.float64)), initial=0.0)
                ),
            )
    return diff
