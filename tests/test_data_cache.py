"""The data accessor's record cache (--cache-examples) and its one-reader path, on small generated
Examples.

Real tf.data pipelines: a cached pipeline must give the same batches as an uncached one, and must
not read the files again after its first epoch (shown by deleting them mid-run).
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest
from datagen import write_schema, write_split
from generic_trainer import data
from generic_trainer.errors import UserInputError
from generic_trainer.intake.fit_request import build_train_request
from generic_trainer.records import cache_budget, example_dataset
from generic_trainer.records.example_dataset import DatasetOptions

ROWS = 50


@pytest.fixture()
def examples(tmp_path: Path) -> tuple[str, object]:
    rows = [{"x": [float(i)], "label": [i % 3]} for i in range(ROWS)]
    write_split(str(tmp_path), "train", rows, shards=2)
    schema = data.load_schema(
        write_schema(str(tmp_path / "schema.pbtxt"), {"x": "FLOAT", "label": "INT"})
    )
    return str(tmp_path / "Split-train" / "*"), schema


def _xs(dataset, batches: int) -> list[list[float]]:
    out = []
    for features, _label in dataset.take(batches):
        out.append(features["x"].numpy().ravel().tolist())
    return out


def test_records_are_cached_when_read_every_epoch_in_a_free_order_and_small(examples, monkeypatch):
    pattern, _ = examples
    every_epoch = DatasetOptions(batch_size=10)  # num_epochs None: read again and again
    assert example_dataset.caches("auto", every_epoch, [pattern])
    assert example_dataset.caches("memory", DatasetOptions(batch_size=10, num_epochs=1), [pattern])
    assert not example_dataset.caches("off", every_epoch, [pattern])
    assert not example_dataset.caches(
        "auto", DatasetOptions(batch_size=10, num_epochs=1), [pattern]
    )  # read once
    # a seeded shuffle pins tfx_bsl's order of every epoch, which a cache would change (file order)
    assert not example_dataset.caches(
        "auto", DatasetOptions(batch_size=10, shuffle_seed=3), [pattern]
    )
    assert example_dataset.caches(
        "auto", DatasetOptions(batch_size=10, shuffle=False, shuffle_seed=3), [pattern]
    )
    monkeypatch.setattr(
        example_dataset, "CACHE_AUTO_BYTES", 100
    )  # two small gzip files, counted 8x: too big
    assert not example_dataset.caches("auto", every_epoch, [pattern])


@pytest.mark.parametrize("shuffle", [False, True])
def test_cached_epochs_come_from_memory_with_the_same_records(examples, shuffle):
    pattern, schema = examples
    options = DatasetOptions(batch_size=10, num_epochs=2, shuffle=shuffle, label_key="label")
    uncached = _xs(
        data.DataAccessor(cache="off").tf_dataset_factory([pattern], options, schema), 10
    )
    dataset = data.DataAccessor(cache="memory").tf_dataset_factory([pattern], options, schema)
    it = iter(dataset)
    first = [next(it)[0]["x"].numpy().ravel().tolist() for _ in range(ROWS // 10)]
    for path in Path(pattern).parent.iterdir():  # the second epoch cannot read the files any more
        os.remove(path)
    second = [b[0]["x"].numpy().ravel().tolist() for b in it]
    assert len(second) == ROWS // 10
    if not shuffle:
        assert first + second == uncached  # exactly the batches of the uncached pipeline
    assert sorted(sum(first, [])) == sorted(sum(second, [])) == [float(i) for i in range(ROWS)]


def test_one_reader_gives_the_interleaves_order(examples, monkeypatch):
    """With one file read at a time (2 cores), one reader over the file list replaces the
    interleave: the
    records come in the same order as the interleave of one-file readers gives them."""
    pattern, schema = examples
    options = DatasetOptions(batch_size=7, num_epochs=1, shuffle=False, label_key="label")
    monkeypatch.setattr(example_dataset, "_cycle_length", lambda threads: 1)
    one_reader = _xs(data.DataAccessor().tf_dataset_factory([pattern], options, schema), 100)
    monkeypatch.setattr(
        example_dataset, "compression_fn", lambda patterns: lambda path: _gzip(path)
    )
    interleaved = _xs(data.DataAccessor().tf_dataset_factory([pattern], options, schema), 100)
    assert one_reader == interleaved and len(sum(one_reader, [])) == ROWS


def _gzip(path):
    """A compression function that is a tensor, as for a mix of files: the interleave path is
    taken."""
    import tensorflow as tf

    return (
        tf.constant("GZIP")
        if isinstance(path, str)
        else tf.where(tf.equal(path, ""), "GZIP", "GZIP")
    )


def test_cache_examples_is_checked_as_a_kfp_parameter_too(tmp_path):
    values = {
        "examples": str(tmp_path),
        "module_file": "m.py",
        "model_dir": str(tmp_path / "model"),
        "cache_examples": "disk",
    }
    with pytest.raises(
        UserInputError, match="--cache-examples: expected one of auto, memory, off, got 'disk'"
    ):
        build_train_request(values, environ={})
    with pytest.raises(
        UserInputError, match="--accelerator: expected one of auto, gpu, cpu, got 'tpu'"
    ):
        build_train_request(values | {"cache_examples": "off", "accelerator": "tpu"}, environ={})


def test_the_cache_is_sized_by_decoding_and_fits_the_memory(tmp_path, monkeypatch, caplog):
    split = tmp_path / "Split-train"
    split.mkdir()
    payload = b"\0" * (4 << 20)  # 4 MiB of records gzip to a few KiB (the 8x guess said 40 KiB)
    (split / "data").write_bytes(gzip.compress(payload))  # gzipped, not named .gz
    options = DatasetOptions(batch_size=4)
    monkeypatch.setattr(example_dataset, "CACHE_AUTO_BYTES", 1 << 20)
    with caplog.at_level("INFO", logger="generic_trainer"):
        assert not example_dataset.caches("auto", options, [str(split / "*")])
    assert "their records, decoded, are over 1 MiB (the cache's limit of 1 MiB)" in caplog.text
    monkeypatch.setattr(example_dataset, "CACHE_AUTO_BYTES", 64 << 20)
    assert example_dataset.caches("auto", options, [str(split / "*")])
    monkeypatch.setattr(cache_budget, "memory_left", lambda: 6 << 20)  # 3 MiB for the cache
    caplog.clear()
    with caplog.at_level("INFO", logger="generic_trainer"):
        assert not example_dataset.caches("auto", options, [str(split / "*")])
    assert "over 3 MiB (half the 6 MiB of memory this run has left)" in caplog.text
