"""The tf.data pipeline of parsed tf.Example batches: tfx_bsl's `TensorFlowDataset`, at about half
the CPU.

`make_dataset(patterns, options, schema)` gives the batches tfx_bsl's
`TFExampleRecord(...).TensorFlowDataset(options)` gives: the same parsing config
(schemas.parser_config), tensors and order of elements for the same options and seeds. One file at a
time is read by one reader over the file list; several at a time, file readers hand records over in
blocks rather than one by one. The serialized records are shuffled, then batches are parsed in
parallel (tfx_bsl parses on one thread), with the label popped in the same step (bench/README.md).
Records read more than once can be kept in memory after the first epoch (`caches`). `DatasetOptions`
has the fields and defaults of tfx_bsl's `TensorFlowDatasetOptions`; `as_dataset_options` takes
either. TensorFlow is imported inside the functions.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import zlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from generic_trainer.errors import UserInputError
from generic_trainer.records import cache_budget
from generic_trainer.records.example_files import compression_fn
from generic_trainer.records.examples_properties import payload_format_of
from generic_trainer.records.record_parsing import batch_parser

if TYPE_CHECKING:
    import tensorflow as tf
    from tensorflow_metadata.proto.v0 import schema_pb2

log = logging.getLogger("generic_trainer")
AUTOTUNE = -1  # the value of tf.data.AUTOTUNE, without importing TensorFlow
_READ_BLOCK = 128  # records a file reader hands over at a time
_READ_AHEAD = 2  # blocks a file reader reads ahead (memory: cycle length x 3 blocks)
CACHE_AUTO_BYTES = 1 << 30  # cache="auto" keeps the decoded records in memory up to this size


@dataclasses.dataclass(frozen=True)
class DatasetOptions:
    """The fields and defaults of `tfx_bsl.public.tfxio.TensorFlowDatasetOptions`."""

    batch_size: int
    drop_final_batch: bool = False
    num_epochs: int | None = None
    shuffle: bool = True
    shuffle_buffer_size: int = 10000
    shuffle_seed: int | None = None
    prefetch_buffer_size: int = AUTOTUNE
    reader_num_threads: int = AUTOTUNE
    parser_num_threads: int = AUTOTUNE
    sloppy_ordering: bool = False
    label_key: str | None = None


def as_dataset_options(options: object) -> DatasetOptions:
    """A DatasetOptions from ours or any object with its attributes (tfx_bsl's options)."""
    if not isinstance(options, DatasetOptions):
        if not hasattr(options, "batch_size"):
            got = type(options).__name__
            raise UserInputError(
                "options", f"expected TensorFlowDatasetOptions or DatasetOptions, got {got}"
            )
        fields = {
            f.name: getattr(options, f.name, f.default) for f in dataclasses.fields(DatasetOptions)
        }
        options = DatasetOptions(**fields)
    check_batch_size(options.batch_size)
    return options


def check_batch_size(batch_size: object) -> None:
    """A dataset's batch size is a whole number >= 1 (not a bool), else UserInputError naming
    `options`."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise UserInputError(
            "options", f"batch_size must be a positive integer, got {batch_size!r}"
        )


def make_dataset(
    patterns: list[str],
    options: DatasetOptions,
    schema: schema_pb2.Schema,
    transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    keep: Sequence[str] | None = None,
    cache: str = "auto",
    payload_format: str | None = None,
) -> tf.data.Dataset:
    """The batches of tfx_bsl's TensorFlowDataset; with `transform`, parsed batches go through it
    and its outputs named in `keep` are the features. `cache` (see `caches`): keep the decompressed
    records in memory after the first epoch, so later epochs only shuffle and parse.
    `payload_format` (None: the
    examples' own, examples_properties.py) picks tf.Example or tf.SequenceExample parsing."""
    import tensorflow as tf

    parse_batch, names = batch_parser(schema, payload_format or payload_format_of(patterns))
    tensor_names = names if transform is None else set(keep or ())
    label_key = options.label_key
    if label_key is not None and label_key not in tensor_names:
        raise UserInputError(
            "label_key",
            f"{label_key!r} is not a tensor of the schema; tensors: "
            f"{', '.join(sorted(tensor_names))}",
        )

    dataset = _records(patterns, options)
    if caches(cache, options, patterns):
        dataset = dataset.cache()
    if options.shuffle:
        dataset = dataset.shuffle(options.shuffle_buffer_size, options.shuffle_seed)
    if options.num_epochs != 1:
        dataset = dataset.repeat(options.num_epochs)
    drop = options.drop_final_batch or options.num_epochs is None
    dataset = dataset.batch(options.batch_size, drop_remainder=drop)

    def parse(serialized: tf.Tensor) -> Any:
        features = parse_batch(serialized)
        if transform is not None:
            outputs = transform(features)
            features = {key: outputs[key] for key in keep}
        if label_key is None:
            return features
        return features, features.pop(label_key)

    dataset = dataset.map(parse, num_parallel_calls=options.parser_num_threads)
    dataset = dataset.prefetch(options.prefetch_buffer_size)
    tf_options = tf.data.Options()
    tf_options.deterministic = not options.sloppy_ordering
    return dataset.with_options(tf_options)


def _records(patterns: list[str], options: DatasetOptions) -> tf.data.Dataset:
    """The serialized records of the files, in tfx_bsl's order: list the files, interleave their
    readers."""
    import tensorflow as tf

    compression_of = compression_fn(patterns)
    threads = options.reader_num_threads

    def read(path: tf.Tensor) -> tf.data.Dataset:
        records = tf.data.TFRecordDataset(path, compression_of(path))
        if threads == 1:
            return records
        # Each open file is read and decompressed in a background thread that hands records
        # over in blocks: tfx_bsl's parallel interleave hands them over one by one, which costs
        # more CPU than reading them. The order of records does not change.
        return records.batch(_READ_BLOCK).prefetch(_READ_AHEAD).unbatch()

    files = tf.data.Dataset.list_files(patterns, shuffle=options.shuffle, seed=options.shuffle_seed)
    cycle, kind = _cycle_length(threads), compression_of("")
    if cycle == 1 and isinstance(kind, str):
        # One file at a time, all compressed alike: one reader over the file names gives the
        # interleave's
        # order without its per-record cost (the parallel map after it pulls the records in its own
        # thread).
        return tf.data.TFRecordDataset(files, kind)
    return files.interleave(read, cycle_length=cycle)


def caches(mode: str, options: DatasetOptions, patterns: list[str]) -> bool:
    """Whether the decompressed records are cached in memory after the first pass (mode memory:
    always; off: never; auto: when they are read more than once, no shuffle_seed pins tfx_bsl's
    order of later epochs (with the cache, the files come in the first epoch's order every epoch;
    records are still shuffled every epoch), and their decoded size fits `cache_budget.budget`:
    CACHE_AUTO_BYTES, or half the memory the run has left; else no cache, with a log line saying
    why)."""
    if mode in ("memory", "off"):
        return mode == "memory"
    if options.num_epochs == 1 or (options.shuffle and options.shuffle_seed is not None):
        return False
    import tensorflow as tf

    limit, why = cache_budget.budget(CACHE_AUTO_BYTES)
    try:
        size = cache_budget.decoded_size((f for p in patterns for f in tf.io.gfile.glob(p)), limit)
    except (OSError, zlib.error, tf.errors.OpError) as e:
        log.info("--cache-examples auto: not caching the examples (%s); read from the files", e)
        return False
    if size is None:
        log.info(
            "--cache-examples auto: not caching the examples in memory: their records, decoded, "
            "are over %d MiB (%s); they are read from the files every epoch",
            limit >> 20,
            why,
        )
    return size is not None


def _cycle_length(reader_num_threads: int) -> int:
    """The cycle length of tfx_bsl's interleave (num_parallel_calls=reader_num_threads, default
    cycle_length), as TensorFlow's parallel interleave sets it: so records come in the same
    order."""
    cpus = len(os.sched_getaffinity(0))
    if reader_num_threads == AUTOTUNE:
        return -(-cpus // 3)  # one thread for the current and two for prefetched cycle elements
    return max(1, min(reader_num_threads, cpus))
