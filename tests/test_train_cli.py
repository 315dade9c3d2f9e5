"""End to end: `generic-trainer train` as a subprocess, the way KFP, docker run and Vertex call
it."""

from __future__ import annotations

import glob
import json
import os
import random
import shutil
from pathlib import Path

import pytest
from conftest import PENGUIN, gcs_upload, run_cli
from datagen import gzip_garbage, write_schema, write_split

pytestmark = pytest.mark.slow  # every test here trains (or starts the CLI) in TensorFlow

REGRESSION = Path(__file__).parent / "modules" / "regression"


def _serve(serving_dir: Path, records: list[bytes]):
    import tensorflow as tf

    fn = tf.saved_model.load(str(serving_dir)).signatures["serving_default"]
    name = next(iter(fn.structured_input_signature[1]))
    return next(iter(fn(**{name: tf.constant(records)}).values())).numpy()


def test_penguin_model_is_published_whole_and_serves(trained_penguin_model: Path):
    import tensorflow as tf

    serving = trained_penguin_model / "Format-Serving"
    assert (serving / "saved_model.pb").is_file()
    assert not [p for p in os.listdir(trained_penguin_model) if p.startswith(".")], (
        "staging dirs left behind"
    )
    files = glob.glob(str(PENGUIN / "data/Split-eval/*"))
    records = list(tf.data.TFRecordDataset(files, compression_type="GZIP").as_numpy_iterator())
    labels = [
        tf.train.Example.FromString(r).features.feature["species"].int64_list.value[0]
        for r in records
    ]
    probs = _serve(serving, records)
    accuracy = sum(int(p.argmax() == y) for p, y in zip(probs, labels, strict=True)) / len(labels)
    assert accuracy > 0.9
    metrics = json.loads((trained_penguin_model.parent / "metrics.json").read_text())
    # Final eval metrics come from what Keras logged, without the module's help.
    assert 0.0 <= metrics["accuracy"] <= 1.0 and metrics["loss"] >= 0
    assert glob.glob(str(trained_penguin_model / "logs" / "final" / "events.out.tfevents.*"))


def _regression_data(root: Path, splits=("training", "validation"), n=200) -> Path:
    rng = random.Random(0)
    for split in splits:
        rows = []
        for _ in range(n):
            x1, x2 = rng.uniform(-1, 1), rng.uniform(-1, 1)
            rows.append({"x1": [x1], "x2": [x2], "target": [3 * x1 - 2 * x2 + 0.5]})
        write_split(str(root / "examples"), split, rows, gzipped=(split != "validation"))
    write_schema(
        str(root / "schema" / "schema.pbtxt"), {"x1": "FLOAT", "x2": "FLOAT", "target": "FLOAT"}
    )
    return root


