"""Tables (CSV, Parquet) read for tf.Examples: headers, typed Arrow batches, type inference, the
place of a bad cell.

No Beam and no TensorFlow here: import-examples runs these functions inside its Beam workers.

- CSV cells are read with pyarrow's CSV reader in blocks; only an empty cell is missing (`NA`,
  `null` and `nan` are values). Parquet files are read in row batches.
- Types are tensorflow-metadata's: INT (int64), FLOAT (float32), BYTES. Inference looks at every
  value of a column: all integers -> INT, else all numbers -> FLOAT, else BYTES.
- example_encoding.py writes the typed batches as tf.Examples and puts each in its split.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, BinaryIO

INT, FLOAT, BYTES = "INT", "FLOAT", "BYTES"
TYPE_LEVELS = (INT, FLOAT, BYTES)  # inference only ever moves right
CSV_BLOCK_BYTES = 1 << 20
MAX_STRING_DOMAIN_SIZE = 100  # TFDV infer_schema's max_string_domain_size default (inference.py)
PARQUET_BATCH_ROWS = 16384

Opener = Callable[[str], BinaryIO]


def _arrow_type(kind: str) -> Any:
    import pyarrow as pa

    return {INT: pa.int64(), FLOAT: pa.float32(), BYTES: pa.binary()}[kind]


# --------------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------------


def read_columns(path: str, fmt: str, opener: Opener) -> list[str]:
    """The column names of a CSV file (its first line) or a Parquet file."""
    if fmt == "parquet":
        import pyarrow.parquet as pq

        with opener(path) as f:
            return list(pq.ParquetFile(f).schema_arrow.names)
    with opener(path) as f:
        text = io.TextIOWrapper(
            f, encoding="utf-8-sig", newline=""
        )  # a UTF-8 byte order mark is no part of a name
        try:
            header = next(csv.reader(text), None)
        except (UnicodeDecodeError, csv.Error) as e:
            raise ValueError(f"cannot read its header line: {e}") from None
    if not header:
        raise ValueError("it is empty (expected a header line naming the columns)")
    return list(header)


def has_rows(path: str, fmt: str, opener: Opener) -> bool:
    """True when a table holds at least one row below its header (a CSV file's blank lines are no
    rows)."""
    if fmt == "parquet":
        import pyarrow.parquet as pq

        with opener(path) as f:
            return pq.ParquetFile(f).metadata.num_rows > 0
    with opener(path) as f:
        reader = csv.reader(io.TextIOWrapper(f, encoding="utf-8-sig", newline=""))
        try:
            next(reader, None)
            return any(row for row in reader)
        except (UnicodeDecodeError, csv.Error):
            return True  # damage: the full read names the line


def parquet_kinds(path: str, opener: Opener) -> dict[str, str | None]:
    """Column -> INT/FLOAT/BYTES of a Parquet file's Arrow schema (None for a type tf.Example cannot
    hold)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    with opener(path) as f:
        schema = pq.ParquetFile(f).schema_arrow
    kinds: dict[str, str | None] = {}
    for field in schema:
        t = field.type
        if pa.types.is_integer(t) or pa.types.is_boolean(t):
            kinds[field.name] = INT
        elif pa.types.is_floating(t) or pa.types.is_decimal(t):
            kinds[field.name] = FLOAT
        elif any(
            check(t)
            for check in (
                pa.types.is_string,
                pa.types.is_binary,
                pa.types.is_large_string,
                pa.types.is_large_binary,
            )
        ):
            kinds[field.name] = BYTES
        else:
            kinds[field.name] = None
    return kinds


def iter_batches(
    path: str, fmt: str, columns: Sequence[str], kinds: Mapping[str, str] | None, opener: Opener
) -> Iterator[Any]:
    """Arrow record batches of a file; with `kinds` every column is converted to its type, else CSV
    cells stay strings (for inference). Conversion errors are raised as pyarrow's ArrowInvalid."""
    import pyarrow as pa

    if fmt == "parquet":
        import pyarrow.parquet as pq

        with opener(path) as f:
            for batch in pq.ParquetFile(f).iter_batches(batch_size=PARQUET_BATCH_ROWS):
                if kinds is None:
                    yield batch
                    continue
                arrays = []
                for name, column in zip(batch.schema.names, batch.columns, strict=True):
                    target = _arrow_type(kinds[name])
                    if pa.types.is_boolean(column.type):
                        column = column.cast(pa.int8())
                    arrays.append(column.cast(target))
                yield pa.RecordBatch.from_arrays(arrays, names=batch.schema.names)
        return
    import pyarrow.csv as pcsv

    types = {c: (_arrow_type(kinds[c]) if kinds else pa.string()) for c in columns}
    with opener(path) as f:
        convert = pcsv.ConvertOptions(
            column_types=types,
            null_values=[""],
            strings_can_be_null=True,
            quoted_strings_can_be_null=True,
        )
        reader = pcsv.open_csv(
            f, read_options=pcsv.ReadOptions(block_size=CSV_BLOCK_BYTES), convert_options=convert
        )
        yield from reader


