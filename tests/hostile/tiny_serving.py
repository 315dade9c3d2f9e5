"""Helpers of the hostile modules: a tiny SavedModel written without training (the hostile part is
elsewhere)."""

from __future__ import annotations

import os


def save(path: str, marker: str = "") -> None:
    """serving_default(examples) -> zeros [n, 3]; `marker` goes into `<path>/assets.extra/marker` to
    tell models
    apart."""
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(examples):
        return {"outputs": tf.zeros([tf.size(examples), 3])}

    tf.saved_model.save(tf.Module(), path, signatures={"serving_default": serve})
    if marker:
        os.makedirs(os.path.join(path, "assets.extra"), exist_ok=True)
        with open(os.path.join(path, "assets.extra", "marker"), "w") as f:
            f.write(marker)
