"""The `serving_default` signature Keras 2 (tf_keras) writes for a model saved without signatures.

Keras 2's `model.save(dir, save_format='tf')` traced the model on its saved input specs and
named the signature after the model: one input key per input, named after its Input layer
(`culmen_length_mm`, `input_1`, `dense_input` for a Sequential model given `input_shape`, or
`input_1`, `input_2` / the dict keys for a subclassed model), batch dimension `None`, and one
output key per output, named after the layer that produces it (`dense_1`), or `output_1`,
`output_2` / the dict keys for a subclassed model. Keras 3's own default signature names them
`inputs`, `inputs_1`, ... and `output_0`. `default_signature(model)` builds Keras 2's for a Keras 3
model, so that a client written for the Keras 2 model (TF Serving, `evaluate`) feeds this one.
Keras 3 names an unnamed Input `input_layer`, `input_layer_1`, ... where Keras 2 said `input_1`,
`input_2`, ...: those names are translated.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

_AUTO_INPUT = re.compile(r"input_layer(?:_(\d+))?")


def keras2_input_name(name: str, sequential_first_layer: str | None = None) -> str:
    """The name Keras 2 gives the input Keras 3 calls `name` (a Sequential model names it after its
    first layer)."""
    match = _AUTO_INPUT.fullmatch(name)
    if match is None:
        return name
    if sequential_first_layer is not None:
        return f"{sequential_first_layer}_input"
    return f"input_{int(match.group(1) or 0) + 1}"


def _is_shape(value: Any) -> bool:
    return isinstance(value, (tuple, list)) and all(d is None or isinstance(d, int) for d in value)


def _flat_paths(structure: Any, path: tuple = (), shapes: bool = False) -> Iterator[tuple]:
    """The paths of the leaves of `structure`, in `tf.nest.flatten` order (dict keys sorted)."""
    if isinstance(structure, dict):
        for key in sorted(structure):
            yield from _flat_paths(structure[key], path + (key,), shapes)
    elif isinstance(structure, (list, tuple)) and not (shapes and _is_shape(structure)):
        for index, value in enumerate(structure):
            yield from _flat_paths(value, path + (index,), shapes)
    else:
        yield path


def pseudo_names(structure: Any, prefix: str, shapes: bool = False) -> list[str]:
    """Keras 2's names for the leaves of a subclassed model's inputs or outputs: `output_1`,
    `output_2`, dict keys."""
    names = []
    for path in _flat_paths(structure, shapes=shapes):
        if not path:
            names.append(f"{prefix}1")
            continue
        name = "_".join(str(p + 1) if isinstance(p, int) else str(p) for p in path)
        names.append(prefix + name if isinstance(path[0], int) else name)
    return names


def _spec(tf, shape: Any, dtype: Any, name: str):
    shape = list(shape)
    if shape:
        shape[0] = None  # Keras 2 saved with a dynamic batch dimension
    return tf.TensorSpec(shape, tf.as_dtype(getattr(dtype, "name", dtype)), name=name)


def _graph_inputs(model: Any) -> tuple[Any, str | None] | None:
    """The symbolic inputs of a functional or built Sequential model (and the Sequential's first
    layer name)."""
    import keras
    from keras.src.models.functional import Functional

    if isinstance(model, keras.Sequential):
        functional = getattr(model, "_functional", None)
        if functional is None:
            return None
        first = next((layer.name for layer in model.layers), None)
        return functional.input, first
    if isinstance(model, Functional):
        return model.input, None
    return None


def _layer_name(tensor: Any) -> str:
    history = getattr(tensor, "_keras_history", None)  # (InputLayer, node index, tensor index)
    return history[0].name if history else tensor.name


def input_specs(model: Any) -> tuple | None:
    """The positional input specs Keras 2 would have saved `model` with (None when they are
    unknown)."""
    import tensorflow as tf

    graph = _graph_inputs(model)
    if graph is not None:
        structure, first = graph
        return (
            tf.nest.map_structure(
                lambda x: _spec(tf, x.shape, x.dtype, keras2_input_name(_layer_name(x), first)),
                structure,
            ),
        )
    shapes = getattr(model, "_build_shapes_dict", None)
    if not shapes or len(shapes) != 1:
        return (
            None  # never called, or a call with several arguments: Keras 3's own signature is used
        )
    structure = next(iter(shapes.values()))
    names = iter(pseudo_names(structure, "input_", shapes=True))
    dtype = getattr(model, "input_dtype", None) or "float32"

    def to_spec(shape):
        return _spec(tf, shape, dtype, next(names))

    if _is_shape(structure):
        return (to_spec(structure),)
    return (_map_shapes(structure, to_spec),)


def _map_shapes(structure: Any, fn) -> Any:
    if _is_shape(structure):
        return fn(structure)
    if isinstance(structure, dict):
        return {key: _map_shapes(structure[key], fn) for key in sorted(structure)}
    return type(structure)(_map_shapes(value, fn) for value in structure)


def output_names(model: Any) -> list[str] | None:
    """Keras 2's output keys of a functional or Sequential model: the names of its output layers
    (else None)."""
    import keras

    if isinstance(model, keras.Sequential):
        return [model.layers[-1].name] if model.layers else None
    names = getattr(model, "output_names", None)
    return list(names) if names and _graph_inputs(model) is not None else None


def default_signature(model: Any) -> Any:
    """`serving_default` as Keras 2 wrote it for `model`: a concrete function, or None where it
    cannot be known."""
    import tensorflow as tf

    specs = input_specs(model)
    if specs is None:
        return None
    names = output_names(model)

    def serving_default(*args):
        outputs = model(*args, training=False)
        keys = names or pseudo_names(outputs, "output_")
        return dict(zip(keys, tf.nest.flatten(outputs), strict=True))

    return tf.function(serving_default).get_concrete_function(*specs)
