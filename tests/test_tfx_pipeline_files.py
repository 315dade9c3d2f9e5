"""TFX 1.21's own pipeline files, unedited from the tfx wheel, through `generic-trainer
tfx-pipeline`: mnist, taxi and imdb native-Keras run end to end here (BeamDagRunner: kfp.local,
each step a generic-trainer process) under a HOME laid out as they expect (their data and module
files copied there; mnist's data, which the wheel lacks, made by examples/mnist/make_data.py), and
push models TF Serving loads, whose `serving_default` is called here; a second taxi run compares
with the model the first blessed (the resolver's records); penguin_pipeline_kubeflow.py compiles to
a KFP v2 pipeline file of this image's components that kfp loads, wired as TFX wires it.

The files run from where they lie in the unpacked wheel (never copied into the repository)."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, cli_env
from test_tfx_real_modules import tfx_root  # noqa: F401 - the wheel fixture
from tfx_templates import penguin_csv

TIMEOUT = 3600
# several steps, each a fresh process importing TensorFlow and Beam, on a loaded machine
pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.timeout(TIMEOUT)]
# Of the wheel's 15,000 Chicago taxi rows: Beam, Transform and TFMA time grows with them, the
# 1000 train steps of the unedited file do not.
TAXI_ROWS = 3000


def _tfx_pipeline(action: str, file: Path, home: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = cli_env({"HOME": str(home), "TF_CPP_MIN_LOG_LEVEL": "2"})
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "generic_trainer", "tfx-pipeline", action, str(file)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def _ok(proc: subprocess.CompletedProcess) -> str:
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-8000:]
    return log


def _copy(src: Path, dst: Path) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(src, dst)
    return dst


# Loads the newest pushed version as TF Serving would and calls serving_default with raw serialized
# tf.Examples read from the pipeline's own examples.
_SERVE = """
import glob, json, sys
import tensorflow as tf

