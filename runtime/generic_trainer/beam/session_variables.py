"""Variables a TF1 session load of a Keras 3 SavedModel leaves unset, set from the restored ones.

tfx_bsl's RunInference loads a SavedModel as TF Serving does, into a TF1 session: the loader runs
the checkpoint's restore op and nothing else. A Keras 3 model saved with `tf.saved_model.save`
(the TFX idiom: `tf.saved_model.save(model, dir, signatures=...)`, `model.tft_layer = ...` to
track a tf.Transform layer; Keras 2's `model.save(dir, save_format='tf')` under Keras 3 is written
that way too) is saved with two variables for each of its own: Keras 3's `Variable.
_export_to_saved_model_graph` (keras 3.x, backend/tensorflow/core.py) exports the tf.Variable it
wraps (`Y`, the variable the signatures read) and saves, as the Keras variable, a new
`X = tf.Variable(Y)`. The checkpoint restores `X`; `Y` is never set, and every signature fails
with "Could not find variable dense/kernel" (keras issues 19274 and 20095). `tf.saved_model.load`
binds the signatures to the restored objects, so evaluate and infra-validate serve the same model.

`X`'s initializer is in the graph, `AssignVariableOp(X, ReadVariableOp(Y))`: after the load, each
such `Y` left unset while `X` is set gets `X`'s value. A model without the defect has no such pair
and is left as loaded; nothing is set that the model would not otherwise fail to read.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)


def _initialized_from() -> Any:
    """(Y, X) handle tensors of the graph: `X`'s initializer reads `Y` (`X = tf.Variable(Y)`)."""
    import tensorflow as tf

    pairs = []
    for op in tf.compat.v1.get_default_graph().get_operations():
        if op.type != "AssignVariableOp":
            continue
        target, value = op.inputs[0], op.inputs[1]
        if value.op.type != "ReadVariableOp":
            continue
        source = value.op.inputs[0]
        if source.op.type == "VarHandleOp" and target.op.type == "VarHandleOp":
            pairs.append((source, target))
    return pairs


def set_unset_variables(session: Any) -> list[str]:
    """Give each variable the restore left unset the value of the restored variable initialized
    from it (see the module doc).

    Args:
      session: a tf.compat.v1.Session a SavedModel was loaded into (tfx_bsl's loaded model).

    Returns:
      The names of the variables set (empty: the model needed nothing).
    """
    import tensorflow as tf

    with session.graph.as_default():
        pairs = _initialized_from()
        if not pairs:
            return []
        is_set = tf.raw_ops.VarIsInitializedOp
        found = session.run([(is_set(resource=y), is_set(resource=x)) for y, x in pairs])
        todo = [
            (y, x)
            for (y, x), (y_set, x_set) in zip(pairs, found, strict=True)
            if x_set and not y_set
        ]
        if not todo:
            return []
        session.run(
            [
                tf.raw_ops.AssignVariableOp(
                    resource=y,
                    value=tf.raw_ops.ReadVariableOp(resource=x, dtype=x.op.get_attr("dtype")),
                )
                for y, x in todo
            ]
        )
    names = sorted(y.op.name for y, _ in todo)
    log.info(
        "the SavedModel's restore left %d variables unset (a Keras 3 model saved with "
        "tf.saved_model.save): set from the variables restored for them: %s",
        len(names),
        ", ".join(names[:5]) + (", ..." if len(names) > 5 else ""),
    )
    return names
