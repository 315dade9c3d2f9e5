"""TFRecord framing read without trusting it: a record's length is checked against what the file can
still hold before anything is allocated, and payloads are read in bounded chunks.

A TFRecord header is an 8-byte little-endian length and its checksum; a hostile or damaged file can
claim 2^62 bytes (with a valid checksum), and `f.read(length)` would raise MemoryError or
OverflowError, or allocate gigabytes, before finding the file ends. Every reader of TFRecords in the
runtime's own code (`records/example_files.py`, `beam/tfrecords.py`) reads payloads through
`read_payload`. Standard library only.
"""

from __future__ import annotations

from typing import BinaryIO

GZIP_MAX_RATIO = (
    1032  # deflate's largest expansion: a gzip file never holds more bytes than this x its size
)
_CHUNK = 1 << 20


class RecordTooLong(ValueError):
    """A record header claims more bytes than the file can hold (damaged, or not TFRecord data)."""


def bytes_left(raw: BinaryIO, gzipped: bool) -> int:
    """How many payload bytes the file `raw` (seekable, positioned where reading goes on) can still
    hold:
    what is left of it, or for gzip data GZIP_MAX_RATIO times that."""
    here = raw.tell()
    end = raw.seek(0, 2)
    raw.seek(here)
    return (end - here) * (GZIP_MAX_RATIO if gzipped else 1)


def read_payload(f: BinaryIO, length: int, left: int, where: str) -> bytes:
    """`length` bytes of `f` (fewer when it ends first), read in chunks of at most 1 MiB.

    Args:
      f: the (decompressed) record stream, just after the record's header.
      length: the length the header gives.
      left: what the file can still hold (`bytes_left`).
      where: the file and record, for the error ("a.tfrecord record 3").

    Returns:
      The payload; RecordTooLong when `length` is more than `left`, before reading anything.
    """
    if length > left:
        raise RecordTooLong(
            f"{where}: its header claims {length} bytes, more than the {left} bytes the file can "
            "still hold (damaged, or not TFRecord data)"
        )
    chunks, missing = [], length
    while missing:
        chunk = f.read(min(missing, _CHUNK))
        if not chunk:
            break
        chunks.append(chunk)
        missing -= len(chunk)
    return b"".join(chunks)
