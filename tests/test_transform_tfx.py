"""transform as TFX's Transform: custom_config, default splits, spans and the analyzer cache.

Tiny data (two spans of a few rows, each with train, eval and test splits) through the real CLI
(a subprocess, as KFP runs it) and real tf.Transform on Beam:
- preprocessing_fn(inputs, custom_config) gets --custom-config bound, as TFX binds it;
- without split flags `train` is analyzed and every split (test too) is transformed;
- the module's stats_options_updater_fn is accepted, with a line saying no statistics are computed;
- a second run over both spans with the first run's --updated-analyzer-cache does not analyze
  the span it saw: span 1's data is changed after the first run, and the analyzers' result is
  still the one of the original span 1 (and the summary says 1 of 2 datasets came from the cache).
"""

from __future__ import annotations

import glob
import json
import shutil
import textwrap
from pathlib import Path

import datagen
import pytest
from conftest import run_cli

MODULE = textwrap.dedent("""
    import tensorflow_transform as tft


    def preprocessing_fn(inputs, custom_config):
        x = inputs["x"]
        return {
            "x_mean": tft.mean(x) + 0.0 * x,
            "x_scaled": x * custom_config["scale"],
            "c_id": tft.compute_and_apply_vocabulary(inputs["c"]),
        }


    def stats_options_updater_fn(stats_type, stats_options):
        return stats_options
""")
SPLITS = (("train", 6), ("eval", 3), ("test", 2))


def _span(root: Path, base: float) -> Path:
    for split, rows in SPLITS:
        datagen.write_split(
            str(root), split, [{"x": [base + i], "c": ["ab"[i % 2]]} for i in range(rows)]
        )
    return root


def _transform(*args) -> tuple[dict, str]:
    proc = run_cli(["transform", *map(str, args)], timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout), proc.stderr


def _read(split_dir: Path) -> list[dict[str, float]]:
    import tensorflow as tf

    files = sorted(glob.glob(str(split_dir / "*.gz")))
    rows = []
    for record in tf.data.TFRecordDataset(files, compression_type="GZIP").as_numpy_iterator():
        features = tf.train.Example.FromString(record).features.feature
        rows.append(
            {
                k: (list(v.float_list.value) or list(v.int64_list.value))[0]
                for k, v in features.items()
            }
        )
    return rows


@pytest.fixture(scope="module")
def first(tmp_path_factory) -> tuple[Path, dict, str]:
    """Run 1: span 1 alone, custom_config {"scale": 3}, with the analyzer cache written."""
    out = tmp_path_factory.mktemp("transform_tfx")
    _span(out / "span1", 0.0)
    _span(out / "span2", 100.0)
    schema = datagen.write_schema(str(out / "schema.pbtxt"), {"x": "FLOAT", "c": "BYTES"})
    (out / "module.py").write_text(MODULE)
    summary, stderr = _transform(
        "--examples", out / "span1", "--schema", schema, "--module-file", out / "module.py",
        "--custom-config", '{"scale": 3}', "--transform-graph", out / "run1" / "graph",
        "--transformed-examples", out / "run1" / "examples",
        "--updated-analyzer-cache", out / "run1" / "cache",
        "--records-dir", out / "records",
    )  # fmt: skip
    return out, summary, stderr


@pytest.mark.slow
def test_custom_config_reaches_preprocessing_fn_and_every_split_is_transformed_as_tfx(first):
    out, summary, stderr = first
    assert summary["num_examples"] == {"eval": 3, "test": 2, "train": 6}  # test is not skipped
    for split, _ in SPLITS:
        rows = _read(out / "run1" / "examples" / f"Split-{split}")
        assert [r["x_scaled"] for r in rows] == [3.0 * i for i in range(len(rows))]
        assert {r["x_mean"] for r in rows} == {2.5}  # mean of train's 0..5
    assert "preprocessing_fn takes custom_config: bound to --custom-config" in stderr


@pytest.mark.slow
def test_a_stats_options_updater_fn_is_not_called_and_the_log_says_why(first):
    _, _, stderr = first
    assert "stats_options_updater_fn is not called: transform computes no statistics" in stderr


@pytest.mark.slow
def test_the_analyzer_cache_of_the_analyzed_span_is_written(first):
    out, summary, _ = first
    [key] = summary["analyzer_cache"]["dataset_keys"]
    assert "span1-Split-train" in key and (out / "run1" / "cache" / key).is_dir()
    # recorded for a later run's LatestArtifactStrategy resolver (TransformCache)
    from generic_trainer.tfx_kfp import model_records

    record = model_records.latest_artifact(str(out / "records"), "TransformCache")
    assert record["uri"] == str(out / "run1" / "cache"), record


