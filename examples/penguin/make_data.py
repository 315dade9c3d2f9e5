"""Write the Palmer penguins table as CSV, and as TFX Examples (train/eval splits) plus its schema.

Output layout under --out (default: this script's directory), as TFX's ExampleGen and
SchemaGen would leave it:

    data/Split-train/data_tfrecord-00000-of-00001.gz   gzipped TFRecords of tf.Example
    data/Split-eval/data_tfrecord-00000-of-00001.gz
    schema.pbtxt                                       tensorflow_metadata Schema, text format
    penguins.csv                                       the same rows as CSV (the pipeline's input:
                                                       `generic-trainer import-examples` turns it
                                                       into Examples)

Rows with a missing value are dropped. A row goes to eval when a stable hash of its index in
the original table is 0 mod 3, else to train, so the split never changes between runs.
The label `species` is an INT: 0, 1, 2 in sorted order of the species names.

Run: .venv/bin/python examples/penguin/make_data.py [--out DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import os

import palmerpenguins
import tensorflow as tf
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

FLOAT_FEATURES = ["bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g"]
STRING_FEATURES = ["island", "sex"]
INT_FEATURES = ["year"]
LABEL_KEY = "species"
SPLITS = ("train", "eval")
DATA_FILE = "data_tfrecord-00000-of-00001.gz"
CSV_FILE = "penguins.csv"


def split_of(row_index: int) -> str:
    """The split of a row of the original table, from a stable hash of its index."""
    digest = hashlib.sha256(str(row_index).encode()).digest()
    return "eval" if int.from_bytes(digest[:8], "big") % 3 == 0 else "train"


def _example(row, species_names: list[str]) -> tf.train.Example:
    feature = {}
    for name in FLOAT_FEATURES:
        feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=[float(row[name])]))
    for name in STRING_FEATURES:
        feature[name] = tf.train.Feature(
            bytes_list=tf.train.BytesList(value=[str(row[name]).encode()])
        )
    for name in INT_FEATURES:
        feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(row[name])]))
    label = species_names.index(row[LABEL_KEY])
    feature[LABEL_KEY] = tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))
    return tf.train.Example(features=tf.train.Features(feature=feature))


def build_schema(table) -> schema_pb2.Schema:
    """The Schema of the written examples: every feature dense (present once, shape [1])."""
    schema = schema_pb2.Schema()

    def add(name: str, type_: int) -> schema_pb2.Feature:
        feature = schema.feature.add(name=name, type=type_)
        feature.presence.min_fraction = 1.0
        feature.presence.min_count = 1
        feature.shape.dim.add(size=1)
        return feature

    for name in FLOAT_FEATURES:
        add(name, schema_pb2.FLOAT)
    for name in STRING_FEATURES:
        add(name, schema_pb2.BYTES).domain = name
        schema.string_domain.add(name=name, value=sorted(str(v) for v in table[name].unique()))
    for name in INT_FEATURES:
        feature = add(name, schema_pb2.INT)
        feature.int_domain.min = int(table[name].min())
        feature.int_domain.max = int(table[name].max())
    label = add(LABEL_KEY, schema_pb2.INT)
    label.int_domain.min = 0
    label.int_domain.max = table[LABEL_KEY].nunique() - 1
    label.int_domain.is_categorical = True
    return schema


def write(out_dir: str) -> dict[str, int]:
    """Write the examples and schema under `out_dir`; return the number of rows per split."""
    table = palmerpenguins.load_penguins().dropna()
    species_names = sorted(table[LABEL_KEY].unique())
    counts = dict.fromkeys(SPLITS, 0)
    writers = {}
    options = tf.io.TFRecordOptions(compression_type="GZIP")
    try:
        for split in SPLITS:
            split_dir = os.path.join(out_dir, "data", f"Split-{split}")
            os.makedirs(split_dir, exist_ok=True)
            writers[split] = tf.io.TFRecordWriter(os.path.join(split_dir, DATA_FILE), options)
        for row_index, row in table.iterrows():
            split = split_of(int(row_index))
            writers[split].write(_example(row, species_names).SerializeToString(deterministic=True))
            counts[split] += 1
    finally:
        for writer in writers.values():
            writer.close()
    with open(os.path.join(out_dir, "schema.pbtxt"), "w", encoding="utf-8") as f:
        f.write(text_format.MessageToString(build_schema(table)))
    write_csv(table, species_names, os.path.join(out_dir, CSV_FILE))
    return counts


def write_csv(table, species_names: list[str], path: str) -> None:
    """The rows as CSV with a header; the label as its class index, like the examples."""
    columns = [LABEL_KEY, *STRING_FEATURES, *FLOAT_FEATURES, *INT_FEATURES]
    out = table[columns].copy()
    out[LABEL_KEY] = [species_names.index(s) for s in out[LABEL_KEY]]
    out.to_csv(path, index=False, float_format="%g")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        default=os.path.dirname(os.path.abspath(__file__)),
        help="directory to write data/ and schema.pbtxt into",
    )
    args = parser.parse_args(argv)
    counts = write(args.out)
    print(f"wrote {counts} examples and schema.pbtxt under {args.out}")


if __name__ == "__main__":
    main()
