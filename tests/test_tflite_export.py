"""TFLite export: `train --export-tflite`, the `export-tflite` verb, and the extras published with
the model.

The TFLite models are checked here independently of the runtime: the eval examples are parsed with
the schema's feature spec, fed to the TFLite interpreter, and compared with the SavedModel's
serving_default on the same serialized examples.
"""

from __future__ import annotations

import glob
import json
import os
from pathlib import Path

import pytest
from conftest import PENGUIN, REPO, run_cli, shared_across_workers
from generic_trainer.errors import UserInputError
from generic_trainer.tflite.options import DEFAULT_TOLERANCES, TFLiteOptions, check_options

STRING_MODULE = REPO / "tests" / "modules" / "tflite" / "string_input.py"


def _artifact(uri: str, title: str) -> dict:
    return {
        "artifacts": [{"name": title, "type": {"schemaTitle": title}, "uri": uri, "metadata": {}}]
    }


def _train_penguin_for_tflite(out: Path) -> dict:
    """Train the penguin example under KFP's executor input with export_tflite; returns the executor
    output."""
    executor_input = {
        "inputs": {
            "parameterValues": {
                "module_file": str(PENGUIN / "module.py"),
                "train_args": {"num_steps": 20.0},
                "eval_args": {"num_steps": 2.0},
                "custom_config": {"epochs": 1.0},
                "export_tflite": True,
                "tflite_quantization": "none",
            },
            "artifacts": {
                "examples": _artifact(str(PENGUIN / "data"), "system.Dataset"),
                "schema": _artifact(str(PENGUIN / "schema.pbtxt"), "system.Artifact"),
            },
        },
        "outputs": {
            "artifacts": {
                "model": _artifact(str(out / "model"), "system.Model"),
                "model_run": _artifact(str(out / "model_run"), "system.Artifact"),
                "metrics": _artifact(str(out / "metrics"), "system.Metrics"),
            },
            "outputFile": str(out / "executor_output.json"),
        },
    }
    proc = run_cli(["train", "--executor-input", json.dumps(executor_input)], timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads((out / "executor_output.json").read_text())


@pytest.fixture(scope="module")
def penguin_tflite(tmp_path_factory) -> tuple[Path, dict]:
    """Trained once per run (shared by the xdist workers); the tests only read it."""
    out = shared_across_workers(tmp_path_factory, "penguin_tflite", _train_penguin_for_tflite)
    return out / "model", json.loads((out / "executor_output.json").read_text())


def _eval_records(limit: int = 64) -> list[bytes]:
    import tensorflow as tf

    files = sorted(glob.glob(str(PENGUIN / "data" / "Split-eval" / "*")))
    return [r.numpy() for r in tf.data.TFRecordDataset(files, compression_type="GZIP").take(limit)]


def _max_diff_interpreter_vs_saved_model(tflite_path: Path, saved_model: Path) -> float:
    """Parse the eval examples by the schema, run the TFLite model on the features it takes and the
    SavedModel on the serialized examples; the largest absolute difference of their outputs."""
    import numpy as np
    import tensorflow as tf
    from generic_trainer.records import schemas

    records = _eval_records()
    spec = schemas.feature_spec_from_schema(schemas.load_schema(str(PENGUIN / "schema.pbtxt")))
    features = tf.io.parse_example(tf.constant(records), spec)
    interpreter = tf.lite.Interpreter(model_path=str(tflite_path))
    signature = interpreter.get_signature_list()["serving_default"]
    assert "species" not in signature["inputs"]  # the label is parsed by the signature but not used
    got = interpreter.get_signature_runner("serving_default")(
        **{name: features[name].numpy() for name in signature["inputs"]}
    )
    want = tf.saved_model.load(str(saved_model)).signatures["serving_default"](
        examples=tf.constant(records)
    )
    assert set(got) == set(want) == {"outputs"}
    assert got["outputs"].shape == (len(records), 3)
    return float(np.max(np.abs(got["outputs"] - want["outputs"].numpy())))


@pytest.mark.slow
def test_train_exports_tflite_beside_the_saved_model_and_it_agrees(penguin_tflite):
    model_dir, executor_output = penguin_tflite
    assert sorted(os.listdir(model_dir)) == ["Format-Serving", "Format-TFLite", "schemata"]
    tflite = model_dir / "Format-TFLite" / "model.tflite"
    record = json.loads((model_dir / "Format-TFLite" / "validation.json").read_text())
    metadata = executor_output["artifacts"]["model"]["artifacts"][0]["metadata"]
    assert metadata["tflite_model_path"] == "Format-TFLite/model.tflite"
    assert metadata["tflite_size_bytes"] == record["size_bytes"] == tflite.stat().st_size
    assert metadata["tflite_quantization"] == record["quantization"] == "none"
    assert metadata["tflite_max_abs_diff"] == record["max_abs_diff"] <= DEFAULT_TOLERANCES["none"]
    assert (
        record["inputs"] == "parsed tf.Example features" and "species" not in record["input_names"]
    )
    assert _max_diff_interpreter_vs_saved_model(tflite, model_dir / "Format-Serving") <= 1e-4
    # The schemata were published with the model, and the metadata names them.
    assert sorted(os.listdir(model_dir / "schemata")) == ["instance.yaml", "prediction.yaml"]
    assert metadata["predictSchemata"]["instanceSchemaUri"].endswith("/schemata/instance.yaml")


@pytest.mark.slow
def test_export_tflite_verb_with_dynamic_quantization(penguin_tflite, tmp_path):
    model_dir, _ = penguin_tflite
    proc = run_cli(
        [
            "export-tflite",
            "--model",
            model_dir,
            "--output",
            tmp_path / "lite",
            "--examples",
            PENGUIN / "data",
            "--schema",
            PENGUIN / "schema.pbtxt",
            "--tflite-quantization",
            "dynamic",
        ]
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    printed = json.loads(proc.stdout)
    tflite = tmp_path / "lite" / "Format-TFLite" / "model.tflite"
    assert printed["tflite_model"] == str(tflite) and printed["quantization"] == "dynamic"
    assert printed["validated_on"].endswith("eval examples")
    diff = _max_diff_interpreter_vs_saved_model(tflite, model_dir / "Format-Serving")
    assert diff <= DEFAULT_TOLERANCES["dynamic"]
    assert (
        abs(diff - printed["max_abs_diff"]) < 1e-6 or printed["max_abs_diff"] >= diff
    )  # 95 examples vs 64 here
    assert sorted(os.listdir(tmp_path)) == ["lite"]  # no staging or lock left beside it


@pytest.mark.slow
def test_export_tflite_verb_over_the_tolerance_writes_nothing(penguin_tflite, tmp_path):
    model_dir, _ = penguin_tflite
    proc = run_cli(
        [
            "export-tflite",
            "--model",
            model_dir,
            "--output",
            tmp_path / "lite",
            "--examples",
            PENGUIN / "data",
            "--tflite-quantization",
            "float16",
            "--tflite-tolerance",
            "0",
        ]
    )
    assert proc.returncode == 4, proc.stderr[-3000:]
    assert "more than the tolerance 0" in proc.stderr and "--tflite-tolerance" in proc.stderr
    assert not (tmp_path / "lite" / "Format-TFLite").exists()
    assert [n for n in os.listdir(tmp_path) if n != "lite"] == []


@pytest.mark.slow
def test_task_api_run_exports_float16_tflite(tmp_path):
    """The Task path stages and publishes the TFLite model (and the schemata) with its model too."""
    model_dir = tmp_path / "model"
    proc = run_cli(
        [
            "train",
            "--task",
            f"{PENGUIN / 'task.py'}:PenguinTask",
            "--examples",
            PENGUIN / "data",
            "--schema",
            PENGUIN / "schema.pbtxt",
            "--model-dir",
            model_dir,
            "--params-override",
            "trainer.train_steps=10,trainer.steps_per_loop=10,trainer.validation_interval=10",
            "--export-tflite",
            "--tflite-quantization",
            "float16",
        ],
        timeout=900,
        cwd=str(REPO),
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert {"Format-Serving", "Format-TFLite", "schemata"} <= set(os.listdir(model_dir))
    record = json.loads((model_dir / "Format-TFLite" / "validation.json").read_text())
    assert (
        record["quantization"] == "float16"
        and record["max_abs_diff"] <= DEFAULT_TOLERANCES["float16"]
    )
    assert record["size_bytes"] == (model_dir / "Format-TFLite" / "model.tflite").stat().st_size


@pytest.mark.slow
def test_unconvertible_model_fails_clearly_publishes_nothing_and_keeps_checkpoints(tmp_path):
    out = tmp_path / "out"
    (out / "ckpt" / "backup").mkdir(parents=True)
    (out / "ckpt" / "backup" / "state.json").write_text("{}")  # a backup a run left: not cleared
    proc = run_cli(
        [
            "train",
            "--examples",
            PENGUIN / "data",
            "--schema",
            PENGUIN / "schema.pbtxt",
            "--module-file",
            STRING_MODULE,
            "--model-dir",
            out / "model",
            "--metrics-file",
            out / "metrics.json",
            "--checkpoint-dir",
            out / "ckpt",
            "--export-tflite",
        ],
        timeout=900,
    )
    assert proc.returncode == 4, proc.stderr[-4000:]
    error = proc.stderr[proc.stderr.index("train failed") :]
    assert "StringToHashBucketFast" in error and "inputs island are strings" in error
    assert "export a serving signature that takes the numeric" in error
    assert "Nothing was published and the checkpoints in" in error
    assert not (out / "model" / "Format-Serving").exists() and not (out / "metrics.json").exists()
    assert (out / "ckpt" / "backup" / "state.json").read_text() == "{}"  # kept for a retry
    assert [n for n in os.listdir(out) if n.startswith(".")] == []  # staging removed, lock released


@pytest.mark.slow
def test_schemata_appear_only_with_the_published_model(tmp_path, monkeypatch):
    """The schemata are written into the staging dir and published with Format-Serving, never
    before; an older model's Format-TFLite that this run did not make goes away with the old
    model."""
    from generic_trainer import train
    from generic_trainer.intake.fit_request import build_train_request

    for var in ("TF_CONFIG", "CLUSTER_SPEC"):
        monkeypatch.delenv(var, raising=False)
    model_dir = tmp_path / "model"
    (model_dir / "Format-TFLite").mkdir(parents=True)
    (model_dir / "Format-TFLite" / "model.tflite").write_bytes(b"an older model's")
    request = build_train_request(
        {
            "examples": str(PENGUIN / "data"),
            "module_file": str(STRING_MODULE),
            "model_dir": str(model_dir),
        },
        environ={},
    )
    seen = {}

    def before_publish(result):
        staged = glob.glob(str(tmp_path / ".model.staging-*" / "schemata" / "*.yaml"))
        seen.update(
            staged=sorted(os.path.basename(p) for p in staged),
            published=(model_dir / "schemata").exists() or (model_dir / "Format-Serving").exists(),
            schemata=result.schemata,
        )

    train.run(request, before_publish=before_publish)
    assert seen == {
        "staged": ["instance.yaml", "prediction.yaml"],
        "published": False,
        "schemata": ("instance.yaml", "prediction.yaml"),
    }
    assert sorted(os.listdir(model_dir)) == ["Format-Serving", "logs", "schemata"]
    assert sorted(os.listdir(model_dir / "schemata")) == ["instance.yaml", "prediction.yaml"]
    assert [n for n in os.listdir(tmp_path) if n != "model"] == []


def test_tflite_flags_become_options_and_bad_ones_name_their_flag():
    assert check_options(None) is None and check_options(False, "none") is None
    assert check_options(True) == TFLiteOptions("none", None)
    assert check_options("true", "float16", "0.5") == TFLiteOptions("float16", 0.5)
    assert TFLiteOptions("dynamic").max_abs_diff == DEFAULT_TOLERANCES["dynamic"]
    for args, flag in (
        ((False, "dynamic"), "--tflite-quantization"),
        ((None, None, 0.1), "--tflite-tolerance"),
        ((True, "int8"), "--tflite-quantization"),
        ((True, None, "-1"), "--tflite-tolerance"),
        ((True, None, "lots"), "--tflite-tolerance"),
        (("maybe",), "--export-tflite"),
    ):
        with pytest.raises(UserInputError) as e:
            check_options(*args)
        assert e.value.input_name == flag


def test_export_tflite_verb_refuses_a_dir_without_a_saved_model(tmp_path):
    from generic_trainer import cli

    assert (
        cli.main(["export-tflite", "--model", str(tmp_path), "--output", str(tmp_path / "out")])
        == 2
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_vocabulary_read_from_a_file_converts_and_is_checked_on_examples(tmp_path):
    """A signature over serialized tf.Examples whose lookup table is filled from a vocabulary file
    (as tf.Transform's are): the TFLite model takes the parsed features and looks the strings up."""
    import numpy as np
    import tensorflow as tf
    from generic_trainer.tflite import export as tflite_export

    (tmp_path / "vocab.txt").write_text("adelie\ngentoo\nchinstrap\n")

    class Model(tf.Module):
        def __init__(self):
            super().__init__()
            self.vocab = tf.saved_model.Asset(str(tmp_path / "vocab.txt"))
            self.table = tf.lookup.StaticHashTable(
                tf.lookup.TextFileInitializer(
                    self.vocab,
                    tf.string,
                    tf.lookup.TextFileIndex.WHOLE_LINE,
                    tf.int64,
                    tf.lookup.TextFileIndex.LINE_NUMBER,
                ),
                -1,
            )

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
        def serve(self, serialized):
            features = tf.io.parse_example(
                serialized,
                {
                    "kind": tf.io.FixedLenFeature([1], tf.string),
                    "size": tf.io.FixedLenFeature([1], tf.float32),
                },
            )
            return {
                "score": tf.cast(self.table.lookup(features["kind"]) + 2, tf.float32)
                * features["size"]
            }

    model = Model()
    tf.saved_model.save(model, str(tmp_path / "sm"), signatures={"serving_default": model.serve})
    rows = [(b"adelie", 1.0), (b"chinstrap", 2.0), (b"unknown", 3.0)]
    (tmp_path / "ex" / "Split-eval").mkdir(parents=True)
    with tf.io.TFRecordWriter(str(tmp_path / "ex" / "Split-eval" / "data.tfrecord")) as writer:
        for kind, size in rows:
            writer.write(
                tf.train.Example(
                    features=tf.train.Features(
                        feature={
                            "kind": tf.train.Feature(bytes_list=tf.train.BytesList(value=[kind])),
                            "size": tf.train.Feature(float_list=tf.train.FloatList(value=[size])),
                        }
                    )
                ).SerializeToString()
            )
    record = tflite_export.export(
        str(tmp_path / "sm"),
        str(tmp_path / "lite"),
        TFLiteOptions(),
        [str(tmp_path / "ex" / "Split-eval" / "*")],
    )
    assert record["validated_on"] == "3 eval examples" and record["max_abs_diff"] == 0.0
    assert record["input_names"] == ["kind", "size"]
    runner = tf.lite.Interpreter(
        model_path=str(tmp_path / "lite" / "model.tflite")
    ).get_signature_runner()
    got = runner(
        kind=np.array([[k] for k, _ in rows]), size=np.array([[s] for _, s in rows], np.float32)
    )
    assert got["score"].ravel().tolist() == [2.0, 8.0, 3.0]  # (id + 2) * size; unknown -> -1
