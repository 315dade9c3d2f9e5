"""Builds the same small models with `tf.keras` and saves them the Keras 2 ways: `python
save_models.py OUT`.

Run once with TF_USE_LEGACY_KERAS=1 (tf.keras is tf_keras: the oracle, Keras 2's own SavedModel) and
once without (tf.keras is Keras 3, saved through generic-trainer's Keras 2 bridge). Every weight is
set from a fixed formula, so both processes hold the same model and must compute the same outputs.
Writes OUT/<model>/<how> for every model and save call.
"""

import os
import sys

import numpy as np
import tensorflow as tf

keras = tf.keras
LEGACY = os.environ.get("TF_USE_LEGACY_KERAS") == "1"


def penguin_simple():
    """TFX's penguin_simple tutorial model: a list of named Inputs, auto-named Dense layers."""
    inputs = [
        keras.layers.Input(shape=(1,), name=f)
        for f in ["culmen_length_mm", "culmen_depth_mm", "flipper_length_mm", "body_mass_g"]
    ]
    d = keras.layers.concatenate(inputs)
    for _ in range(2):
        d = keras.layers.Dense(8, activation="relu")(d)
    return keras.Model(inputs=inputs, outputs=keras.layers.Dense(3)(d))


def functional_dict():
    """Dict inputs of two dtypes, dict outputs (one output layer named, one not)."""
    inputs = {
        "b": keras.Input(shape=(2,), name="b", dtype="int64"),
        "a": keras.Input(shape=(3,), name="a"),
    }
    x = keras.layers.concatenate(
        [inputs["a"], keras.layers.Lambda(lambda t: tf.cast(t, tf.float32))(inputs["b"])]
    )
    return keras.Model(
        inputs, {"score": keras.layers.Dense(2, name="head")(x), "aux": keras.layers.Dense(1)(x)}
    )


def functional_unnamed():
    """One unnamed Input, two outputs in a list."""
    i = keras.Input(shape=(4,))
    return keras.Model(i, [keras.layers.Dense(2)(i), keras.layers.Dense(1, name="other")(i)])


def sequential_input_shape():
    return keras.Sequential([keras.layers.Dense(4, input_shape=(3,)), keras.layers.Dense(1)])


def sequential_named_input():
    return keras.Sequential(
        [keras.Input(shape=(3,), name="feats"), keras.layers.Dense(2, activation="softmax")]
    )


def sequential_built_by_call():
    model = keras.Sequential([keras.layers.Dense(3), keras.layers.Dense(1)])
    model(np.zeros([5, 2], np.float32))
    return model


class Subclassed(keras.Model):
    def __init__(self):
        super().__init__()
        self.hidden = keras.layers.Dense(3)
        self.out = keras.layers.Dense(2)

    def call(self, x):
        return self.out(self.hidden(x))


def subclassed():
    model = Subclassed()
    model(np.zeros([5, 3], np.float32))
    return model


MODELS = [
    penguin_simple,
    functional_dict,
    functional_unnamed,
    sequential_input_shape,
    sequential_named_input,
    sequential_built_by_call,
    subclassed,
]


def set_weights(model) -> None:
    weights = model.get_weights()
    model.set_weights(
        [
            np.sin(np.arange(w.size, dtype=np.float32) + i).reshape(w.shape) * 0.5
            for i, w in enumerate(weights)
        ]
    )


def save(model, path: str, how: str) -> None:
    if how == "model_save":
        model.save(path, save_format="tf")
    elif how == "save_model":
        tf.keras.models.save_model(model, path, save_format="tf")
    else:
        model.save(path)  # Keras 2: a path without extension is a SavedModel


def main(out: str) -> None:
    import contextlib

    if LEGACY:
        hows, bridge = ["model_save"], contextlib.nullcontext
    else:
        from generic_trainer.fit import keras2_saving

        hows, bridge = (
            ["model_save", "save_model", "plain_save"],
            lambda: keras2_saving.bridge("keras3"),
        )
    for build in MODELS:
        model = build()
        set_weights(model)
        for how in hows:
            with bridge():
                save(model, os.path.join(out, build.__name__, how), how)


if __name__ == "__main__":
    main(sys.argv[1])
