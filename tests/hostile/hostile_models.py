"""Hostile SavedModels for the evaluate and infra-validate sandbox: one that never answers, one that
allocates
without bound. Their serving_default takes serialized tf.Examples, as a good model's does."""

from __future__ import annotations

import os


def _save(path: str, serve) -> str:
    import tensorflow as tf

    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tf.saved_model.save(tf.Module(), path, signatures={"serving_default": serve})
    return path


def hanging(path: str) -> str:
    """serving_default loops forever (a while loop whose condition never turns false)."""
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(examples):
        n = tf.while_loop(
            lambda i: tf.size(examples) >= 0, lambda i: i + 1, [tf.constant(0, tf.int64)]
        )[0]
        return {"probabilities": tf.fill([tf.size(examples), 3], tf.cast(n, tf.float32))}

    return _save(path, serve)


def allocating(path: str, megabytes_per_step: int = 64) -> str:
    """serving_default keeps allocating: a loop that concatenates a fresh `megabytes_per_step` block
    each turn, for ever (until the memory limit stops it).

    One turn at a time (parallel_iterations=1): with TensorFlow's default of 10, the next turns'
    blocks are allocated in parallel, and at the limit each of them fails on its own after the CPU
    allocator's 10 s wait for memory to be freed, one after another: 90 s instead of 10 per call.
    """
    import tensorflow as tf

    floats = megabytes_per_step * 1024 * 1024 // 4

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(examples):
        def grow(i, held):
            return i + 1, tf.concat([held, tf.fill([floats], tf.cast(i, tf.float32))], axis=0)

        _, held = tf.while_loop(
            lambda i, held: tf.size(examples) >= 0,
            grow,
            [tf.constant(0), tf.zeros([0])],
            shape_invariants=[None, tf.TensorShape([None])],
            parallel_iterations=1,
        )
        return {"probabilities": tf.fill([tf.size(examples), 3], held[0])}

    return _save(path, serve)
