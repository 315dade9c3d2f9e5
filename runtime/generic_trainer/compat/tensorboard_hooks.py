"""A Keras 3 TensorBoard callback whose batch hooks do nothing at its settings gets Keras' empty
ones.

Assumes (Keras 3's `keras/src/callbacks/tensorboard.py`): the callback writes the train graph
from its first batch end when `_should_write_train_graph` is set, through
`_write_keras_model_train_graph()`; `_should_trace` is True when profiling; `update_freq` and
`write_steps_per_second` are attributes; Keras treats a callback whose batch hooks are the base
`Callback`'s as having none (no per-step call, the loop stays asynchronous).
"""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Any

from generic_trainer.compat.base import Patch, Versions

BATCH_HOOKS = (
    "on_batch_begin",
    "on_batch_end",
    "on_train_batch_begin",
    "on_train_batch_end",
    "on_test_batch_begin",
    "on_test_batch_end",
    "on_predict_batch_begin",
    "on_predict_batch_end",
)
GRAPH_ATTRIBUTES = ("_write_keras_model_train_graph", "_should_write_train_graph", "_should_trace")


def hooks_idle(callback: Any) -> bool:
    """Whether a Keras 3 TensorBoard callback's batch hooks write nothing but the train graph.

    True for `update_freq='epoch'`, no profiling, no `write_steps_per_second`, no batch hook
    overridden by a subclass, and no default summary writer recording (the hooks' `batch_*`
    scalars would go to one).
    """
    import keras

    board = keras.callbacks.TensorBoard
    if not isinstance(callback, board) or not hasattr(callback, "_write_keras_model_train_graph"):
        return False
    if any(getattr(type(callback), name) is not getattr(board, name) for name in BATCH_HOOKS):
        return False
    if (
        callback.update_freq != "epoch"
        or getattr(callback, "_should_trace", True)
        or callback.write_steps_per_second
    ):
        return False
    import tensorflow as tf

    return not bool(tf.summary.should_record_summaries())


def _graph_first(method: Any) -> Any:
    """`method` of a TensorBoard callback, writing the pending train graph first."""

    def hook(self, *args, **kwargs):
        if getattr(self, "_should_write_train_graph", False):
            self._should_write_train_graph = False
            self._write_keras_model_train_graph()
        return method(self, *args, **kwargs)

    return hook


class IdleBatchHooks(Patch):
    """The idle TensorBoard callbacks among `callbacks` get the base batch hooks and write the graph
    at
    the first epoch end (or train end); `changed` lists them."""

    versions = (Versions("keras", "3.0", "3.16"),)
    lost = "TensorBoard callbacks with update_freq='epoch' keep their per-step cost"

    def __init__(self, callbacks: Sequence[Any]):
        super().__init__()
        self.changed = [cb for cb in callbacks if hooks_idle(cb)]

    def replacements(self) -> list[tuple[Any, str, Any]]:
        import keras

        base = keras.callbacks.Callback
        out = []
        for cb in self.changed:
            out += [(cb, name, types.MethodType(getattr(base, name), cb)) for name in BATCH_HOOKS]
            out += [
                (cb, name, types.MethodType(_graph_first(getattr(type(cb), name)), cb))
                for name in ("on_epoch_end", "on_train_end")
            ]
        return out
