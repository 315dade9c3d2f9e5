"""The bundled penguin example: its data generator, committed data and transform graph script."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

PENGUIN = Path(__file__).resolve().parents[1] / "examples" / "penguin"
DATA_FILE = "data_tfrecord-00000-of-00001.gz"
NUM_ROWS = 333  # 344 rows in the table, 11 with a missing value


def _load_script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"penguin_{name}", PENGUIN / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _schema(path: Path):
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    return text_format.Parse(path.read_text(encoding="utf-8"), schema_pb2.Schema())


def _examples(path: Path) -> list:
    import tensorflow as tf

    return [
        tf.train.Example.FromString(r)
        for r in tf.data.TFRecordDataset(str(path), compression_type="GZIP").as_numpy_iterator()
    ]


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("penguin")
    _load_script("make_data").main(["--out", str(out)])
    return out


def test_make_data_writes_tfx_layout_matching_the_schema(regenerated: Path) -> None:
    import tensorflow as tf
    from tensorflow_metadata.proto.v0 import schema_pb2

    assert sorted(p.name for p in (regenerated / "data").iterdir()) == ["Split-eval", "Split-train"]
    for split in ("train", "eval"):
        assert [p.name for p in (regenerated / "data" / f"Split-{split}").iterdir()] == [DATA_FILE]

    schema = _schema(regenerated / "schema.pbtxt")
    dtypes = {schema_pb2.FLOAT: tf.float32, schema_pb2.INT: tf.int64, schema_pb2.BYTES: tf.string}
    spec = {f.name: tf.io.FixedLenFeature([1], dtypes[f.type]) for f in schema.feature}
    assert sorted(spec) == sorted(
        [
            "bill_length_mm",
            "bill_depth_mm",
            "flipper_length_mm",
            "body_mass_g",
            "island",
            "sex",
            "year",
            "species",
        ]
    )
    assert all(
        f.presence.min_fraction == 1.0 and [d.size for d in f.shape.dim] == [1]
        for f in schema.feature
    )
    domains = {d.name: set(d.value) for d in schema.string_domain}

    counts = {}
    for split in ("train", "eval"):
        path = regenerated / "data" / f"Split-{split}" / DATA_FILE
        records = [e.SerializeToString() for e in _examples(path)]
        counts[split] = len(records)
        # Every record carries exactly the schema's features, one value each, of the schema's type.
        parsed = tf.io.parse_example(records, spec)
        for example in map(tf.train.Example.FromString, records):
            assert sorted(example.features.feature) == sorted(spec)
        assert set(parsed["species"].numpy().ravel()) == {0, 1, 2}
        for name in ("island", "sex"):
            assert {v.decode() for v in parsed[name].numpy().ravel()} <= domains[name]
        assert set(parsed["year"].numpy().ravel()) <= {2007, 2008, 2009}
        assert 30 < parsed["bill_length_mm"].numpy().mean() < 50
        assert 2500 < parsed["body_mass_g"].numpy().min()

    assert counts["train"] + counts["eval"] == NUM_ROWS
    assert 0.6 < counts["train"] / NUM_ROWS < 0.73


def test_committed_data_is_a_regeneration(regenerated: Path) -> None:
    assert _schema(PENGUIN / "schema.pbtxt") == _schema(regenerated / "schema.pbtxt")
    for split in ("train", "eval"):
        committed = _examples(PENGUIN / "data" / f"Split-{split}" / DATA_FILE)
        fresh = _examples(regenerated / "data" / f"Split-{split}" / DATA_FILE)
        assert committed == fresh, (
            f"examples/penguin/data/Split-{split} differs from make_data.py's output"
        )
    # The CSV the pipeline imports holds the same rows (import-examples turns it into Examples).
    assert (PENGUIN / "penguins.csv").read_text() == (regenerated / "penguins.csv").read_text()
