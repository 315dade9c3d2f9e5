"""transform: a module's preprocessing_fn through tensorflow-transform on Beam, with TFX Transform's
outputs.

The penguin module's preprocessing_fn runs through the real CLI (a subprocess, as KFP runs it); a
second process reads the outputs with tft.TFTransformOutput as TFX modules do, and compares them
with the committed examples/penguin/transform_graph (made by this verb). Bad input: exit 2 or 3,
one-line cause, nothing written.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import PENGUIN
from generic_trainer import cli

GT = os.path.join(os.path.dirname(sys.executable), "generic-trainer")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    return env


def _transform(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [GT, "transform", *args], env=_env(), capture_output=True, text=True, timeout=timeout
    )


def _error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if "transform failed: " in line]
    assert len(lines) == 1, stderr[-3000:]
    return lines[0].split("transform failed: ", 1)[1]


# Runs in its own process: importing tensorflow_transform decides TF_USE_LEGACY_KERAS for a process.
_CHECK = """
import glob, json, sys
import tensorflow as tf
import tensorflow_transform as tft

GRAPH, COMMITTED, EXAMPLES, TRANSFORMED = sys.argv[1:5]
EVAL = glob.glob(EXAMPLES + "/Split-eval/*")

def summary(path):
    output = tft.TFTransformOutput(path)
    raw_spec = output.raw_feature_spec()
    records = list(tf.data.TFRecordDataset(EVAL, compression_type="GZIP").as_numpy_iterator())
    raw = tf.io.parse_example(records, {k: v for k, v in raw_spec.items() if k != "species"})
    transformed = output.transform_features_layer()(raw)
    return {
        "raw_spec": {k: [v.dtype.name, list(v.shape)] for k, v in sorted(raw_spec.items())},
        "transformed_spec": {
            k: v.dtype.name for k, v in sorted(output.transformed_feature_spec().items())
        },
        "vocab": {k: [w.decode() for w in output.vocabulary_by_name(k)] for k in ("island", "sex")},
        "transformed_keys": sorted(transformed),
        "mass_mean": round(float(tf.reduce_mean(transformed["body_mass_g"])), 5),
        "island_ids": sorted(set(transformed["island"].numpy().ravel().tolist())),
    }

fresh = summary(GRAPH)
spec = tft.TFTransformOutput(GRAPH).transformed_feature_spec()
written = {}
for split in ("train", "eval"):
    files = glob.glob(TRANSFORMED + "/Split-" + split + "/*")
    records = list(tf.data.TFRecordDataset(files, compression_type="GZIP").as_numpy_iterator())
    parsed = tf.io.parse_example(records, spec)
    written[split] = {"files": sorted(f.rsplit("/", 1)[1] for f in files), "count": len(records),
                      "mass_mean": float(tf.reduce_mean(parsed["body_mass_g"])),
                      "island_ids": sorted(set(parsed["island"].numpy().ravel().tolist())),
                      "species": sorted(set(parsed["species"].numpy().ravel().tolist()))}
