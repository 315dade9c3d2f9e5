"""import-examples' Beam steps (module level, so every runner can pickle them): per-file inference
facts, table rows and TFRecords to split-tagged records, the schema written from merged facts.

A record goes to a split as TFX's ExampleGen sends it (`Splitter`): SHA-256 of its deterministic
serialization, or with a partition feature of that feature's serialized `tf.train.Feature` (a
SequenceExample's context feature), modulo the total hash buckets, bisected over the cumulative
buckets; or to the one split of its input pattern (`--input-splits`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from generic_trainer.beam import beam_run, example_encoding, inference, tabular, tfrecords
from generic_trainer.records import example_protos

COUNTER_PREFIX = "examples_"
FACTS_TAG = "facts:"  # the inference facts' output of a TFRecord file (never a split name: no ':')


@dataclasses.dataclass(frozen=True)
class Splitter:
    """Which split a record goes to: the split names, their cumulative buckets (None: the first
    split takes every record), and TFX's partition feature (None: the whole record is hashed)."""

    names: tuple[str, ...]
    cumulative: tuple[int, ...] | None = None
    partition_feature: str | None = None

    def split_of(self, record: bytes, message: Any, where: str) -> str:
        """The split of a canonical record (`message`: the parsed record, or None to parse it)."""
        if self.cumulative is None:
            return self.names[0]
        key = record
        if self.partition_feature is not None:
            if message is None:
                message = example_protos.example_class().FromString(record)
            try:
                key = example_protos.partition_key(message, self.partition_feature, where)
            except ValueError as e:
                raise beam_run.DataError(str(e)) from None
        return self.names[example_encoding.split_index(key, self.cumulative)]


class InferFile:
    """Per table file: inference facts of every batch, merged."""

    def __init__(self, fmt: str, columns: Sequence[str]):
        self.fmt, self.columns = fmt, list(columns)

    def __call__(self, path: str) -> dict[str, Any]:
        try:
            parts = [
                tabular.infer_batch(b)
                for b in tabular.iter_batches(
                    path, self.fmt, self.columns, None, beam_run.open_binary
                )
            ]
        except Exception as e:  # pyarrow's parse errors: find the line
            where = (
                tabular.locate_csv_problem(path, {}, beam_run.open_binary)
                if self.fmt == "csv"
                else None
            )
            raise beam_run.DataError(where or f"{path}: {type(e).__name__}: {e}") from None
        return inference.merge_inference(parts)


def merge(parts: Any) -> dict[str, Any]:
    """CombineGlobally's function: the merged facts of every file."""
    return inference.merge_inference(list(parts))


def _table_error(fmt: str, path: str, kinds: Mapping[str, str], given: bool, e: Exception) -> str:
    """Where a table breaks its types (CSV: the line and column), else the reader's words."""
    where = None
    if fmt == "csv":
        source = "schema" if given else "types inferred from the data"
        where = tabular.locate_csv_problem(path, kinds, beam_run.open_binary, source)
    return where or f"{path}: {type(e).__name__}: {e}"


def encode_file_fn(
    fmt: str, columns: Sequence[str], given_kinds: Mapping[str, str] | None, splitter: Splitter
) -> Any:
    """A DoFn: table file path -> serialized tf.Examples, tagged with their split's name."""
    import apache_beam as beam
    from apache_beam.metrics import Metrics

    class EncodeFile(beam.DoFn):
        def setup(self) -> None:
            self.counters = {
                s: Metrics.counter(beam_run.METRICS_NAMESPACE, COUNTER_PREFIX + s)
                for s in splitter.names
            }

        def process(self, path: str, inferred: Mapping[str, Any] | None = None):
            kinds = given_kinds or inference.kinds_from_inference(inferred, columns)
            counts = dict.fromkeys(splitter.names, 0)
            try:
                rows = 0
                for batch in tabular.iter_batches(path, fmt, columns, kinds, beam_run.open_binary):
                    for record in example_encoding.encode_batch(batch, kinds):
                        rows += 1
                        split = splitter.split_of(record, None, f"{path} row {rows}")
                        counts[split] += 1
                        yield beam.pvalue.TaggedOutput(split, record)
            except beam_run.DataError:
                raise
            except Exception as e:  # pyarrow's conversion and parse errors: name line and column
                raise beam_run.DataError(
                    _table_error(fmt, path, kinds, bool(given_kinds), e)
                ) from None
            for split, n in counts.items():
                if n:
                    self.counters[split].inc(n)

    return EncodeFile()


def import_tfrecord_fn(
    rules: tfrecords.SchemaRules | None, splitter: Splitter, payload_format: str
) -> Any:
    """A DoFn: TFRecord file path -> canonical records tagged with their split, and the file's
    facts (FACTS_TAG)."""
    import apache_beam as beam
    from apache_beam.metrics import Metrics

    class ImportFile(beam.DoFn):
        def setup(self) -> None:
            self.counters = {
                s: Metrics.counter(beam_run.METRICS_NAMESPACE, COUNTER_PREFIX + s)
                for s in splitter.names
            }

        def process(self, path: str):
            counts = dict.fromkeys(splitter.names, 0)
            facts: dict[str, Any] = {"rows": 0, "columns": {}, "seen": {}}
            records = tfrecords.file_records(
                path, beam_run.open_binary, rules, facts, payload_format
            )
            while True:
                # only the reading and splitting: an error downstream of a yield is not the data's
                try:
                    item = next(records, None)
                    if item is None:
                        break
                    split = splitter.split_of(*item, f"{path} record {facts['rows']}")
                except beam_run.DataError:
                    raise
                except ValueError as e:
                    raise beam_run.DataError(str(e)) from None
                counts[split] += 1
                yield beam.pvalue.TaggedOutput(split, item[0])
            yield beam.pvalue.TaggedOutput(FACTS_TAG, facts)
            for split, n in counts.items():
                if n:
                    self.counters[split].inc(n)

    return ImportFile()


class WriteSchema:
    """Writes the inferred schema (from the merged facts) as text; columns None: the features the
    facts saw. `infer_shape`: SchemaGen's infer_feature_shape."""

    def __init__(self, path: str, columns: Sequence[str] | None, infer_shape: bool = True):
        self.path, self.columns = path, list(columns) if columns is not None else None
        self.infer_shape = infer_shape

    def __call__(self, facts: Mapping[str, Any]) -> None:
        from google.protobuf import text_format

        conflict = inference.kind_conflict(facts)
        if conflict:
            raise beam_run.DataError(conflict)
        columns = self.columns if self.columns is not None else inference.feature_names(facts)
        if not columns and not facts.get("sequence"):
            raise beam_run.DataError(
                f"the {facts['rows']} records hold no feature with a value (all empty "
                "records): nothing to train on"
            )
        schema = inference.schema_from_inference(facts, columns, self.infer_shape)
        beam_run.write_text(self.path, text_format.MessageToString(schema))