# --------------------------------------------------------------------------------------------------
# Type inference
# --------------------------------------------------------------------------------------------------


def infer_batch(batch: Any) -> dict[str, Any]:
    """Per-batch facts for inference (inference.py's form): {"rows": n, "columns": {name: [level or
    -1,
    non-null count, 1, 1]}, "values": {name: distinct strings or None}} (a cell holds one value)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out: dict[str, Any] = {"rows": batch.num_rows, "columns": {}, "values": {}}
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        values = pc.drop_null(column)
        if len(values) == 0:
            level = -1
        elif pa.types.is_integer(column.type) or pa.types.is_boolean(column.type):
            level = 0
        elif pa.types.is_floating(column.type) or pa.types.is_decimal(column.type):
            level = 1
        elif pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            level = 2
            for candidate, target in ((0, pa.int64()), (1, pa.float64())):
                try:
                    pc.cast(values, target)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    continue
                level = candidate
                break
        else:
            level = 2
        out["columns"][name] = [level, len(values), 1, 1] if len(values) else [-1, 0, None, None]
        if level == 2 or pa.types.is_string(column.type) or pa.types.is_binary(column.type):
            out["values"][name] = distinct_strings(values)
    return out


def distinct_strings(values: Any, limit: int = MAX_STRING_DOMAIN_SIZE) -> set[str] | None:
    """The distinct values of a string or binary Arrow array as text; None when there are more than
    `limit` (TFDV's max_string_domain_size) or one is not UTF-8 (no string domain then)."""
    import pyarrow.compute as pc

    unique = pc.unique(values)
    if len(unique) > limit:
        return None
    try:
        return {v if isinstance(v, str) else v.decode("utf-8") for v in unique.to_pylist()}
    except (UnicodeDecodeError, AttributeError):
        return None


def kinds_from_schema(schema: Any) -> dict[str, str]:
    """Feature -> INT/FLOAT/BYTES of a Schema (TYPE_UNKNOWN and STRUCT features are refused by the
    caller)."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    return {f.name: schema_pb2.FeatureType.Name(f.type) for f in schema.feature}


# --------------------------------------------------------------------------------------------------
# Finding a bad cell
# --------------------------------------------------------------------------------------------------


def _parses(cell: str, kind: str) -> bool:
    if kind == INT:
        try:
            int(cell)
        except ValueError:
            return False
        return -(1 << 63) <= int(cell) < (1 << 63)
    if kind == FLOAT:
        try:
            float(cell)
        except ValueError:
            return False
    return True


def locate_csv_problem(
    path: str, kinds: Mapping[str, str], opener: Opener, source: str = "schema"
) -> str | None:
    """Where a CSV file breaks its types or shape: 'FILE line N column NAME: ...', or None when it
    does not.

    Slow (Python's csv module): called only after the fast reader failed, to name the place.
    """
    with opener(path) as f:
        reader = csv.reader(io.TextIOWrapper(f, encoding="utf-8-sig", newline=""))
        try:
            header = next(reader)
            for row in reader:
                if not row:
                    continue
                if len(row) != len(header):
                    return (
                        f"{path} line {reader.line_num}: {len(row)} cells, but the header has "
                        f"{len(header)} columns"
                    )
                for name, cell in zip(header, row, strict=True):
                    kind = kinds.get(name)
                    if cell != "" and kind and not _parses(cell, kind):
                        return (
                            f"{path} line {reader.line_num} column {name!r}: {cell[:60]!r} is not "
                            f"{'an' if kind == INT else 'a'} {kind} (its type in the {source})"
                        )
        except UnicodeDecodeError as e:
            return f"{path} line {reader.line_num + 1}: not UTF-8 text ({e.reason})"
        except csv.Error as e:
            return f"{path} line {reader.line_num}: {e}"
    return None
