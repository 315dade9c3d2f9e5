"""TFLite export: a SavedModel's `serving_default` converted to `model.tflite`, checked against the SavedModel.

Shared by `train --export-tflite` and the `export-tflite` verb; they stage what `export` writes and
publish it with the model (`Format-TFLite/` beside `Format-Serving/`, as TFX's TFLite rewriter does).

The rule for signatures that take serialized tf.Examples (one string input, parsed in the graph by
`tf.io.parse_example`): TFLite has no tf.Example parser, so the TFLite model takes the **parsed
features** instead. The signature is frozen, the tensors its ParseExample op yields become the inputs
(named after the feature keys; only the features the outputs depend on), and the rest of the graph,
the model's inner function with its lookup tables, is what gets converted (tables filled from files,
such as tf.Transform's vocabularies, are copied into constant tables, which TFLite can initialize).
Features parsed as sparse or ragged cannot be fed that way (an error says which). Any other signature
is converted as it is.

Only TFLite's built-in ops are allowed (no Select TF ops, so the model runs on any TFLite runtime);
a model that needs others is a `TFLiteExportError` naming the ops and, when the inputs are strings,
saying how to restructure. The conversion is checked before it is kept: the TFLite interpreter and
the SavedModel's signature are run on the same eval examples (up to MAX_EXAMPLES) and the largest
absolute difference of their outputs must be within the tolerance (DEFAULT_TOLERANCES by quantization).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

from generic_trainer.errors import OutputError, UserInputError

log = logging.getLogger(__name__)

QUANTIZATIONS = ("none", "dynamic", "float16")
# Largest absolute output difference accepted between the TFLite model and the SavedModel, by quantization.
DEFAULT_TOLERANCES = {"none": 1e-4, "float16": 5e-2, "dynamic": 1e-1}
TFLITE_DIR = "Format-TFLite"
TFLITE_FILE = "model.tflite"
VALIDATION_FILE = "validation.json"
MAX_EXAMPLES = 256
_PARSE_OPS = ("ParseExample", "ParseExampleV2")


class TFLiteExportError(OutputError):
    """The model cannot be converted to TFLite, or its TFLite version does not agree with it (exit 4)."""


@dataclasses.dataclass(frozen=True)
class TFLiteOptions:
    """How to convert: `quantization` one of QUANTIZATIONS; `tolerance` None means its DEFAULT_TOLERANCES."""

    quantization: str = "none"
    tolerance: float | None = None

    @property
    def max_abs_diff(self) -> float:
        return self.tolerance if self.tolerance is not None else DEFAULT_TOLERANCES[self.quantization]


def check_options(export: Any, quantization: Any = None, tolerance: Any = None) -> TFLiteOptions | None:
    """--export-tflite, --tflite-quantization and --tflite-tolerance as TFLiteOptions (None: no export)."""
    if isinstance(export, str):
        if export.strip().lower() not in ("", "true", "false", "1", "0"):
            raise UserInputError("--export-tflite", f"expected true or false, got {export!r}")
        export = export.strip().lower() in ("true", "1")
    quantization = (str(quantization).strip().lower() if quantization not in (None, "") else "none")
    if quantization not in QUANTIZATIONS:
        raise UserInputError("--tflite-quantization",
                             f"expected one of {', '.join(QUANTIZATIONS)}, got {quantization!r}")
    if tolerance not in (None, ""):
        try:
            tolerance = float(tolerance)
        except (TypeError, ValueError):
            raise UserInputError("--tflite-tolerance", f"expected a number, got {tolerance!r}") from None
        if not tolerance >= 0:
            raise UserInputError("--tflite-tolerance", f"expected a number >= 0, got {tolerance!r}")
    else:
        tolerance = None
    if not export:
        if quantization != "none" or tolerance is not None:
            flag = "--tflite-quantization" if quantization != "none" else "--tflite-tolerance"
            raise UserInputError(flag, "given without --export-tflite (the KFP parameter export_tflite): add it, "
                                       "or leave this out")
        return None
    return TFLiteOptions(quantization, tolerance)


def export(saved_model_dir: str, output_dir: str, options: TFLiteOptions, example_files: Sequence[str] = (),
           schema_file: str | None = None) -> dict[str, Any]:
    """Convert `saved_model_dir`'s serving_default, check it, write `output_dir/model.tflite` and
    `validation.json`; returns what validation.json holds. Raises TFLiteExportError (nothing written)."""
    import tensorflow as tf

    scratch = tempfile.mkdtemp(prefix="generic-trainer-tflite-")
    try:
        loaded = tf.saved_model.load(saved_model_dir)
        fn = loaded.signatures["serving_default"]
        parsed = _parsed_features_model(loaded, fn, scratch) if _takes_serialized_examples(fn) else None
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
    except Exception as e:  # whatever else a model can make TensorFlow raise on the way: still the export's failure
        raise TFLiteExportError(f"the TFLite export failed: {type(e).__name__}: {' '.join(str(e).split())[:800]}"
                                ) from e
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if diff > options.max_abs_diff:
        raise TFLiteExportError(
            f"the TFLite model (quantization {options.quantization}) differs from the SavedModel by up to {diff:.3g} "
            f"on {_examples_used(records)}, more than the tolerance {options.max_abs_diff:g}. Convert without "
            "quantization (--tflite-quantization none), or accept the difference with --tflite-tolerance (the KFP "
            "parameter tflite_tolerance)")
    record = {
        "path": f"{TFLITE_DIR}/{TFLITE_FILE}", "size_bytes": len(tflite), "quantization": options.quantization,
        "max_abs_diff": diff, "tolerance": options.max_abs_diff, "validated_on": _examples_used(records),
        "inputs": "parsed tf.Example features" if parsed else "the signature's inputs",
        "input_names": sorted(features),
    }
    os.makedirs(output_dir, exist_ok=True)
    with open(os.path.join(output_dir, TFLITE_FILE), "wb") as f:
        f.write(tflite)
    with open(os.path.join(output_dir, VALIDATION_FILE), "w", encoding="utf-8") as f:
        json.dump(record, f, indent=2, sort_keys=True)
    log.info("TFLite model: %d bytes, quantization %s, max abs difference from the SavedModel %.3g on %s "
             "(tolerance %g)", len(tflite), options.quantization, diff, record["validated_on"], options.max_abs_diff)
    return record


def _examples_used(records: Sequence[bytes]) -> str:
    return f"{len(records)} eval examples" if records else "random inputs (no examples given)"


def _takes_serialized_examples(fn: Any) -> bool:
    """One rank-1 string input that a ParseExample op in the signature's functions reads."""
    import tensorflow as tf

    specs = list(fn.structured_input_signature[1].values())
    if len(specs) != 1 or specs[0].dtype != tf.string or specs[0].shape.rank != 1:
        return False
    graph_def = fn.graph.as_graph_def()
    nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
    return any(n.op in _PARSE_OPS for n in nodes)


