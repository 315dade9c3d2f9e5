"""Typed table batches to serialized tf.Examples, and each record's split.

No Beam and no TensorFlow here: import-examples runs these functions inside its Beam workers.

- `encode_batch` writes each row as a serialized tf.Example byte-for-byte equal to TensorFlow's
  `SerializeToString(deterministic=True)` (features sorted by name), leaving missing cells out.
- `split_index` puts a record in a split the way TFX's ExampleGen does without a partition feature:
  SHA-256 of the serialized record, modulo the total hash buckets, bisected over the cumulative
  buckets.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from generic_trainer.beam.tabular import FLOAT, INT


def _varint_slow(value: int) -> bytes:
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL_VARINTS = [_varint_slow(i) for i in range(1 << 14)]


def varint(value: int) -> bytes:
    """Protocol-buffer varint of an int64 (negative values take ten bytes, as int64 fields do)."""
    return _SMALL_VARINTS[value] if 0 <= value < (1 << 14) else _varint_slow(value)


def _entry(key: bytes, feature: bytes) -> bytes:
    """One Features.feature map entry (field 1): key (1), Feature (2)."""
    content = b"\x0a" + varint(len(key)) + key + b"\x12" + varint(len(feature)) + feature
    return b"\x0a" + varint(len(content)) + content


def _encode_column(name: str, kind: str, column: Any) -> list[bytes]:
    """The serialized map entry of each row's value (b'' where the value is missing)."""
    import numpy as np

    key = name.encode("utf-8")
    n = len(column)
    if kind == FLOAT:
        feature_head = (
            b"\x12\x06\x0a\x04"  # Feature.float_list (2), FloatList.value packed (1), 4 bytes
        )
        probe = _entry(key, feature_head + b"\0\0\0\0")
        prefix = probe[:-4]
        raw = np.asarray(column.fill_null(0).to_numpy(zero_copy_only=False), dtype="<f4").tobytes()
        entries = [prefix + raw[i : i + 4] for i in range(0, 4 * n, 4)]
    elif kind == INT:
        entries = []
        for value in column.to_pylist():
            if value is None:
                entries.append(b"")
                continue
            packed = varint(value)
            int_list = b"\x0a" + varint(len(packed)) + packed  # Int64List.value packed (1)
            entries.append(
                _entry(key, b"\x1a" + varint(len(int_list)) + int_list)
            )  # Feature.int64_list (3)
        return entries
    else:
        entries = []
        for value in column.to_pylist():
            if value is None:
                entries.append(b"")
                continue
            if isinstance(value, str):
                value = value.encode("utf-8")
            bytes_list = b"\x0a" + varint(len(value)) + value  # BytesList.value (1)
            entries.append(
                _entry(key, b"\x0a" + varint(len(bytes_list)) + bytes_list)
            )  # Feature.bytes_list (1)
        return entries
    if column.null_count:
        for i, missing in enumerate(column.is_null().to_pylist()):
            if missing:
                entries[i] = b""
    return entries


def encode_batch(batch: Any, kinds: Mapping[str, str]) -> list[bytes]:
    """Serialized tf.Examples of a typed record batch, features in name order, missing values left
    out."""
    names = sorted(batch.schema.names, key=lambda s: s.encode("utf-8"))
    index = {name: i for i, name in enumerate(batch.schema.names)}
    columns = [_encode_column(name, kinds[name], batch.column(index[name])) for name in names]
    out = []
    for parts in zip(*columns, strict=True):
        features = b"".join(parts)
        out.append(b"\x0a" + varint(len(features)) + features)  # Example.features (1)
    return out


def cumulative_buckets(buckets: Sequence[int]) -> list[int]:
    """[2, 1] -> [2, 3]: the upper bound of each split's hash buckets."""
    total, out = 0, []
    for b in buckets:
        total += b
        out.append(total)
    return out


def split_index(record: bytes, cumulative: Sequence[int]) -> int:
    """The split of a serialized record: SHA-256 of it modulo the total buckets (TFX ExampleGen's
    rule)."""
    bucket = int.from_bytes(hashlib.sha256(record).digest(), "big") % cumulative[-1]
    return bisect.bisect(cumulative, bucket)
