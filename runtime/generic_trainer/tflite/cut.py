"""Cutting a serving signature that takes serialized tf.Examples at its ParseExample op.

TFLite has no tf.Example parser, so for such a signature the TFLite model takes the **parsed
features** instead: the signature is frozen, the tensors its ParseExample op yields become the
inputs (named after the feature keys; only the features the outputs depend on), and the rest of the
graph, the model's inner function with its lookup tables, is saved in scratch for the converter
(tables filled from files, such as tf.Transform's vocabularies, are copied into constant tables,
which TFLite can initialize). Features parsed as sparse or ragged cannot be fed that way (an error
says which).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from generic_trainer.tflite import parse_graph
from generic_trainer.tflite.options import TFLiteExportError

log = logging.getLogger("generic_trainer.tflite")

PARSE_OPS = ("ParseExample", "ParseExampleV2")


def takes_serialized_examples(fn: Any) -> bool:
    """One rank-1 string input that a ParseExample op in the signature's functions reads."""
    import tensorflow as tf

    specs = list(fn.structured_input_signature[1].values())
    if len(specs) != 1 or specs[0].dtype != tf.string or specs[0].shape.rank != 1:
        return False
    graph_def = fn.graph.as_graph_def()
    nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
    return any(n.op in PARSE_OPS for n in nodes)


@dataclasses.dataclass
class ParsedModel:
    """A SavedModel in scratch whose serving_default takes the original signature's parsed features.

    Attributes:
      path: where it is saved.
      input_specs: {feature key: TensorSpec} of its inputs.
      parse: serialized examples -> the parsed feature tensors (the original's parse op), a list.
      call: {feature key: array} -> its outputs.
    """

    path: str
    input_specs: dict[str, Any]
    parse: Any
    call: Any

    def reference_and_features(
        self, fn: Any, records: Sequence[bytes]
    ) -> tuple[dict, dict[str, Any]]:
        """The original's outputs for `records` and their parsed features (random when none)."""
        import tensorflow as tf

        if not records:
            features = random_features(self.input_specs)
            return self.call(features), features
        serialized = tf.constant(list(records))
        parsed = self.parse(serialized)
        features = {key: t.numpy() for key, t in zip(self.input_specs, parsed, strict=True)}
        return fn(**{next(iter(fn.structured_input_signature[1])): serialized}), features


def parsed_features_model(loaded: Any, fn: Any, scratch: str) -> ParsedModel:
    """Cut a serialized-tf.Example signature at its ParseExample op and save the rest.

    Args:
      loaded: the loaded SavedModel (saved along when the cut keeps resources other than tables).
      fn: its serving signature.
      scratch: a private directory the cut model is saved in.

    Returns:
      The cut model, taking the parsed features the outputs use.

    Raises:
      TFLiteExportError: the signature cannot be cut there.
    """
    import tensorflow as tf

    # TensorFlow's own freezing (what the TFLite converter uses): inlines the signature's functions
    # so the ParseExample op is reachable, turns variables into constants, and keeps lookup tables
    # as inputs.
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    frozen = convert_variables_to_constants_v2(fn, aggressive_inlining=True)
    dense, resources, handles = _cut_points(frozen, fn)
    pruned = _prune_after_parse(frozen, fn, dense, resources)
    specs = {key: tf.TensorSpec(t.shape, t.dtype, name=input_name(key)) for key, t in dense.items()}
    serve_parsed, path = _save_parsed(loaded, pruned, specs, resources, handles, scratch)
    parse_only = frozen.prune(
        feeds=[t for t in frozen.inputs if t.dtype == tf.string] + resources,
        fetches=list(dense.values()),
    )

    def parse_fn(serialized):
        return parse_only(serialized, *handles)

    log.info(
        "the serving signature takes serialized tf.Examples: the TFLite model takes the %d parsed "
        "features it uses instead (%s)",
        len(specs),
        ", ".join(specs),
    )
    return ParsedModel(
        path,
        specs,
        parse_fn,
        call=lambda features: serve_parsed(*[tf.constant(features[k]) for k in specs]),
    )


def _prune_after_parse(frozen: Any, fn: Any, dense: dict[str, Any], resources: list[Any]) -> Any:
    """The frozen signature from the parsed features (and resources) to its outputs."""
    import tensorflow as tf

    outputs = tf.nest.pack_sequence_as(
        fn.structured_outputs, frozen.outputs, expand_composites=True
    )
    try:
        return frozen.prune(feeds=list(dense.values()) + resources, fetches=outputs)
    except Exception as e:  # an output that still needs the serialized input
        raise TFLiteExportError(
            f"cannot cut a TFLite model from the serving signature at its ParseExample op "
            f"({type(e).__name__}: {e}). Export a serving signature that takes the parsed "
            "feature tensors"
        ) from None


