"""How much memory `--cache-examples auto` may give the decompressed records, and how much they
take.

The budget is the smaller of a fixed cap and half the memory this run has left: its cgroup's limit
less what the cgroup uses (v2 `memory.max` / `memory.current`, or v1's files), and the machine's
`MemAvailable`. The records' size is measured by decoding them (gzip found by content, never by
name), stopping as soon as it passes the budget: a file's size says little (tf.Examples compress
4x to 120x). Files are read through `tf.io.gfile` (local, gs://); TensorFlow is imported inside.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterable

_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1 << 20
_CGROUP_FILES = (  # (limit, usage) of cgroup v2, then v1
    ("memory.max", "memory.current"),
    ("memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes"),
)


def _read_int(path: str) -> int | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            text = f.read(64).strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def memory_left(cgroup_root: str = "/sys/fs/cgroup", meminfo: str = "/proc/meminfo") -> int | None:
    """Bytes this process can still allocate: the least of its cgroup's room and MemAvailable; None
    when neither is known."""
    found = []
    for limit_name, usage_name in _CGROUP_FILES:
        limit = _read_int(os.path.join(cgroup_root, limit_name))
        usage = _read_int(os.path.join(cgroup_root, usage_name))
        if limit is not None and usage is not None and limit < 1 << 60:  # v1: "no limit" is huge
            found.append(max(limit - usage, 0))
            break
    try:
        with open(meminfo, encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    return min(found) if found else None


def budget(cap: int) -> tuple[int, str]:
    """(bytes the cache may take, why that much): `cap`, or half the memory left when that is
    less."""
    left = memory_left()
    if left is not None and left // 2 < cap:
        return left // 2, f"half the {left >> 20} MiB of memory this run has left"
    return cap, f"the cache's limit of {cap >> 20} MiB"


def decoded_size(paths: Iterable[str], limit: int) -> int | None:
    """The bytes of the files' records once decompressed, or None as soon as they pass `limit`."""
    import tensorflow as tf

    total = 0
    for path in sorted(set(paths)):
        with tf.io.gfile.GFile(path, "rb") as f:
            head = f.read(2)
            if head != _GZIP_MAGIC:
                total += tf.io.gfile.stat(path).length
            else:
                total += _gunzipped_size(head, f, limit - total)
        if total > limit:
            return None
    return total


def _gunzipped_size(head: bytes, f: object, limit: int) -> int:
    """The decompressed size of the gzip stream `f` (`head`: its bytes already read), counting at
    most past `limit` (every member of a multi-member file)."""
    size, data = 0, head
    decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
    while size <= limit:
        data = data + f.read(_CHUNK)
        if not data:
            break
        while data and size <= limit:
            size += len(decoder.decompress(data, _CHUNK))
            data = decoder.unconsumed_tail
            if decoder.eof:
                data, decoder = decoder.unused_data, zlib.decompressobj(16 + zlib.MAX_WBITS)
                if not data:
                    break
    return size