@pytest.mark.slow
def test_second_span_with_the_cache_analyzes_only_the_new_span(first):
    out, summary, _ = first
    [key1] = summary["analyzer_cache"]["dataset_keys"]
    # Span 1 changes after run 1: read again, its analysis would differ.
    shutil.rmtree(out / "span1" / "Split-train")
    datagen.write_split(str(out / "span1"), "train", [{"x": [1000.0], "c": ["z"]}])
    summary2, stderr = _transform(
        "--examples", f"{out / 'span1'},{out / 'span2'}", "--schema", out / "schema.pbtxt",
        "--module-file", out / "module.py", "--custom-config", '{"scale": 1}',
        "--transform-splits", "eval", "--transform-graph", out / "run2" / "graph",
        "--transformed-examples", out / "run2" / "examples",
        "--analyzer-cache", out / "run1" / "cache",
        "--updated-analyzer-cache", out / "run2" / "cache",
    )  # fmt: skip
    cache = summary2["analyzer_cache"]
    assert cache["cached_datasets"] == 1 and cache["dataset_keys"][0] == key1
    assert "1 of 2 analyze datasets come from the cache" in stderr
    rows = _read(out / "run2" / "examples" / "Split-eval")
    assert len(rows) == 6  # the eval split of both spans
    assert {r["x_mean"] for r in rows} == {52.5}  # mean of span 1's 0..5 (cached) and 100..105
    assert sorted(p.name for p in (out / "run2" / "cache").iterdir()) == sorted(
        cache["dataset_keys"]
    )


def test_request_takes_spans_custom_config_and_the_cache(tmp_path):
    from generic_trainer.errors import UserInputError
    from generic_trainer.intake.transform_request import build_transform_request

    for name in ("s1", "s2", "s3", "cache"):
        (tmp_path / name).mkdir()
    for span in ("s1", "s2", "s3"):  # each span's splits, in TFX's layout (not read at intake)
        for split in ("train", "eval"):
            (tmp_path / span / f"Split-{split}").mkdir()
            (tmp_path / span / f"Split-{split}" / "data.gz").write_bytes(b"")
    (tmp_path / "schema.pbtxt").write_text("")
    values = {
        "examples": f"{tmp_path / 's1'},{tmp_path / 's2'}",
        "more_examples": [str(tmp_path / "s3")],  # KFP: the spans besides the artifact
        "schema": str(tmp_path / "schema.pbtxt"),
        "module_file": "m.py",
        "transform_graph": str(tmp_path / "graph"),
        "custom_config": '{"scale": 2, "api_key": "x"}',
        "analyzer_cache": str(tmp_path / "cache"),
        "updated_analyzer_cache": str(tmp_path / "cache2"),
    }
    request = build_transform_request(values, environ={})
    assert [p for p, _ in request.example_dirs()] == [str(tmp_path / s) for s in ("s1", "s2", "s3")]
    assert request.custom_config == {"scale": 2, "api_key": "x"}
    assert request.transform_splits == () and request.analyze_splits == ("train",)
    # --examples resolved once: the analyzed split of each span (no transformed examples asked)
    assert request.split_files == tuple(
        (("train", str(tmp_path / s / "Split-train" / "*")),) for s in ("s1", "s2", "s3")
    )
    assert request.analyzer_cache == str(tmp_path / "cache")
    assert request.updated_analyzer_cache == str(tmp_path / "cache2")
    assert request.records_dir is None
    # a resolver that found no earlier cache (NOTHING_RESOLVED): no cache, as TFX's empty channel
    (tmp_path / "resolved").mkdir()
    (tmp_path / "resolved" / "NOTHING_RESOLVED").write_text("")
    nothing = build_transform_request({**values, "analyzer_cache": str(tmp_path / "resolved")})
    assert nothing.analyzer_cache is None
    bad = [
        ({"examples": f"{tmp_path / 's1'},{tmp_path / 's1'}"}, "--examples", "appears twice"),
        ({"analyzer_cache": str(tmp_path / "schema.pbtxt")}, "--analyzer-cache", "not a dir"),
        ({"updated_analyzer_cache": str(tmp_path / "graph")}, "--updated-analyzer-cache", "differ"),
        ({"custom_config": "[1]"}, "--custom-config", "JSON object"),
    ]
    for change, flag, words in bad:
        with pytest.raises(UserInputError, match=words) as raised:
            build_transform_request({**values, **change}, environ={})
        assert raised.value.input_name == flag