def _input_specs(fn: Any) -> dict[str, Any]:
    return dict(fn.structured_input_signature[1])


@dataclasses.dataclass
class _ParsedModel:
    """A SavedModel in scratch whose serving_default takes the parsed features of the original's signature."""

    path: str
    input_specs: dict[str, Any]  # feature key -> TensorSpec
    parse: Any  # serialized examples -> parsed feature tensors (the original's own parse op), as a list
    call: Any  # {feature key: array} -> the new signature's outputs

    def reference_and_features(self, fn: Any, records: Sequence[bytes]) -> tuple[dict, dict[str, Any]]:
        import tensorflow as tf

        if not records:
            features = _random_features(self.input_specs)
            return self.call(features), features
        serialized = tf.constant(list(records))
        parsed = self.parse(serialized)
        features = {key: t.numpy() for key, t in zip(self.input_specs, parsed, strict=True)}
        return fn(**{next(iter(fn.structured_input_signature[1])): serialized}), features


def _parsed_features_model(loaded: Any, fn: Any, scratch: str) -> _ParsedModel:
    """Freeze the signature, cut it at its ParseExample op, and save the rest (taking the features) in scratch."""
    import tensorflow as tf

    # TensorFlow's own freezing (what the TFLite converter uses): inlines the signature's functions so the
    # ParseExample op is reachable, turns variables into constants, and keeps lookup tables as inputs.
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    frozen = convert_variables_to_constants_v2(fn, aggressive_inlining=True)
    parses = [op for op in frozen.graph.get_operations() if op.type in _PARSE_OPS]
    if len(parses) != 1:
        raise TFLiteExportError(f"the serving signature takes serialized tf.Examples and parses them with "
                                f"{len(parses)} ParseExample ops; a TFLite model can be cut from one only. Export a "
                                "serving signature that takes the parsed (or transformed) feature tensors")
    parse = parses[0]
    dense, sparse_keys = _parse_outputs(parse)
    outputs = tf.nest.pack_sequence_as(fn.structured_outputs, frozen.outputs, expand_composites=True)
    used = _consumed_tensors(list(frozen.outputs), stop=parse)
    needed_sparse = [key for key, tensors in sparse_keys.items() if any(t.name in used for t in tensors)]
    if needed_sparse:
        raise TFLiteExportError(
            f"the serving signature parses {', '.join(needed_sparse)} as sparse or ragged features "
            "(VarLenFeature, SparseFeature or RaggedFeature) and TFLite takes dense tensors only: give them a "
            "fixed shape in the schema (FixedLenFeature, presence min_fraction 1), or export a serving signature "
            "that takes dense tensors")
    dense = {key: t for key, t in dense.items() if t.name in used}
    resources = [t for t in frozen.inputs if t.dtype == tf.resource]
    strings = [t for t in frozen.inputs if t.dtype != tf.resource and t.name in used]
    if strings:
        raise TFLiteExportError(
            "the serving signature uses its serialized tf.Example input other than through ParseExample: no "
            "TFLite model can be cut from it. Export a serving signature that takes the parsed feature tensors")
    captured = {ph.op.name: ext for ext, ph in zip(fn.captured_inputs, fn.graph.internal_captures, strict=True)}
    missing = [t.op.name for t in resources if t.op.name not in captured]
    if missing:
        raise TFLiteExportError(f"cannot cut a TFLite model from the serving signature: resources {missing} of its "
                                "frozen graph are not the signature's")
    handles = [captured[t.op.name] for t in resources]
    try:
        pruned = frozen.prune(feeds=list(dense.values()) + resources, fetches=outputs)
    except Exception as e:  # an output that still needs the serialized input
        raise TFLiteExportError(f"cannot cut a TFLite model from the serving signature at its ParseExample op "
                                f"({type(e).__name__}: {e}). Export a serving signature that takes the parsed "
                                "feature tensors") from None
    specs = {key: tf.TensorSpec(t.shape, t.dtype, name=_input_name(key)) for key, t in dense.items()}
    tables = _constant_tables(resources, handles)
    table_handles = [tables[i].resource_handle if i in tables else h for i, h in enumerate(handles)]

    @tf.function(input_signature=list(specs.values()))
    def serve_parsed(*features):
        return pruned(*features, *table_handles)

    module = tf.Module()
    module.tables = list(tables.values())
    if len(tables) < len(handles):  # resources other than lookup tables: saved with the original's objects
        module.loaded = loaded
    path = os.path.join(scratch, "parsed")
    tf.saved_model.save(module, path, signatures={"serving_default": serve_parsed.get_concrete_function()})
    parse_only = frozen.prune(feeds=[t for t in frozen.inputs if t.dtype == tf.string] + resources,
                              fetches=list(dense.values()))

    def parse_fn(serialized):
        return parse_only(serialized, *handles)

    log.info("the serving signature takes serialized tf.Examples: the TFLite model takes the %d parsed features "
             "it uses instead (%s)", len(specs), ", ".join(specs))
    return _ParsedModel(path, specs, parse_fn, call=lambda features: serve_parsed(
        *[tf.constant(features[k]) for k in specs]))


