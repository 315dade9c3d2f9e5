"""A run_fn whose serving model takes a raw string input that it hashes (keras.layers.Hashing).

TFLite's built-in ops have no string hashing (StringToHashBucketFast), so `--export-tflite` must
fail clearly, publishing nothing. Nothing is trained: the model is exported as built.
"""

import keras


def run_fn(fn_args):
    island = keras.Input(shape=(1,), name="island", dtype="string")
    bill = keras.Input(shape=(1,), name="bill_length_mm", dtype="float32")
    hashed = keras.layers.Hashing(num_bins=8, output_mode="one_hot")(island)
    x = keras.layers.Concatenate()([hashed, bill])
    outputs = keras.layers.Dense(3, activation="softmax")(x)
    model = keras.Model({"island": island, "bill_length_mm": bill}, outputs)
    model.export(fn_args.serving_model_dir)