def _save_parsed(
    loaded: Any,
    pruned: Any,
    specs: dict[str, Any],
    resources: list[Any],
    handles: list[Any],
    scratch: str,
) -> tuple[Any, str]:
    """Save the pruned graph with constant copies of its tables: (its serving function, path)."""
    import tensorflow as tf

    tables = parse_graph.constant_tables(resources, handles)
    table_handles = [tables[i].resource_handle if i in tables else h for i, h in enumerate(handles)]

    @tf.function(input_signature=list(specs.values()))
    def serve_parsed(*features):
        return pruned(*features, *table_handles)

    module = tf.Module()
    module.tables = list(tables.values())
    if len(tables) < len(handles):  # resources other than lookup tables: saved with the original's
        module.loaded = loaded
    path = os.path.join(scratch, "parsed")
    tf.saved_model.save(
        module, path, signatures={"serving_default": serve_parsed.get_concrete_function()}
    )
    return serve_parsed, path


def _cut_points(frozen: Any, fn: Any) -> tuple[dict[str, Any], list[Any], list[Any]]:
    """Where to cut the frozen signature.

    Returns:
      ({feature key: the dense tensor its ParseExample op yields} for the features the outputs
      use, the graph's resource inputs, the signature's handles for them).

    Raises:
      TFLiteExportError: several parse ops, sparse features used, or the serialized input used
        other than through the parse op.
    """
    import tensorflow as tf

    parses = [op for op in frozen.graph.get_operations() if op.type in PARSE_OPS]
    if len(parses) != 1:
        raise TFLiteExportError(
            f"the serving signature takes serialized tf.Examples and parses them with "
            f"{len(parses)} ParseExample ops; a TFLite model can be cut from one only. Export a "
            "serving signature that takes the parsed (or transformed) feature tensors"
        )
    parse = parses[0]
    dense, sparse_keys = parse_graph.parse_outputs(parse)
    used = parse_graph.consumed_tensors(list(frozen.outputs), stop=parse)
    needed_sparse = [
        key for key, tensors in sparse_keys.items() if any(t.name in used for t in tensors)
    ]
    if needed_sparse:
        raise TFLiteExportError(
            f"the serving signature parses {', '.join(needed_sparse)} as sparse or ragged features "
            "(VarLenFeature, SparseFeature or RaggedFeature) and TFLite takes dense tensors only: "
            "give them a fixed shape in the schema (FixedLenFeature, presence min_fraction 1), or "
            "export a serving signature that takes dense tensors"
        )
    dense = {key: t for key, t in dense.items() if t.name in used}
    resources = [t for t in frozen.inputs if t.dtype == tf.resource]
    strings = [t for t in frozen.inputs if t.dtype != tf.resource and t.name in used]
    if strings:
        raise TFLiteExportError(
            "the serving signature uses its serialized tf.Example input other than through "
            "ParseExample: no TFLite model can be cut from it. Export a serving signature that "
            "takes the parsed feature tensors"
        )
    return dense, resources, _captured_handles(fn, resources)


def _captured_handles(fn: Any, resources: list[Any]) -> list[Any]:
    """The signature's captured handles of the frozen graph's resource inputs, in order."""
    captured = {
        ph.op.name: ext
        for ext, ph in zip(fn.captured_inputs, fn.graph.internal_captures, strict=True)
    }
    missing = [t.op.name for t in resources if t.op.name not in captured]
    if missing:
        raise TFLiteExportError(
            f"cannot cut a TFLite model from the serving signature: resources {missing} of its "
            "frozen graph are not the signature's"
        )
    return [captured[t.op.name] for t in resources]


def input_name(key: str) -> str:
    """A feature key as a TFLite input name (a TensorFlow op name)."""
    name = re.sub(r"[^A-Za-z0-9_.\-/]", "_", key)
    return name if re.match(r"[A-Za-z0-9.]", name) else f"f_{name}"


def random_features(specs: Mapping[str, Any], batch: int = 16) -> dict[str, Any]:
    """Deterministic stand-in inputs for `specs` (normal floats, zero integers, empty strings)."""
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