def _constant_tables(resources: Sequence[Any], handles: Sequence[Any]) -> dict[int, Any]:
    """{index: a StaticHashTable holding the same keys and values} for each lookup table among `resources`.

    TFLite initializes hash tables from constants only; a table filled from a file (a tf.Transform
    vocabulary) would be converted empty. The copy's default value is unused: each lookup op brings its own.
    """
    import tensorflow as tf

    tables = {}
    for i, (placeholder, handle) in enumerate(zip(resources, handles, strict=True)):
        finds, todo = [], list(placeholder.consumers())
        while todo:  # through the Identity ops that inlining leaves
            op = todo.pop()
            if op.type == "LookupTableFindV2":
                finds.append(op)
            elif op.type == "Identity":
                todo += op.outputs[0].consumers()
        if not finds:
            continue
        key_dtype, value_dtype = finds[0].get_attr("Tin"), finds[0].get_attr("Tout")
        keys, values = tf.raw_ops.LookupTableExportV2(table_handle=handle, Tkeys=key_dtype, Tvalues=value_dtype)
        default = tf.zeros([], value_dtype) if value_dtype != tf.string else tf.constant("")
        tables[i] = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(keys, values), default)
    return tables


def _input_name(key: str) -> str:
    """A feature key as a TFLite input name (a TensorFlow op name)."""
    name = re.sub(r"[^A-Za-z0-9_.\-/]", "_", key)
    return name if re.match(r"[A-Za-z0-9.]", name) else f"f_{name}"


