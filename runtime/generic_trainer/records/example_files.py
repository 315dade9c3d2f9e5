"""The files of TFX artifacts, read without TensorFlow: the one file in a directory, an Examples
artifact's splits, TFRecord checks and records, and each file's compression (by content).

`one_file` resolves an artifact directory holding one file (SchemaGen's schema.pbtxt, the Tuner's
best_hyperparameters.txt); `split_file_patterns` finds `<dir>/Split-<name>/*`; `check_readable`
and `check_splits_hold_records` refuse what no reader could use (UserInputError naming the input);
`read_records` yields a file's records; `compression_fn` tells the tf.data readers which files are
gzipped (the only function here that imports TensorFlow, for gs:// through tf.io.gfile).
"""

from __future__ import annotations

import glob
import gzip
import os
import struct
import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from generic_trainer.artifacts import files
from generic_trainer.errors import UserInputError
from generic_trainer.records import record_framing

if TYPE_CHECKING:
    import tensorflow as tf

_GZIP_MAGIC = b"\x1f\x8b"


def one_file(path: str, input_name: str, pattern: str = "*", usual: str = "") -> str:
    """`path` itself, or when it is a directory the one file in it matching `pattern` (hidden files
    aside).

    TFX artifacts are directories holding one file (SchemaGen's schema.pbtxt, the Tuner's
    best_hyperparameters.txt); anything but exactly one is a UserInputError naming `input_name`
    (and `usual`, the file such a directory usually holds).
    """
    if not os.path.isdir(path):
        return path
    found = split_files(os.path.join(path, pattern))
    if len(found) != 1:
        kind = "file" if pattern == "*" else f"{pattern} file"
        what = f"no {kind}" if not found else f"{len(found)} {kind}s ({', '.join(found)})"
        raise UserInputError(
            input_name,
            f"directory {path} holds {what}; expected exactly one"
            + (f" ({usual})" if usual else ""),
        )
    return found[0]


def split_file_patterns(
    examples_dir: str, splits: Sequence[str], input_name: str = "--examples"
) -> list[str]:
    """Returns one file pattern (`<dir>/Split-<name>/*`) per split of a TFX Examples artifact.

    Also accepts the old TFX layout `<dir>/<name>/`.
    """
    if not os.path.isdir(examples_dir):
        raise UserInputError(input_name, f"directory {examples_dir} does not exist")
    present = sorted(
        e.name[len("Split-") :] if e.name.startswith("Split-") else e.name
        for e in os.scandir(examples_dir)
        if e.is_dir()
    )
    patterns = []
    for split in splits:
        split_dir = next(
            (d for d in (f"Split-{split}", split) if os.path.isdir(os.path.join(examples_dir, d))),
            None,
        )
        if split_dir is None:
            raise UserInputError(
                input_name,
                f"{examples_dir} has no split {split!r} (no Split-{split}/ directory); "
                f"splits present: {', '.join(present) or 'none'}",
            )
        path = os.path.join(examples_dir, split_dir)
        check_split_entries(path, split, input_name)
        if not any(e.is_file() and not e.name.startswith(".") for e in os.scandir(path)):
            raise UserInputError(input_name, f"split {split!r} ({path}) holds no files")
        patterns.append(os.path.join(path, "*"))
    return patterns


def check_split_entries(path: str, split: str, input_name: str = "--examples") -> None:
    """UserInputError naming the first entry of the split dir `path` that is not a regular file: the
    readers take every name in it (a FIFO would block them for ever, `/dev/zero` never ends, a
    directory such as
    `.ipynb_checkpoints` fails them late), so a split holds its record files only."""
    for entry in sorted(os.scandir(path), key=lambda e: e.name):
        kind = files.special_kind(entry.path)
        if kind is None and not os.path.exists(entry.path):
            kind = f"symlink to {os.path.realpath(entry.path)}, which does not exist"
        if kind is not None:
            raise UserInputError(
                input_name,
                f"split {split!r}: {entry.path} is a {kind}, not a record file; a "
                "split directory holds its record files only (move it out)",
            )


def damaged_file(file_patterns: Sequence[str], budget: int = 200_000) -> str | None:
    """ "split 'x', <file>: <what is wrong>" for the first file whose records cannot be read to
    their end (a truncated gzip stream, garbage after it, a record cut short), reading at most
    `budget` records; else None."""
    for pattern in file_patterns:
        for path in split_files(pattern):
            try:
                for _ in read_records(path, budget, damaged_input="--examples"):
                    budget -= 1
            except UserInputError as e:
                return f"split {split_name(pattern)!r}, {e.args[0].split(': ', 1)[1]}"
            except (OSError, EOFError, zlib.error) as e:
                return f"split {split_name(pattern)!r}, {path}: {type(e).__name__}: {e}"
            if budget <= 0:
                return None
    return None


def check_readable(file_patterns: Sequence[str], input_name: str = "--examples") -> int:
    """Checks that every file matched is a readable TFRecord file; returns the number of files.

    Reads only the first record of each file (checksums included). Compression is recognised by
    content, so a gzipped file whose name lacks `.gz` passes (the dataset factory reads it too).
    """
    count = 0
    for pattern in file_patterns:
        files = split_files(pattern)
        if not files:
            raise UserInputError(input_name, f"no files match {pattern}")
        for path in files:
            problem = _first_record_problem(path)
            if problem:
                raise UserInputError(
                    input_name, f"{path} is not a readable TFRecord file: {problem}"
                )
        count += len(files)
    return count