def test_a_regression_module_gets_its_schema_splits_hyperparameters_and_dirs(tmp_path: Path):
    root = _regression_data(tmp_path)
    hp_dir = tmp_path / "hp"
    hp_dir.mkdir()
    (hp_dir / "best_hyperparameters.txt").write_text(
        json.dumps({"space": [], "values": {"units": 4}})
    )
    proc = run_cli(
        [
            "train",
            "--examples",
            root / "examples",
            "--schema",
            root / "schema",
            "--module-file",
            REGRESSION / "regress_module.py",
            "--run-fn",
            "train_regressor",
            "--train-splits",
            "training",
            "--eval-splits",
            "validation",
            "--train-steps",
            "30",
            "--eval-steps",
            "5",
            "--custom-config",
            json.dumps({"epochs": 2, "api_token": "hunter2"}),
            "--hyperparameters",
            hp_dir,
            "--model-dir",
            tmp_path / "model",
            "--metrics-file",
            tmp_path / "m.json",
            "--checkpoint-dir",
            tmp_path / "ckpt",
            "--model-run-dir",
            tmp_path / "run",
        ],
        env={"AIP_TENSORBOARD_LOG_DIR": str(tmp_path / "vertex-tb")},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "hunter2" not in proc.stderr + proc.stdout, "secret custom_config value was logged"
    # The module logs where Vertex AI TensorBoard reads live; the model-run dir gets a copy at the
    # end.
    record = json.loads((tmp_path / "vertex-tb" / "fn_args.json").read_text())
    assert record["model_run_dir"] == str(tmp_path / "vertex-tb")
    assert json.loads((tmp_path / "run" / "fn_args.json").read_text()) == record
    assert glob.glob(str(tmp_path / "run" / "final" / "events.out.tfevents.*"))
    assert record["train_files"] == [str(root / "examples" / "Split-training" / "*")]
    assert record["eval_files"] == [str(root / "examples" / "Split-validation" / "*")]
    assert record["schema_file"] == record["schema_path"] == str(root / "schema" / "schema.pbtxt")
    assert (record["train_steps"], record["eval_steps"]) == (30, 5)
    assert record["hyperparameters"] == {"space": [], "values": {"units": 4}}
    assert record["custom_config"] == {"epochs": 2, "api_token": "hunter2"}
    assert record["checkpoint_dir"] == str(tmp_path / "ckpt")
    import tensorflow as tf

    default = type(tf.distribute.get_strategy()).__name__  # TensorFlow's one-device strategy
    assert record["is_chief"] is True and record["strategy"] == default
    assert record["transform_output"] is None and record["base_model"] is None
    metrics = json.loads((tmp_path / "m.json").read_text())
    assert (
        metrics["custom_metric"] == 42.5
    )  # returned by run_fn: overrides / adds to what Keras logged
    assert "loss" in metrics and "mae" in metrics and "train_loss" in metrics
    pred = _serve(
        tmp_path / "model" / "Format-Serving", _records(root / "examples" / "Split-training", 4)
    )
    assert pred.shape == (4, 1)


def _records(split_dir: Path, n: int) -> list[bytes]:
    import tensorflow as tf

    files = sorted(glob.glob(str(split_dir / "*")))
    comp = "GZIP" if files[0].endswith(".gz") else ""
    return list(tf.data.TFRecordDataset(files, compression_type=comp).take(n).as_numpy_iterator())


def test_module_and_examples_from_gcs(tmp_path: Path, gcs_emulator):
    host, bucket = gcs_emulator
    uri = gcs_upload(
        host, bucket, "modules/regress_module.py", (REGRESSION / "regress_module.py").read_bytes()
    )
    gcs_upload(
        host, bucket, "modules/regress_helpers.py", (REGRESSION / "regress_helpers.py").read_bytes()
    )
    # Examples are read through the /gcs mount (Cloud Storage FUSE on Vertex); map it to a temp dir.
    gcs_root = tmp_path / "gcs"
    _regression_data(gcs_root / bucket / "pipeline", splits=("train", "eval"))
    import hashlib

    sha = hashlib.sha256((REGRESSION / "regress_module.py").read_bytes()).hexdigest()
    proc = run_cli(
        [
            "train",
            "--examples",
            f"gs://{bucket}/pipeline/examples",
            "--schema",
            f"gs://{bucket}/pipeline/schema",
            "--module-file",
            uri,
            "--module-sha256",
            sha,
            "--run-fn",
            "train_regressor",
            "--train-steps",
            "10",
            "--eval-steps",
            "3",
            "--model-dir",
            f"gs://{bucket}/out/model",
        ],
        env={"STORAGE_EMULATOR_HOST": host, "GENERIC_TRAINER_GCS_ROOT": str(gcs_root)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (gcs_root / bucket / "out" / "model" / "Format-Serving" / "saved_model.pb").is_file()
    # --keras auto: the module is not mounted, so it is read once downloaded, before TensorFlow
    # loads
    assert "cannot be read before it is fetched" in proc.stderr
    assert (
        "tf.keras is Keras 2 (tf_keras): --keras auto (decided once fetched): regress_module.py "
        "imports tfx_bsl "
        "(line 13)"
    ) in proc.stderr


# --- bad input: one clear message naming the input, non-zero exit, nothing half-written
# ---------------


def _penguin_args(tmp_path: Path, **overrides) -> list[str]:
    args = {
        "--examples": PENGUIN / "data",
        "--module-file": PENGUIN / "module.py",
        "--schema": PENGUIN / "schema.pbtxt",
        "--model-dir": tmp_path / "model",
        "--train-steps": "5",
        "--metrics-file": tmp_path / "metrics.json",
    }
    args.update(overrides)
    return ["train"] + [str(x) for kv in args.items() if kv[1] is not None for x in kv]


def _module(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "user_module.py"
    path.write_text(source)
    return path


RUN_FN_NO_MODEL = "def run_fn(fn_args):\n    pass\n"
RUN_FN_RAISES = (
    "def helper():\n    raise ValueError('boom from user code')\n\ndef "
    "run_fn(fn_args):\n    helper()\n"
)


def _corrupt_examples(tmp_path: Path) -> Path:
    root = tmp_path / "examples"
    shutil.copytree(PENGUIN / "data", root)
    gzip_garbage(str(root / "Split-eval" / "broken.gz"))
    return root


def _empty_split(tmp_path: Path) -> Path:
    root = tmp_path / "examples"
    shutil.copytree(PENGUIN / "data", root)
    for f in (root / "Split-eval").iterdir():
        f.unlink()
    return root


BAD_INPUTS = {
    "module_missing": (
        lambda t: {"--module-file": t / "nope.py"},
        2,
        ["--module-file", "nope.py", "does not exist"],
    ),
    "module_is_directory": (
        lambda t: {"--module-file": _mkdir(t / "pkg.py")},
        2,
        ["--module-file", "is a directory"],
    ),
    "module_not_text": (
        lambda t: {"--module-file": _bytes(t / "bin.py", b"\xff\xferun_fn = 1\n")},
        2,
        ["--module-file", "not valid UTF-8"],
    ),
    "module_syntax_error": (
        lambda t: {"--module-file": _module(t, "def run_fn(:\n")},
        2,
        ["--module-file", "syntax error", "line 1"],
    ),
    "no_run_fn": (
        lambda t: {"--module-file": _module(t, "def other():\n    pass\n")},
        2,
        ["--run-fn", "no function 'run_fn'", "other"],
    ),
    "run_fn_raises": (
        lambda t: {"--module-file": _module(t, RUN_FN_RAISES)},
        3,
        ["run_fn raised ValueError", "boom from user code", "in helper"],
    ),
    "run_fn_writes_no_model": (
        lambda t: {"--module-file": _module(t, RUN_FN_NO_MODEL)},
        4,
        ["wrote no model", "serving_model_dir"],
    ),
    "examples_missing": (
        lambda t: {"--examples": t / "no-examples"},
        2,
        ["--examples", "does not exist"],
    ),
    "split_empty": (lambda t: {"--examples": _empty_split(t)}, 2, ["--examples", "eval"]),
    "split_missing": (lambda t: {"--eval-splits": "test"}, 2, ["--examples", "test"]),
    "corrupt_tfrecord": (
        lambda t: {"--examples": _corrupt_examples(t)},
        2,
        ["--examples", "broken.gz"],
    ),
    "schema_unparsable": (
        lambda t: {"--schema": _text(t, "schema.pbtxt", "feature { name: ")},
        2,
        ["--schema"],
    ),
    "hyperparameters_not_json": (
        lambda t: {"--hyperparameters": _text(t, "hp.txt", "{units: 3")},
        2,
        ["--hyperparameters", "not valid JSON"],
    ),
    "custom_config_not_object": (
        lambda t: {"--custom-config": "[1, 2]"},
        2,
        ["--custom-config", "expected a JSON object"],
    ),
    "custom_config_not_json": (
        lambda t: {"--custom-config": "{epochs: 2}"},
        2,
        ["--custom-config", "not valid JSON"],
    ),
    "sha256_mismatch": (lambda t: {"--module-sha256": "0" * 64}, 2, ["--module-sha256", "differs"]),
    "sha256_malformed": (lambda t: {"--module-sha256": "abc"}, 2, ["--module-sha256", "64 hex"]),
    "train_steps_negative": (
        lambda t: {"--train-steps": "-3"},
        2,
        ["--train-steps", "whole number"],
    ),
}


def _mkdir(path: Path) -> Path:
    path.mkdir()
    return path


def _bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _text(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_exits_with_its_code_naming_the_input_and_writes_nothing(
    tmp_path: Path, case: str
):
    make, code, needles = BAD_INPUTS[case]
    proc = run_cli(_penguin_args(tmp_path, **make(tmp_path)), timeout=180)
    assert proc.returncode == code, proc.stderr[-3000:]
    err = proc.stderr
    for needle in needles:
        assert needle in err, f"{needle!r} not in:\n{err[-3000:]}"
    if code == 2:  # input errors are one message, not an internal traceback
        assert "Traceback (most recent call last)" not in err.split("train failed:")[0][-2000:]
    assert not (tmp_path / "metrics.json").exists()
    assert not (tmp_path / "model" / "Format-Serving").exists()
    leftovers = (
        [p for p in (tmp_path / "model").glob(".*")] if (tmp_path / "model").exists() else []
    )
    assert not leftovers, f"half-written outputs left: {leftovers}"


def test_a_missing_gcs_module_is_exit_2_naming_the_uri(tmp_path: Path, gcs_emulator):
    host, bucket = gcs_emulator
    proc = run_cli(
        _penguin_args(tmp_path, **{"--module-file": f"gs://{bucket}/missing/module.py"}),
        env={"STORAGE_EMULATOR_HOST": host},
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"--module-file: gs://{bucket}/missing/module.py not found" in proc.stderr


def test_help_does_not_import_tensorflow():
    import subprocess
    import sys

    code = (
        "import sys; from generic_trainer.cli import main\n"
        "try:\n    main(['train', '--help'])\nexcept SystemExit: pass\n"
        "assert 'tensorflow' not in sys.modules, 'tensorflow imported'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert (
        "--examples" in proc.stdout
        and "--module-file" in proc.stdout
        and "--executor-input" in proc.stdout
    )