def _parse_outputs(parse: Any) -> tuple[dict[str, Any], dict[str, list]]:
    """{dense key: tensor} and {sparse or ragged key: [its tensors]} of a ParseExample(V2) op."""
    import tensorflow as tf

    def keys(tensors) -> list[str]:
        values = []
        for t in tensors:
            values += [k.decode() for k in tf.make_ndarray(t.op.get_attr("value")).ravel()]
        return values

    num_sparse = parse.get_attr("num_sparse") if parse.type == "ParseExampleV2" else parse.get_attr("Nsparse")
    num_dense = len(parse.get_attr("Tdense"))
    if parse.type == "ParseExampleV2":  # inputs: serialized, names, sparse_keys, dense_keys, ragged_keys, defaults
        sparse, dense, ragged = keys([parse.inputs[2]]), keys([parse.inputs[3]]), keys([parse.inputs[4]])
    else:  # serialized, names, sparse_keys..., dense_keys..., dense_defaults...
        sparse = keys(parse.inputs[2:2 + num_sparse])
        dense = keys(parse.inputs[2 + num_sparse:2 + num_sparse + num_dense])
        ragged = []
    out = list(parse.outputs)
    sparse_tensors = {k: [out[i], out[num_sparse + i], out[2 * num_sparse + i]] for i, k in enumerate(sparse)}
    dense_tensors = dict(zip(dense, out[3 * num_sparse:3 * num_sparse + num_dense], strict=True))
    rest = out[3 * num_sparse + num_dense:]
    sparse_tensors.update({k: [rest[i], rest[len(ragged) + i]] for i, k in enumerate(ragged)})
    return dense_tensors, sparse_tensors


def _consumed_tensors(fetches: Sequence[Any], stop: Any) -> set[str]:
    """Names of the tensors the fetches depend on, walking back from them but not past the op `stop`."""
    seen_ops, consumed, todo = set(), set(), [t.op for t in fetches]
    while todo:
        op = todo.pop()
        if op.name in seen_ops:
            continue
        seen_ops.add(op.name)
        if op is stop:
            continue
        for t in op.inputs:
            consumed.add(t.name)
            todo.append(t.op)
        todo.extend(op.control_inputs)
    return consumed