def _is_gzip(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == _GZIP_MAGIC


def _first_record_problem(path: str) -> str | None:
    """What is wrong with the first record of a TFRecord file, or None (an empty file is fine)."""
    try:
        gzipped = _is_gzip(path)
        with (gzip.open if gzipped else open)(path, "rb") as f:
            header = f.read(12)
            if not header:
                return None
            if len(header) < 12:
                return "it ends inside the first record header"
            (length,) = struct.unpack("<Q", header[:8])
            if _masked_crc32c(header[:8]) != struct.unpack("<I", header[8:])[0]:
                return "the first record header fails its checksum (not TFRecord data)"
            data = record_framing.read_payload(f, length, _left(path, f, gzipped), "record 1")
            footer = f.read(4)
            if len(data) < length or len(footer) < 4:
                return "it ends inside the first record"
            if _masked_crc32c(data) != struct.unpack("<I", footer)[0]:
                return "the first record fails its checksum"
    except record_framing.RecordTooLong as e:
        return str(e)
    except (OSError, EOFError, zlib.error) as e:
        return f"{type(e).__name__}: {e}"
    return None


def _left(path: str, f: object, gzipped: bool) -> int:
    """What the file at `path` can still hold after the position of `f` (its own stream when
    plain)."""
    if gzipped:
        return os.path.getsize(path) * record_framing.GZIP_MAX_RATIO
    return record_framing.bytes_left(f, gzipped=False)


def _masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC32C of `data`."""
    try:
        import google_crc32c  # a dependency of google-cloud-storage; C implementation

        crc = google_crc32c.value(data)
    except ImportError:
        crc = _crc32c_py(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _crc32c_py(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def split_name(file_pattern: str) -> str:
    """The split a file pattern of `split_file_patterns` reads (`<dir>/Split-train/*` ->
    `train`)."""
    name = os.path.basename(os.path.dirname(file_pattern))
    return name[len("Split-") :] if name.startswith("Split-") else name


def read_records(
    path: str, limit: int | None = None, damaged_input: str | None = None
) -> Iterator[bytes]:
    """The records of a TFRecord file (gzipped or plain), without TensorFlow; stops after `limit`.

    Stops quietly at a record cut short (`check_readable` and TensorFlow's reader report damage),
    unless `damaged_input` names the input to blame: then it raises UserInputError.
    """
    gzipped = _is_gzip(path)
    count = 0
    with (gzip.open if gzipped else open)(path, "rb") as f:
        while limit is None or count < limit:
            header = f.read(12)
            if len(header) < 12:
                return
            (length,) = struct.unpack("<Q", header[:8])
            try:
                data = record_framing.read_payload(
                    f, length, _left(path, f, gzipped), f"record {count + 1}"
                )
            except record_framing.RecordTooLong as e:
                if damaged_input:
                    raise UserInputError(
                        damaged_input, f"{path} ends inside a record ({e})"
                    ) from None
                return
            if len(data) < length or len(f.read(4)) < 4:
                if damaged_input:
                    raise UserInputError(damaged_input, f"{path} ends inside a record")
                return
            count += 1
            yield data


def split_files(pattern: str) -> list[str]:
    """The files (not directories) `pattern` matches, sorted."""
    return sorted(f for f in glob.glob(pattern) if os.path.isfile(f))


def check_splits_hold_records(file_patterns: Sequence[str], input_name: str = "--examples") -> None:
    """Each split's files hold at least one record (a split of empty files is refused, without
    TensorFlow)."""
    for pattern in file_patterns:
        files = split_files(pattern)
        if not any(next(read_records(f, 1), None) is not None for f in files):
            raise UserInputError(
                input_name,
                f"split {split_name(pattern)!r} holds no records: its "
                f"{len(files)} file(s) in {os.path.dirname(pattern)} are empty",
            )


def compression_fn(patterns: Sequence[str]) -> Callable[[str | tf.Tensor], str | tf.Tensor]:
    """A function path -> compression type ("GZIP" or "") for the files `patterns` match.

    Each file's compression is found by its content (the gzip magic bytes), whatever its name says:
    a gzipped file not named `.gz`, a plain one named `.gz`, both in one split, are each read right.
    """
    import tensorflow as tf

    files = [f for p in patterns for f in sorted(tf.io.gfile.glob(p))]
    if not files:
        raise UserInputError(
            "file_patterns", f"no files match {', '.join(patterns) or '(no patterns given)'}"
        )
    gzipped = []
    for f in files:
        with tf.io.gfile.GFile(f, "rb") as handle:
            if handle.read(2) == _GZIP_MAGIC:
                gzipped.append(f)
    if len(gzipped) in (0, len(files)):
        kind = "GZIP" if gzipped else ""
        return lambda path: kind
    gzipped_names = tf.constant(gzipped)
    return lambda path: tf.where(tf.reduce_any(tf.equal(gzipped_names, path)), "GZIP", "")