print("RESULT" + json.dumps({"fresh": fresh, "committed": summary(COMMITTED), "written": written}))
"""


@pytest.mark.slow
@pytest.mark.e2e
def test_penguin_transform_outputs_read_as_tfx_reads_them(tmp_path):
    graph, transformed = tmp_path / "graph", tmp_path / "transformed"
    proc = _transform(
        "--examples",
        str(PENGUIN / "data"),
        "--schema",
        str(PENGUIN / "schema.pbtxt"),
        "--module-file",
        str(PENGUIN / "module_transform.py"),
        "--transform-graph",
        str(graph),
        "--transformed-examples",
        str(transformed),
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads(proc.stdout)
    assert summary["num_examples"] == {"train": 238, "eval": 95}
    assert summary["raw_feature_count"] == 8 and summary["feature_count"] == 8
    assert sorted(p.name for p in graph.iterdir()) == [
        "metadata",
        "transform_fn",
        "transformed_metadata",
    ]
    assert not [p for p in tmp_path.iterdir() if ".staging" in p.name]
    check = subprocess.run(
        [
            sys.executable,
            "-c",
            _CHECK,
            str(graph),
            str(PENGUIN / "transform_graph"),
            str(PENGUIN / "data"),
            str(transformed),
        ],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert check.returncode == 0, check.stderr[-4000:]
    result = json.loads(check.stdout.split("RESULT", 1)[1])
    fresh = result["fresh"]
    assert fresh["raw_spec"] == {
        "bill_depth_mm": ["float32", [1]],
        "bill_length_mm": ["float32", [1]],
        "body_mass_g": ["float32", [1]],
        "flipper_length_mm": ["float32", [1]],
        "island": ["string", [1]],
        "sex": ["string", [1]],
        "species": ["int64", [1]],
        "year": ["int64", [1]],
    }
    assert (
        fresh["transformed_spec"]["body_mass_g"] == "float32"
        and fresh["transformed_spec"]["island"] == "int64"
    )
    assert sorted(fresh["vocab"]["island"]) == ["Biscoe", "Dream", "Torgersen"]
    assert sorted(fresh["vocab"]["sex"]) == ["female", "male"]
    assert "species" not in fresh["transformed_keys"] and "island" in fresh["transformed_keys"]
    assert abs(fresh["mass_mean"]) < 0.5  # z-scored with train statistics, applied to eval rows
    assert set(fresh["island_ids"]) == {0, 1, 2}
    assert result["committed"] == fresh  # the committed graph is what this verb makes
    written = result["written"]
    assert written["train"]["count"] == 238 and written["eval"]["count"] == 95
    assert written["train"]["files"] == [
        "transformed_examples-00000-of-00001.gz"
    ]  # TFX Transform's names
    assert abs(written["train"]["mass_mean"]) < 1e-4  # z-score over the analyzed split itself
    assert written["eval"]["island_ids"] == [0, 1, 2] and written["train"]["species"] == [0, 1, 2]


def _fast(monkeypatch, capsys, *args: str) -> tuple[int, str]:
    """Run the CLI in this process (for errors found before TensorFlow loads); returns (code, error
    line)."""
    monkeypatch.setenv("TF_USE_LEGACY_KERAS", "0")
    code = cli.main(["transform", *args])
    lines = [line for line in capsys.readouterr().err.splitlines() if "transform failed: " in line]
    return code, lines[-1].split("transform failed: ", 1)[1] if lines else ""


def _no_outputs(tmp_path: Path) -> None:
    assert not (tmp_path / "graph").exists() and not (tmp_path / "tx").exists()
    assert not [p for p in tmp_path.iterdir() if ".staging" in p.name]


def test_a_module_without_preprocessing_fn_is_exit_2_naming_what_it_defines(
    tmp_path, monkeypatch, capsys
):
    module = tmp_path / "plain.py"
    module.write_text("def run_fn(fn_args):\n    pass\n")
    code, message = _fast(
        monkeypatch,
        capsys,
        "--examples",
        str(PENGUIN / "data"),
        "--schema",
        str(PENGUIN / "schema.pbtxt"),
        "--module-file",
        str(module),
        "--transform-graph",
        str(tmp_path / "graph"),
        "--transformed-examples",
        str(tmp_path / "tx"),
    )
    assert code == 2
    assert (
        message
        == f"--preprocessing-fn: module {module} has no function 'preprocessing_fn'; it defines "
        "run_fn"
    )
    _no_outputs(tmp_path)


def test_an_analyze_split_without_examples_is_exit_2_and_writes_nothing(
    tmp_path, monkeypatch, capsys
):
    examples = tmp_path / "examples"
    for split in ("train", "eval"):
        (examples / f"Split-{split}").mkdir(parents=True)
    with gzip.open(examples / "Split-train" / "data_tfrecord-00000-of-00001.gz", "wb"):
        pass  # an empty shard, as Beam writes for a split that got no rows
    (examples / "Split-eval" / "x.gz").write_bytes(
        (PENGUIN / "data" / "Split-eval").glob("*.gz").__next__().read_bytes()
    )
    code, message = _fast(
        monkeypatch,
        capsys,
        "--examples",
        str(examples),
        "--schema",
        str(PENGUIN / "schema.pbtxt"),
        "--module-file",
        str(PENGUIN / "module_transform.py"),
        "--transform-graph",
        str(tmp_path / "graph"),
    )
    assert code == 2
    assert message == (
        f"--analyze-splits: split 'train' of {examples} holds no examples; the analyzers need data"
    )
    _no_outputs(tmp_path)


def test_a_used_output_a_missing_split_or_schema_is_exit_2_naming_its_flag(
    tmp_path, monkeypatch, capsys
):
    (tmp_path / "graph").mkdir()
    (tmp_path / "graph" / "old").write_text("x")
    base = [
        "--examples",
        str(PENGUIN / "data"),
        "--schema",
        str(PENGUIN / "schema.pbtxt"),
        "--module-file",
        str(PENGUIN / "module_transform.py"),
    ]
    code, message = _fast(monkeypatch, capsys, *base, "--transform-graph", str(tmp_path / "graph"))
    assert (
        code == 2
        and message.startswith("--transform-graph: ")
        and "already exists and is not empty" in message
    )
    assert [p.name for p in (tmp_path / "graph").iterdir()] == ["old"]
    code, message = _fast(
        monkeypatch,
        capsys,
        *base,
        "--transform-graph",
        str(tmp_path / "g2"),
        "--transformed-examples",
        str(tmp_path / "graph"),
    )
    assert code == 2 and message.startswith("--transformed-examples: ")
    code, message = _fast(
        monkeypatch,
        capsys,
        *base,
        "--transform-graph",
        str(tmp_path / "g2"),
        "--analyze-splits",
        "test",
    )
    assert code == 2 and "has no split 'test'" in message
    code, message = _fast(
        monkeypatch, capsys, *base[:2], *base[4:], "--transform-graph", str(tmp_path / "g2")
    )
    assert code == 2 and message.startswith("--schema: required")
    assert not (tmp_path / "g2").exists()


@pytest.mark.slow
def test_a_preprocessing_fn_that_raises_is_exit_3_with_its_traceback(tmp_path):
    module = tmp_path / "broken.py"
    module.write_text(
        textwrap.dedent("""
        import tensorflow_transform as tft

        def preprocessing_fn(inputs):
            mass = tft.scale_to_z_score(inputs["body_mass_g"])
            return {"mass": mass, "oops": inputs["no_such_feature"]}
    """)
    )
    proc = _transform(
        "--examples",
        str(PENGUIN / "data"),
        "--schema",
        str(PENGUIN / "schema.pbtxt"),
        "--module-file",
        str(module),
        "--transform-graph",
        str(tmp_path / "graph"),
        "--transformed-examples",
        str(tmp_path / "tx"),
    )
    assert proc.returncode == 3, proc.stderr[-3000:]
    message = _error_line(proc.stderr)
    assert message == "preprocessing_fn raised KeyError: 'no_such_feature'"
    assert 'inputs["no_such_feature"]' in proc.stderr  # the user's traceback follows
    _no_outputs(tmp_path)


@pytest.mark.slow
def test_preprocessing_fn_that_calls_sys_exit_0_is_a_user_code_failure(tmp_path):
    module = tmp_path / "quits.py"
    module.write_text("import sys\n\n\ndef preprocessing_fn(inputs):\n    sys.exit(0)\n")
    proc = _transform(
        "--examples",
        str(PENGUIN / "data"),
        "--schema",
        str(PENGUIN / "schema.pbtxt"),
        "--module-file",
        str(module),
        "--transform-graph",
        str(tmp_path / "graph"),
        "--transformed-examples",
        str(tmp_path / "tx"),
    )
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert _error_line(proc.stderr).startswith(
        f"preprocessing_fn called sys.exit(0) at {module} line 5 before the run finished"
    )
    _no_outputs(tmp_path)
