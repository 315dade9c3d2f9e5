"""Hand-made SavedModels whose behaviour is known exactly, for the evaluator and infra-validator
tests."""

from __future__ import annotations

import os


def _save(module, path: str, fn) -> str:
    import tensorflow as tf

    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tf.saved_model.save(module, path, signatures={"serving_default": fn})
    return path


def class_from_feature(
    path: str, feature: str = "pred", num_classes: int = 3, extra_output: bool = False
) -> str:
    """serving_default(examples) -> probabilities 0.8 for the class named by int feature `feature`,
    0.1 otherwise."""
    import tensorflow as tf

    spec = {feature: tf.io.FixedLenFeature([1], tf.int64)}
    rest = (1.0 - 0.8) / (num_classes - 1)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(examples):
        predicted = tf.io.parse_example(examples, spec)[feature][:, 0]
        probs = tf.one_hot(predicted, num_classes) * (0.8 - rest) + rest
        out = {"probabilities": probs}
        if extra_output:
            out["predicted_class"] = predicted
        return out

    return _save(tf.Module(), path, serve)


def float_input(path: str) -> str:
    """serving_default takes a float tensor x [None, 4] instead of serialized tf.Examples."""
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
    def serve(x):
        return {"y": tf.reduce_sum(x, axis=1)}

    return _save(tf.Module(), path, serve)


def raising(path: str, message: str = "this model is broken on purpose") -> str:
    """serving_default takes serialized tf.Examples and fails every call with `message`."""
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(examples):
        tf.debugging.assert_equal(tf.size(examples), -1, message=message)
        return {"outputs": tf.zeros([tf.size(examples), 3])}

    return _save(tf.Module(), path, serve)


def one_row(path: str) -> str:
    """serving_default answers any batch with a single row (declared shape [1, 3]): one row per
    example is broken."""
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(examples):
        return {"outputs": tf.zeros([1, 3]) + tf.cast(tf.size(examples), tf.float32) * 0.0}

    return _save(tf.Module(), path, serve)


def probability_from_feature(path: str, feature: str = "score") -> str:
    """serving_default(examples) -> {"probabilities": float feature `feature` [n, 1]} (a binary
    model)."""
    import tensorflow as tf

    spec = {feature: tf.io.FixedLenFeature([1], tf.float32)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(examples):
        return {"probabilities": tf.io.parse_example(examples, spec)[feature]}

    return _save(tf.Module(), path, serve)


def keras_tensor_inputs(path: str) -> str:
    """A Keras 3 `model.export()` classifier with tensor inputs named after penguin features.

    bill_length_mm and flipper_length_mm: float32 [None, 1]; year: float32 [None] (an INT feature,
    cast, one value per example); softmax over 3 classes, fixed (seeded) weights: no training.
    """
    import keras

    inputs = {
        "bill_length_mm": keras.Input(shape=(1,), name="bill_length_mm"),
        "flipper_length_mm": keras.Input(shape=(1,), name="flipper_length_mm"),
        "year": keras.Input(shape=(), name="year"),
    }
    year = keras.layers.Reshape((1,))(inputs["year"] - 2008.0)
    x = keras.layers.Concatenate()(
        [inputs["bill_length_mm"] / 50.0, inputs["flipper_length_mm"] / 200.0, year]
    )
    outputs = keras.layers.Dense(
        3, activation="softmax", kernel_initializer=keras.initializers.GlorotUniform(seed=7)
    )(x)
    keras.Model(inputs, outputs).export(path, verbose=False)
    return path
