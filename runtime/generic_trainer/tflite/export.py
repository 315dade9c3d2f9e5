"""The TFLite export: a SavedModel's `serving_default` converted to `model.tflite`, checked
against the SavedModel.

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
from typing import Any, NamedTuple

from generic_trainer.tflite import check, cut
from generic_trainer.tflite.options import (
    TFLITE_DIR,
    TFLITE_FILE,
    VALIDATION_FILE,
    TFLiteExportError,
    TFLiteOptions,
)

log = logging.getLogger("generic_trainer.tflite")


class _Checked(NamedTuple):
    """A conversion checked against the SavedModel."""

    tflite: bytes  # the model.tflite bytes
    diff: float  # the largest absolute difference of the outputs
    records: list[bytes]  # the eval examples compared on (none: random features)
    parsed: bool  # whether the model takes parsed tf.Example features
    input_names: list[str]


def export(
    saved_model_dir: str,
    output_dir: str,
    options: TFLiteOptions,
    example_files: Sequence[str] = (),
    schema_file: str | None = None,
) -> dict[str, Any]:
    """Convert a SavedModel's serving_default to TFLite, check it, and write it.

    Args:
      saved_model_dir: the SavedModel.
      output_dir: where `model.tflite` and `validation.json` are written.
      options: quantization and tolerance.
      example_files: eval TFRecord files to compare on (none: random features).
      schema_file: the schema parsing them for a signature that takes tensors.

    Returns:
      What validation.json holds.

    Raises:
      TFLiteExportError: the conversion failed or differs beyond the tolerance (nothing written).
    """
    checked = _convert_and_check(saved_model_dir, options, example_files, schema_file)
    on = check.examples_used(checked.records)
    _check_tolerance(checked.diff, options, on)
    record = {
        "path": f"{TFLITE_DIR}/{TFLITE_FILE}",
        "size_bytes": len(checked.tflite),
        "quantization": options.quantization,
        "max_abs_diff": checked.diff,
        "tolerance": options.max_abs_diff,
        "validated_on": on,
        "inputs": "parsed tf.Example features" if checked.parsed else "the signature's inputs",
        "input_names": sorted(checked.input_names),
    }
    _write(output_dir, checked.tflite, record)
    log.info(
        "TFLite model: %d bytes, quantization %s, max abs difference from the SavedModel %.3g on "
        "%s (tolerance %g)",
        len(checked.tflite),
        options.quantization,
        checked.diff,
        on,
        options.max_abs_diff,
    )
    return record


def _check_tolerance(diff: float, options: TFLiteOptions, on: str) -> None:
    """Raise TFLiteExportError when the TFLite model differs beyond the tolerance."""
    if diff > options.max_abs_diff:
        raise TFLiteExportError(
            f"the TFLite model (quantization {options.quantization}) differs from the SavedModel "
            f"by up to {diff:.3g} on {on}, more than the tolerance "
            f"{options.max_abs_diff:g}. Convert without quantization (--tflite-quantization "
            "none), or accept the difference with --tflite-tolerance (the KFP parameter "
            "tflite_tolerance)"
        )


def _write(output_dir: str, tflite: bytes, record: dict[str, Any]) -> None:
    """Write model.tflite and validation.json into `output_dir`."""
    os.makedirs(output_dir, exist_ok=True)
    with open(os.path.join(output_dir, TFLITE_FILE), "wb") as f:
        f.write(tflite)
    with open(os.path.join(output_dir, VALIDATION_FILE), "w", encoding="utf-8") as f:
        json.dump(record, f, indent=2, sort_keys=True)


def _convert_and_check(
    saved_model_dir: str,
    options: TFLiteOptions,
    example_files: Sequence[str],
    schema_file: str | None,
) -> _Checked:
    """Convert (cut at the parse op when the signature takes tf.Examples) and compare outputs."""
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
        records = check.read_examples(example_files)
        if parsed:
            reference, features = parsed.reference_and_features(fn, records)
        else:
            features = check.features_for(_input_specs(fn), records, schema_file)
            reference = fn(**{k: tf.constant(v) for k, v in features.items()})
        diff = check.max_abs_diff(tflite, features, {k: v.numpy() for k, v in reference.items()})
    except TFLiteExportError:
        raise
    # whatever else a model can make TensorFlow raise on the way: still the export's failure
    except Exception as e:
        raise TFLiteExportError(
            f"the TFLite export failed: {type(e).__name__}: {' '.join(str(e).split())[:800]}"
        ) from e
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return _Checked(tflite, diff, records, parsed is not None, list(features))


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
        f"ops lack: {', '.join(ops)}"
        if ops
        else f"the model cannot be converted to TFLite: {' '.join(message.split())[:800]}"
    )
    strings = sorted(k for k, s in input_specs.items() if s.dtype == tf.string)
    if strings:
        text += (
            f". Its inputs {', '.join(strings)} are strings: TFLite's built-in ops handle little "
            "string processing (vocabulary lookups, such as Keras' StringLookup or tf.Transform's "
            "vocabularies, work; hashing, such as tf.Transform's num_oov_buckets or "
            "keras.layers.Hashing, splitting and regexes do not). Restructure: do the string "
            "processing before the model, and export a serving signature that takes the numeric "
            "(parsed or transformed) tensors the Keras model takes"
        )
    else:
        text += (
            ". Export a serving signature without those ops (e.g. one that takes the tensors the "
            "Keras model takes, with preprocessing done before it)"
        )
    return text
