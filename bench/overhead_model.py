"""The model, data and input pipeline both sides of bench/overhead.py share (plain script and
module).

Penguin-like tf.Examples (four float measurements, `year`, two string features, a 3-class
`species` label that depends on the features), written in TFX layout by `generate()`; a small
Keras 3 MLP over normalized numbers and one-hot strings; a hand-written tf.data pipeline
(TFRecordDataset -> shuffle -> batch -> parse_example -> prefetch); a SavedModel export whose
`serving_default` takes serialized tf.Example, as TFX serves it.
"""

from __future__ import annotations

import glob
import os

NUMERIC = ["bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g", "year"]
STRINGS = {"island": ["Biscoe", "Dream", "Torgersen"], "sex": ["female", "male"]}
LABEL = "species"
# Known from the generator, so neither side spends a pass over the data on statistics.
MEAN = [44.0, 17.0, 200.0, 4200.0, 2008.0]
VARIANCE = [30.0, 4.0, 200.0, 640000.0, 1.0]
SHUFFLE_BUFFER = 10_000  # tfx_bsl's default
TRAIN_SHARDS = 4
EVAL_EXAMPLES = 20_000


def schema_text() -> str:
    """SchemaGen-style schema of the generated data: every feature dense, shape [1]."""
    kinds = {
        **{k: "FLOAT" for k in NUMERIC[:4]},
        "year": "INT",
        **{k: "BYTES" for k in STRINGS},
        LABEL: "INT",
    }
    return "".join(
        f'feature {{ name: "{name}" type: {kind} presence {{ min_fraction: 1.0 min_count: 1 }} '
        "shape { dim { size: 1 } } }\n"
        for name, kind in kinds.items()
    )


def generate(path: str, n_train: int, pool: int = 50_000, seed: int = 0) -> None:
    """Write <path>/Split-train (TRAIN_SHARDS gzip shards, n_train examples), <path>/Split-eval and
    <path>/schema.pbtxt, then <path>/DONE. Examples are drawn from `pool` distinct serialized ones
    (serializing millions of protos in Python would take many minutes; reading costs the same)."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    pool = min(pool, n_train)
    species = rng.integers(0, 3, size=pool)
    island = (species + rng.integers(0, 2, size=pool)) % 3
    sex = rng.integers(0, 2, size=pool)
    centers = np.array(
        [[39.0, 18.5, 190.0, 3700.0], [49.0, 18.5, 196.0, 3730.0], [47.5, 15.0, 217.0, 5080.0]]
    )
    numbers = centers[species] + rng.normal(0, 1, size=(pool, 4)) * np.array([2.5, 1.0, 6.0, 450.0])
    years = rng.integers(2007, 2010, size=pool)
    serialized = []
    for i in range(pool):
        f = tf.train.Example().features.feature
        for j, name in enumerate(NUMERIC[:4]):
            f[name].float_list.value.append(float(numbers[i, j]))
        f["year"].int64_list.value.append(int(years[i]))
        f["island"].bytes_list.value.append(STRINGS["island"][island[i]].encode())
        f["sex"].bytes_list.value.append(STRINGS["sex"][sex[i]].encode())
        f[LABEL].int64_list.value.append(int(species[i]))
        serialized.append(
            tf.train.Example(features=tf.train.Features(feature=f)).SerializeToString()
        )

    def write(split: str, count: int, shards: int) -> None:
        directory = os.path.join(path, f"Split-{split}")
        os.makedirs(directory, exist_ok=True)
        per_shard = -(-count // shards)
        for shard in range(shards):
            name = os.path.join(directory, f"data_tfrecord-{shard:05d}-of-{shards:05d}.gz")
            todo = min(per_shard, count - shard * per_shard)
            with tf.io.TFRecordWriter(name, "GZIP") as writer:
                for start in range(
                    0, todo, 100_000
                ):  # draw in chunks: bounded memory at 5M examples
                    for index in rng.integers(0, pool, size=min(100_000, todo - start)):
                        writer.write(serialized[index])

    write("train", n_train, TRAIN_SHARDS)
    write("eval", EVAL_EXAMPLES, 1)
    with open(os.path.join(path, "schema.pbtxt"), "w", encoding="utf-8") as f:
        f.write(schema_text())
    open(os.path.join(path, "DONE"), "w").close()


def feature_spec() -> dict:
    import tensorflow as tf

    spec = {name: tf.io.FixedLenFeature([1], tf.float32) for name in NUMERIC[:4]}
    spec["year"] = tf.io.FixedLenFeature([1], tf.int64)
    spec.update({name: tf.io.FixedLenFeature([1], tf.string) for name in STRINGS})
    spec[LABEL] = tf.io.FixedLenFeature([1], tf.int64)
    return spec


def dataset(file_patterns: list[str], batch_size: int, shuffle: bool = True):
    """(features, label) batches over every file matched, one pass: the hand-written tf.data
    pipeline."""
    import tensorflow as tf

    files = sorted(f for pattern in file_patterns for f in glob.glob(pattern))
    spec = feature_spec()

    def parse(serialized):
        features = tf.io.parse_example(serialized, spec)
        return features, features.pop(LABEL)

    ds = tf.data.TFRecordDataset(
        files, "GZIP", num_parallel_reads=tf.data.AUTOTUNE if len(files) > 1 else None
    )
    if shuffle:
        ds = ds.shuffle(SHUFFLE_BUFFER)
    ds = ds.batch(batch_size).map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE)


def build_model(units: int = 32, learning_rate: float = 1e-2):
    import keras

    inputs = {
        name: keras.Input(shape=(1,), name=name, dtype="int64" if name == "year" else "float32")
        for name in NUMERIC
    }
    inputs.update({name: keras.Input(shape=(1,), name=name, dtype="string") for name in STRINGS})
    numeric = keras.layers.Concatenate()(
        [keras.ops.cast(inputs[name], "float32") for name in NUMERIC]
    )
    encoded = [keras.layers.Normalization(mean=MEAN, variance=VARIANCE)(numeric)]
    for name, vocabulary in STRINGS.items():
        encoded.append(
            keras.layers.StringLookup(vocabulary=vocabulary, output_mode="one_hot")(inputs[name])
        )
    x = keras.layers.Concatenate()(encoded)
    for _ in range(2):
        x = keras.layers.Dense(units, activation="relu")(x)
    outputs = keras.layers.Dense(3, activation="softmax")(x)
    model = keras.Model(inputs=inputs, outputs=outputs)
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate),
        loss=keras.losses.SparseCategoricalCrossentropy(),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
    )
    return model


def export_serving(model, export_dir: str) -> None:
    """SavedModel whose serving_default parses serialized tf.Example and returns probabilities."""
    import keras
    import tensorflow as tf

    spec = {k: v for k, v in feature_spec().items() if k != LABEL}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(serialized):
        return {"outputs": model(tf.io.parse_example(serialized, spec))}

    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint("serving_default", serve)
    archive.write_out(export_dir, verbose=False)
