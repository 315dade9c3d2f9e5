"""Small TFX-layout data sets for tests: any schema, any split names, gzipped or not."""

from __future__ import annotations

import gzip
import os
import struct
from collections.abc import Iterable, Mapping, Sequence

from google.protobuf import text_format


def example_bytes(row: Mapping[str, Sequence]) -> bytes:
    """Serialize one row {name: list of int|float|bytes|str} as a tf.Example."""
    import tensorflow as tf

    feature = {}
    for name, values in row.items():
        values = list(values)
        if values and isinstance(values[0], (bytes, str)):
            feature[name] = tf.train.Feature(
                bytes_list=tf.train.BytesList(
                    value=[v.encode() if isinstance(v, str) else v for v in values]
                )
            )
        elif values and isinstance(values[0], float):
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
        else:
            feature[name] = tf.train.Feature(
                int64_list=tf.train.Int64List(value=[int(v) for v in values])
            )
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def write_split(
    root: str,
    split: str,
    rows: Iterable[Mapping[str, Sequence]],
    gzipped: bool = True,
    shards: int = 1,
) -> list[str]:
    """Write rows as TFRecords under `<root>/Split-<split>/`, returning the file paths."""
    import tensorflow as tf

    rows = list(rows)
    directory = os.path.join(root, f"Split-{split}")
    os.makedirs(directory, exist_ok=True)
    paths = []
    options = tf.io.TFRecordOptions(compression_type="GZIP" if gzipped else "")
    for shard in range(shards):
        name = f"data_tfrecord-{shard:05d}-of-{shards:05d}" + (".gz" if gzipped else "")
        path = os.path.join(directory, name)
        with tf.io.TFRecordWriter(path, options) as writer:
            for row in rows[shard::shards]:
                writer.write(example_bytes(row))
        paths.append(path)
    return paths


def write_schema(path: str, features: Mapping[str, str], dense: bool = True) -> str:
    """Write a Schema text proto: {name: "INT"|"FLOAT"|"BYTES"}, dense features of shape [1]."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    schema = schema_pb2.Schema()
    for name, kind in features.items():
        f = schema.feature.add(name=name, type=schema_pb2.FeatureType.Value(kind))
        if dense:
            f.presence.min_fraction = 1.0
            f.shape.dim.add(size=1)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text_format.MessageToString(schema))
    return path


def gzip_garbage(path: str) -> None:
    """Write a gzipped file that is not a TFRecord file."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with gzip.open(path, "wb") as fh:
        fh.write(struct.pack("<Q", 10**12) + b"not a tfrecord at all")
