"""Write MNIST-like data as TFX's MNIST pipeline reads it: TFRecord files of tf.Example, no splits.

Each example has `image_floats` (784 floats in [-0.5, 0.5], as TFX's MNIST data) and `image_class`
(INT 0-9). The images are made, not downloaded: each class has its own random 28x28 pattern, and
every example is its class's pattern blurred by noise, so a small model learns them in a few hundred
steps. ImportExampleGen (here `generic-trainer import-examples --format tfrecord`) splits them into
train and eval by a stable hash.

Run: .venv/bin/python examples/mnist/make_data.py OUT_DIR [--examples 600] [--files 2] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import numpy as np

IMAGE_KEY = "image_floats"
LABEL_KEY = "image_class"
NUM_PIXELS = 784
NUM_CLASSES = 10


def images(count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(images [count, 784] float32 in [-0.5, 0.5], labels [count] int64), each class's pattern plus
    noise."""
    rng = np.random.default_rng(seed)
    patterns = rng.uniform(-0.5, 0.5, size=(NUM_CLASSES, NUM_PIXELS))
    labels = rng.integers(0, NUM_CLASSES, size=count)
    noisy = 0.6 * patterns[labels] + rng.normal(0.0, 0.15, size=(count, NUM_PIXELS))
    return np.clip(noisy, -0.5, 0.5).astype(np.float32), labels.astype(np.int64)


def write(out_dir: str, count: int = 600, files: int = 2, seed: int = 0) -> list[str]:
    """Write `count` examples into `files` gzipped TFRecord files under `out_dir`; returns their
    paths."""
    import tensorflow as tf

    pixels, labels = images(count, seed)
    os.makedirs(out_dir, exist_ok=True)
    paths = [
        os.path.join(out_dir, f"mnist-{i:05d}-of-{files:05d}.tfrecord.gz") for i in range(files)
    ]
    options = tf.io.TFRecordOptions(compression_type="GZIP")
    for i, path in enumerate(paths):
        with tf.io.TFRecordWriter(path, options) as writer:
            for image, label in zip(pixels[i::files], labels[i::files], strict=True):
                example = tf.train.Example(
                    features=tf.train.Features(
                        feature={
                            IMAGE_KEY: tf.train.Feature(
                                float_list=tf.train.FloatList(value=image.tolist())
                            ),
                            LABEL_KEY: tf.train.Feature(
                                int64_list=tf.train.Int64List(value=[int(label)])
                            ),
                        }
                    )
                )
                writer.write(example.SerializeToString())
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--examples", type=int, default=600)
    parser.add_argument("--files", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for path in write(args.out_dir, args.examples, args.files, args.seed):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
