"""A frozen serving graph read around its ParseExample op (for cut.py).

Which tensor each parsed feature key is, which tensors the outputs consume up to the parse op, and
constant copies of the lookup tables among the graph's resources: TFLite initializes hash tables
from constants only, so a table filled from a file (a tf.Transform vocabulary) would be converted
empty.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def constant_tables(resources: Sequence[Any], handles: Sequence[Any]) -> dict[int, Any]:
    """Constant copies of the lookup tables among a frozen graph's resource inputs.

    The copy's default value is unused: each lookup op brings its own.

    Args:
      resources: the frozen graph's resource inputs.
      handles: the signature's handles for them, in the same order.

    Returns:
      {index in `resources`: a StaticHashTable holding the same keys and values}.
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
        keys, values = tf.raw_ops.LookupTableExportV2(
            table_handle=handle, Tkeys=key_dtype, Tvalues=value_dtype
        )
        default = tf.zeros([], value_dtype) if value_dtype != tf.string else tf.constant("")
        tables[i] = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(keys, values), default
        )
    return tables


def parse_outputs(parse: Any) -> tuple[dict[str, Any], dict[str, list]]:
    """The tensors a ParseExample(V2) op yields, by feature key.

    Args:
      parse: the op.

    Returns:
      ({dense key: tensor}, {sparse or ragged key: [its tensors]}).
    """
    import tensorflow as tf

    def keys(tensors) -> list[str]:
        values = []
        for t in tensors:
            values += [k.decode() for k in tf.make_ndarray(t.op.get_attr("value")).ravel()]
        return values

    num_sparse = (
        parse.get_attr("num_sparse")
        if parse.type == "ParseExampleV2"
        else parse.get_attr("Nsparse")
    )
    num_dense = len(parse.get_attr("Tdense"))
    if (
        parse.type == "ParseExampleV2"
    ):  # inputs: serialized, names, sparse_keys, dense_keys, ragged_keys, defaults
        sparse, dense, ragged = (
            keys([parse.inputs[2]]),
            keys([parse.inputs[3]]),
            keys([parse.inputs[4]]),
        )
    else:  # serialized, names, sparse_keys..., dense_keys..., dense_defaults...
        sparse = keys(parse.inputs[2 : 2 + num_sparse])
        dense = keys(parse.inputs[2 + num_sparse : 2 + num_sparse + num_dense])
        ragged = []
    out = list(parse.outputs)
    sparse_tensors = {
        k: [out[i], out[num_sparse + i], out[2 * num_sparse + i]] for i, k in enumerate(sparse)
    }
    dense_tensors = dict(zip(dense, out[3 * num_sparse : 3 * num_sparse + num_dense], strict=True))
    rest = out[3 * num_sparse + num_dense :]
    sparse_tensors.update({k: [rest[i], rest[len(ragged) + i]] for i, k in enumerate(ragged)})
    return dense_tensors, sparse_tensors


def consumed_tensors(fetches: Sequence[Any], stop: Any) -> set[str]:
    """Names of the tensors the fetches depend on, walking back from them but not past `stop`.

    Args:
      fetches: the tensors to start from.
      stop: the op not to walk past.

    Returns:
      The tensor names.
    """
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