def _convert(saved_model_dir: str, options: TFLiteOptions, input_specs: Mapping[str, Any]) -> bytes:
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_saved_model(saved_model_dir, signature_keys=["serving_default"])
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

    ops = sorted(set(re.findall(r"'tf\.(\w+)' op is neither a custom op nor a flex op", message))
                 | {o.strip() for m in re.findall(r"TF Select ops: ([^\n]+)", message) for o in m.split(",")})
    ops = [o for o in ops if o]
    text = (f"the model cannot be converted to TFLite: it uses TensorFlow ops that TFLite's built-in ops lack: "
            f"{', '.join(ops)}" if ops else
            f"the model cannot be converted to TFLite: {' '.join(message.split())[:800]}")
    strings = sorted(k for k, s in input_specs.items() if s.dtype == tf.string)
    if strings:
        text += (f". Its inputs {', '.join(strings)} are strings: TFLite's built-in ops handle little string "
                 "processing (vocabulary lookups, such as Keras' StringLookup or tf.Transform's vocabularies, work; "
                 "hashing, such as tf.Transform's num_oov_buckets or keras.layers.Hashing, splitting and regexes do "
                 "not). "
                 "Restructure: do the string processing before the model, and export a serving signature that "
                 "takes the numeric (parsed or transformed) tensors the Keras model takes")
    else:
        text += (". Export a serving signature without those ops (e.g. one that takes the tensors the Keras "
                 "model takes, with preprocessing done before it)")
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


def _features(specs: Mapping[str, Any], records: Sequence[bytes], schema_file: str | None) -> dict[str, Any]:
    """The signature's inputs from serialized examples: each input is the feature of its name (typed by the
    schema when given, else by the input), cast to the input's dtype; random values without examples."""
    import tensorflow as tf

    if not records:
        return _random_features(specs)
    schema_types = {}
    if schema_file:
        from generic_trainer.records import schemas

        schema_types = {f.name: f.type for f in schemas.load_schema(schema_file).feature}
    kinds = {1: tf.string, 2: tf.int64, 3: tf.float32}  # tensorflow_metadata FeatureType BYTES, INT, FLOAT
    parse_spec = {}
    for name, spec in specs.items():
        stored = kinds.get(schema_types.get(name), None)
        if stored is None:
            stored = tf.string if spec.dtype == tf.string else tf.float32 if spec.dtype.is_floating else tf.int64
        if spec.shape.rank is None or any(d is None for d in spec.shape[1:]):
            raise TFLiteExportError(f"cannot feed the signature's input {name!r} ({spec}) from tf.Examples: its "
                                    "shape past the batch dimension is not fixed")
        parse_spec[name] = tf.io.FixedLenFeature(spec.shape[1:].as_list(), stored)
    try:
        parsed = tf.io.parse_example(tf.constant(list(records)), parse_spec)
    except tf.errors.InvalidArgumentError as e:
        raise TFLiteExportError(f"cannot check the TFLite model: the eval examples cannot be fed to the serving "
                                f"signature's inputs {sorted(specs)} (each input is read as the feature of its "
                                f"name): {e.message}") from None
    return {name: tf.cast(parsed[name], specs[name].dtype).numpy() for name in specs}


def _random_features(specs: Mapping[str, Any], batch: int = 16) -> dict[str, Any]:
    import numpy as np

    rng = np.random.default_rng(0)
    out = {}
    for name, spec in specs.items():
        shape = [batch] + [d if d is not None else 1 for d in spec.shape.as_list()[1:]]
        if spec.dtype.is_floating:
            out[name] = rng.normal(size=shape).astype(spec.dtype.as_numpy_dtype)
        elif spec.dtype.is_integer or spec.dtype.is_bool:
            out[name] = np.zeros(shape, spec.dtype.as_numpy_dtype)
        else:
            out[name] = np.full(shape, b"", dtype=object)
    return out


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
    by_name = {_input_name(k): v for k, v in features.items()}
    try:
        got = runner(**{n: by_name[n] for n in names})
    except Exception as e:
        raise TFLiteExportError(f"the TFLite model was converted but fails in the TFLite interpreter: {e}. Export "
                                "a serving signature without what fails (e.g. vocabularies read from files)") from None
    diff = 0.0
    for key, want in reference.items():
        if key not in got:
            raise TFLiteExportError(f"the TFLite model has no output {key!r} (it has {sorted(got)})")
        have = np.asarray(got[key])
        if want.dtype.kind in "SOU" or have.shape != want.shape:
            equal = have.shape == want.shape and bool(np.all(have == want))
            diff = max(diff, 0.0 if equal else float("inf"))
        else:
            diff = max(diff, float(np.max(np.abs(have.astype(np.float64) - want.astype(np.float64)), initial=0.0)))
    return diff
