"""The TFLite export: a SavedModel's `serving_default` converted to `model.tflite`, checked against
the SavedModel.

Shared by `train --export-tflite` and the `export-tflite` verb; they stage what `export` writes and
publish it with the model (`Format-TFLite/` beside `Format-Serving/`, as TFX's TFLite rewriter
does).

The rule for signatures that take serialized tf.Examples (one string input, parsed in the graph by
`tf.io.parse_example`): TFLite has no tf.Example parser, so the TFLite model takes the **parsed
features** instead. The signature is frozen, the tensors its ParseExample op yields become the
inputs (named after the feature keys; only the features the outputs depend on), and the rest of the
graph, the model's inner function with its lookup tables, is what gets converted (tables filled from
files, such as tf.Transform's vocabularies, are copied into constant tables, which TFLite can
initialize). Features parsed as sparse or ragged cannot be fed that way (an error says which). Any
other signature is converted as it is.

Only TFLite's built-in ops are allowed (no Select TF ops, so the model runs on any TFLite runtime);
a model that needs others is a `TFLiteExportError` naming the ops and, when the inputs are strings,
saying how to restructure. The conversion is checked before it is kept: the TFLite interpreter and
the SavedModel's signature are run on the same eval examples (up to MAX_EXAMPLES) and the largest
absolute difference of their outputs must be within the tolerance (DEFAULT_TOLERANCES by
quantization).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

from generic_trainer.tflite import cut
from generic_trainer.tflite.options import (
    MAX_EXAMPLES,
    TFLITE_DIR,
    TFLITE_FILE,
    VALIDATION_FILE,
    TFLiteExportError,
    TFLiteOptions,
)

log = logging.getLogger("generic_trainer.tflite")


def export(
    saved_model_dir: str,
    output_dir: str,
    options: TFLiteOptions,
    example_files: Sequence[str] = (),
    schema_file: str | None = None,
) -> dict[str, Any]:
    """Convert `saved_model_dir`'s serving_default, check it, write `output_dir/model.tflite` and
    `validation.json`; returns what validation.json holds. Raises TFLiteExportError (nothing
    written)."""
    import tensorflow as tf

    scratch = tempfile.mkdtemp(prefix="generic-trainer-tflite-")
    try:
        loaded = tf.saved_model.load(saved_model_dir)
        fn = loaded.signatures["serving_default"]
        parsed = (
            cut.parsed_features_model(loaded, fn, scratch)
            if cut.takes_serialized_examples(fn)
            else None
        )
        source = parsed.path if parsed else saved_model_dir
        tflite = _convert(source, options, parsed.input_specs if parsed else _input_specs(fn))
        records = _read_examples(example_files)
        if parsed:
            reference, features = parsed.reference_and_features(fn, records)
        else:
            features = _features(_input_specs(fn), records, schema_file)
            reference = fn(**{k: tf.constant(v) for k, v in features.items()})
        diff = _compare(tflite, features, {k: v.numpy() for k, v in reference.items()})
    except TFLiteExportError:
        raise
    # whatever else a model can make TensorFlow raise on the way: still the export's failure
    except Exception as e:
        raise TFLiteExportError(
            f"the TFLite export failed: {type(e).__name__}: {' '.join(str(e).split())[:800]}"
        ) from e
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if diff > options.max_abs_diff:
        raise TFLiteExportError(
            f"the TFLite model (quantization {options.quantization}) differs from the SavedModel "
            f"by up to {diff:.3g} "
            f"on {_examples_used(records)}, more than the tolerance {options.max_abs_diff:g}. "
            "Convert without "
            "quantization (--tflite-quantization none), or accept the difference with "
            "--tflite-tolerance (the KFP "
            "parameter tflite_tolerance)"
        )
    record = {
        "path": f"{TFLITE_DIR}/{TFLITE_FILE}",
        "size_bytes": len(tflite),
        "quantization": options.quantization,
        "max_abs_diff": diff,
        "tolerance": options.max_abs_diff,
        "validated_on": _examples_used(records),
        "inputs": "parsed tf.Example features" if parsed else "the signature's inputs",
        "input_names": sorted(features),
    }
    os.makedirs(output_dir, exist_ok=True)
    with open(os.path.join(output_dir, TFLITE_FILE), "wb") as f:
        f.write(tflite)
    with open(os.path.join(output_dir, VALIDATION_FILE), "w", encoding="utf-8") as f:
        json.dump(record, f, indent=2, sort_keys=True)
    log.info(
        "TFLite model: %d bytes, quantization %s, max abs difference from the SavedModel %.3g on "
        "%s "
        "(tolerance %g)",
        len(tflite),
        options.quantization,
        diff,
        record["validated_on"],
        options.max_abs_diff,
    )
    return record


def _examples_used(records: Sequence[bytes]) -> str:
    return f"{len(records)} eval examples" if records else "random inputs (no examples given)"


def _input_specs(fn: Any) -> dict[str, Any]:
    return dict(fn.structured_input_signature[1])


def _convert(saved_model_dir: str, options: TFLiteOptions, input_specs: Mapping[str, Any]) -> bytes:
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_saved_model(
        saved_model_dir, signature_keys=["serving_default"]
    )
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    if options.quantization != "none":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if options.quantization == "float16":
        converter.target_spec.supported_types = [tf.float16]
    try:
        return converter.convert()
    except Exception as e:
        raise TFLiteExportError(_conversion_failure(str(e), input_specs)) from None


def _conversion_failure(message: str, input_specs: Mapping[str, Any]) -> str:
    """What the converter said, shortened to the ops it lacks, and how to restructure."""
    import tensorflow as tf

    ops = sorted(
        set(re.findall(r"'tf\.(\w+)' op is neither a custom op nor a flex op", message))
        | {o.strip() for m in re.findall(r"TF Select ops: ([^\n]+)", message) for o in m.split(",")}
    )
    ops = [o for o in ops if o]
    text = (
        "the model cannot be converted to TFLite: it uses TensorFlow ops that TFLite's built-in "
        "ops lack: "
        f"{', '.join(ops)}"
        if ops
        else f"the model cannot be converted to TFLite: {' '.join(message.split())[:800]}"
    )
    strings = sorted(k for k, s in input_specs.items() if s.dtype == tf.string)
    if strings:
        text += (
            f". Its inputs {', '.join(strings)} are strings: TFLite's built-in ops handle little "
            "string "
            "processing (vocabulary lookups, such as Keras' StringLookup or tf.Transform's "
            "vocabularies, work; "
            "hashing, such as tf.Transform's num_oov_buckets or keras.layers.Hashing, splitting "
            "and regexes do "
            "not). "
            "Restructure: do the string processing before the model, and export a serving "
            "signature that "
            "takes the numeric (parsed or transformed) tensors the Keras model takes"
        )
    else:
        text += (
            ". Export a serving signature without those ops (e.g. one that takes the tensors the "
            "Keras "
            "model takes, with preprocessing done before it)"
        )
    return text


def _read_examples(example_files: Sequence[str]) -> list[bytes]:
    from generic_trainer.records.example_files import read_records, split_files

    records: list[bytes] = []
    for pattern in example_files:
        for path in split_files(pattern):
            records += list(read_records(path, MAX_EXAMPLES - len(records)))
            if len(records) >= MAX_EXAMPLES:
                return records
    return records


def _features(
    specs: Mapping[str, Any], records: Sequence[bytes], schema_file: str | None
) -> dict[str, Any]:
    """The signature's inputs from serialized examples: each input is the feature of its name (typed
    by the
    schema when given, else by the input), cast to the input's dtype; random values without
    examples."""
    import tensorflow as tf

    if not records:
        return cut.random_features(specs)
    schema_types = {}
    if schema_file:
        from generic_trainer.records import schemas

        schema_types = {f.name: f.type for f in schemas.load_schema(schema_file).feature}
    kinds = {
        1: tf.string,
        2: tf.int64,
        3: tf.float32,
    }  # tensorflow_metadata FeatureType BYTES, INT, FLOAT
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
    try:
        parsed = tf.io.parse_example(tf.constant(list(records)), parse_spec)
    except tf.errors.InvalidArgumentError as e:
        raise TFLiteExportError(
            f"cannot check the TFLite model: the eval examples cannot be fed to the serving "
            f"signature's inputs {sorted(specs)} (each input is read as the feature of its "
            f"name): {e.message}"
        ) from None
    return {name: tf.cast(parsed[name], specs[name].dtype).numpy() for name in specs}


def _compare(tflite: bytes, features: Mapping[str, Any], reference: Mapping[str, Any]) -> float:
    """Run the TFLite model on `features`; the largest absolute difference from `reference`."""
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