serving, examples = sys.argv[1:3]
version = sorted(glob.glob(serving + "/*"))[-1]
fn = tf.saved_model.load(version).signatures["serving_default"]
files = sorted(glob.glob(examples + "/Split-eval/*"))
records = list(tf.data.TFRecordDataset(files, compression_type="GZIP").take(8).as_numpy_iterator())
(key,) = fn.structured_input_signature[1].keys()
out = fn(**{key: tf.constant(records)})
print("RESULT" + json.dumps({k: list(v.shape) for k, v in out.items()}))
"""


def _served(serving: Path, examples: Path) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", _SERVE, str(serving), str(examples)],
        capture_output=True,
        text=True,
        timeout=600,
        env=cli_env({"TF_CPP_MIN_LOG_LEVEL": "2"}),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.split("RESULT", 1)[1])


def _one(root: Path, pattern: str) -> list[Path]:
    return sorted(p for p in root.glob(pattern) if "workspace-" not in str(p))


def _check_pushed(home: Path, project: str, pipeline: str) -> dict:
    serving = home / project / "serving_model" / pipeline
    versions = [p for p in serving.iterdir() if p.name.isdigit()]
    assert versions and all((v / "saved_model.pb").is_file() for v in versions), serving
    runs = home / "tfx" / "pipelines" / pipeline
    examples = _one(runs, "*/generic-import-examples/examples")[-1]
    return _served(serving, examples)


def test_taxi_native_keras_runs_pushes_and_a_second_run_compares_with_the_first(
    tfx_root,  # noqa: F811
    tmp_path,
):
    wheel = tfx_root / "tfx" / "examples" / "chicago_taxi_pipeline"
    home = tmp_path / "home"
    csv = home / "taxi" / "data" / "simple" / "data.csv"
    csv.parent.mkdir(parents=True)
    with open(wheel / "data" / "simple" / "data.csv") as src:  # the header and TAXI_ROWS rows
        csv.write_text("".join(itertools.islice(src, TAXI_ROWS + 1)))
    _copy(wheel / "taxi_utils_native_keras.py", home / "taxi" / "taxi_utils_native_keras.py")
    first = _ok(_tfx_pipeline("run", wheel / "taxi_pipeline_native_keras.py", home, tmp_path))
    assert "not run: StatisticsGen" in first and "no baseline" in first
    outputs = _check_pushed(home, "taxi", "chicago_taxi_native_keras")
    assert outputs == {"outputs": [8, 1]}, outputs
    runs = home / "tfx" / "pipelines" / "chicago_taxi_native_keras"
    [evaluation] = _one(runs, "*/generic-evaluator/metrics")
    assert json.loads(evaluation.read_text())["baseline_metrics"] is None

    second = _ok(_tfx_pipeline("run", wheel / "taxi_pipeline_native_keras.py", home, tmp_path))
    assert "resolved the latest blessed model" in second
    resolved = [
        json.loads(p.read_text()) for p in _one(runs, "*/generic-resolver/executor_output.json")
    ]
    assert [r["parameterValues"]["found"] for r in resolved] == [False, True]
    evaluations = [json.loads(p.read_text()) for p in _one(runs, "*/generic-evaluator/metrics")]
    assert len(evaluations) == 2 and evaluations[1]["baseline_model"], evaluations[1]
    assert evaluations[1]["baseline_metrics"], evaluations[1]


@pytest.mark.tfx_files
def test_mnist_native_keras_runs_and_pushes_a_servable_model(tfx_root, tmp_path):  # noqa: F811
    wheel = tfx_root / "tfx" / "examples" / "mnist"
    home = tmp_path / "home"
    made = subprocess.run(
        [
            sys.executable,
            str(REPO / "examples" / "mnist" / "make_data.py"),
            str(home / "mnist" / "data"),
            "--examples",
            "600",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert made.returncode == 0, made.stderr[-3000:]
    for name in ("mnist_utils_native_keras.py", "mnist_utils_native_keras_base.py"):
        _copy(wheel / name, home / "mnist" / name)
    log = _ok(_tfx_pipeline("run", wheel / "mnist_pipeline_native_keras.py", home, tmp_path))
    assert "Trainer.mnist" in log
    outputs = _check_pushed(home, "mnist", "mnist_native_keras")
    assert list(outputs.values()) == [[8, 10]], outputs


@pytest.mark.tfx_files
def test_imdb_native_keras_runs_and_pushes_a_servable_model(tfx_root, tmp_path):  # noqa: F811
    wheel = tfx_root / "tfx" / "examples" / "imdb"
    home = tmp_path / "home"
    _copy(
        wheel / "data" / "imdb_small_with_labels.txt",
        home / "imdb" / "data" / "imdb_small_with_labels.txt",
    )
    _copy(wheel / "imdb_utils_native_keras.py", home / "imdb" / "imdb_utils_native_keras.py")
    _ok(_tfx_pipeline("run", wheel / "imdb_pipeline_native_keras.py", home, tmp_path))
    outputs = _check_pushed(home, "imdb", "imdb_native_keras")
    assert list(outputs.values()) == [[8, 1]], outputs


def _penguin_local_home(wheel_root: Path, home: Path) -> Path:
    """HOME as penguin_pipeline_local.py expects it: ~/penguin/data/{labelled,unlabelled}/ and
    the module files in ~/penguin."""
    wheel = wheel_root / "tfx" / "examples" / "penguin"
    data = home / "penguin" / "data"
    for folder, labelled in (("labelled", True), ("unlabelled", False)):
        (data / folder).mkdir(parents=True)
        penguin_csv(data / folder / f"penguins_{folder}_processed.csv", labelled)
    for name in ("penguin_utils_keras.py", "penguin_utils_base.py"):
        _copy(wheel / name, home / "penguin" / name)
    return wheel / "penguin_pipeline_local.py"


@pytest.mark.tfx_files
def test_penguin_local_runs_twice_and_the_second_transform_takes_the_first_runs_cache(
    tfx_root,  # noqa: F811
    tmp_path,
):
    """TFX's penguin_pipeline_local.py, unedited, with its default flags (the Keras module: Tuner,
    Trainer, Evaluator, BulkInferrer, Pusher; the transform-cache and blessed-model resolvers)."""
    home = tmp_path / "home"
    file = _penguin_local_home(tfx_root, home)
    first = _ok(_tfx_pipeline("run", file, home, tmp_path))
    # the Trainer gets the Keras TFX gives the module (tf_keras), and BulkInferrer's TF1 loader
    # serves that model
    assert "tf.keras is Keras 2 (tf_keras): --keras auto" in first
    assert "no TransformCache artifact recorded" in first
    assert "the resolver found no earlier cache; none is used" in first
    _check_pushed(home, "penguin", "penguin_local_keras")
    runs = home / "tfx" / "pipelines" / "penguin_local_keras"
    records = runs / "generic-trainer-records" / "penguin_local_keras" / "artifacts"
    assert len(list((records / "TransformCache").iterdir())) == 1
    assert len(list((records / "PushedModel").iterdir())) == 1

    second = _ok(_tfx_pipeline("run", file, home, tmp_path))
    assert "resolved the latest TransformCache artifact" in second
    # ExampleGen's output is KFP's cached one, so its train split is the dataset the cache holds
    assert "analyzer cache: 1 of 1 analyze datasets come from the cache" in second
    caches = [
        json.loads(p.read_text())["artifacts"]["updated_analyzer_cache"]["artifacts"][0]
        for p in _one(runs, "*/generic-transform/executor_output.json")
    ]
    assert [c["metadata"]["cached_datasets"] for c in caches] == [0, 1], caches
    assert "resolved the latest blessed model" in second


def test_penguin_kubeflow_compiles_to_a_pipeline_of_this_images_components(
    tfx_root,  # noqa: F811
    tmp_path,
):
    from kfp import components

    wheel = tfx_root / "tfx" / "examples" / "penguin"
    _ok(_tfx_pipeline("run", wheel / "penguin_pipeline_kubeflow.py", tmp_path, tmp_path))
    written = tmp_path / "penguin-kubeflow_pipeline.json"
    spec = json.loads(written.read_text())
    loaded = components.load_component_from_file(str(written))  # kfp accepts it
    assert set(loaded.component_spec.inputs) == {"train_args", "eval_args"}
    tasks = dict(spec["root"]["dag"]["tasks"])
    names = {t["taskInfo"]["name"]: key for key, t in tasks.items()}
    assert set(names) == {
        "CsvExampleGen",
        "ImportSchemaGen",
        "latest_blessed_model_resolver",
        "Transform",
        "Trainer",
        "Evaluator",
        "Pusher",
    }

    def source(task: str, name: str) -> tuple[str, str]:
        ref = tasks[names[task]]["inputs"]["artifacts"][name]["taskOutputArtifact"]
        return tasks[ref["producerTask"]]["taskInfo"]["name"], ref["outputArtifactKey"]

    assert source("Trainer", "examples") == ("Transform", "transformed_examples")
    assert source("Trainer", "schema") == ("ImportSchemaGen", "artifact")
    assert source("Evaluator", "baseline_model") == ("latest_blessed_model_resolver", "model")
    assert source("Pusher", "model_blessing") == ("Evaluator", "blessing")
    trainer = tasks[names["Trainer"]]["inputs"]["parameters"]
    assert trainer["train_args"] == {"componentInputParameter": "train_args"}
    executors = spec["deploymentSpec"]["executors"].values()
    images = {e["container"]["image"] for e in executors if "container" in e}
    assert images == {
        os.environ.get("GENERIC_TRAINER_IMAGE", "ghcr.io/generic-trainer/trainer:latest")
    }
    assert {e["container"]["command"][0] for e in executors if "container" in e} == {
        "generic-trainer"
    }
