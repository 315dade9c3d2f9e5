"""TFX's MNIST pipeline ported to this image (pipelines/mnist_pipeline.py): it compiles into TFX's
wiring, and runs under kfp.local (every task the real CLI behind pipelines/host_runner.py) on
MNIST-like TFRecords made by examples/mnist/make_data.py: ImportExampleGen -> Transform -> Trainer
(transformed examples, raw schema, transform graph) -> Evaluator (TFX's EvalConfig) -> Pusher, which
leaves a SavedModel TF Serving loads under
<serving_model_dir>/<Unix seconds>/."""

# No `from __future__ import annotations`: kfp reads the pipeline function's annotations as types.
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from pipelines import mnist_pipeline

EXAMPLES = 300


def _task_input(tasks: dict, task: str, kind: str, name: str) -> dict:
    return tasks[task]["inputs"][kind][name]


def _from(producer: str, key: str) -> dict:
    return {"taskOutputArtifact": {"outputArtifactKey": key, "producerTask": producer}}


def test_mnist_pipeline_compiles_into_tfx_wiring(tmp_path):
    out = tmp_path / "mnist.yaml"
    mnist_pipeline.compile_pipeline(str(out), accuracy_threshold=0.9)
    spec = yaml.safe_load(out.read_text())
    tasks = spec["root"]["dag"]["tasks"]
    assert set(tasks) == {
        "generic-import-examples",
        "generic-transform",
        "generic-trainer",
        "generic-evaluator",
        "generic-pusher",
    }
    assert {t["taskInfo"]["name"] for t in tasks.values()} == {
        "ImportExampleGen",
        "Transform",
        "Trainer.mnist",
        "Evaluator.mnist",
        "Pusher.mnist",
    }
    assert _task_input(tasks, "generic-import-examples", "parameters", "format") == {
        "runtimeValue": {"constant": "tfrecord"}
    }
    assert _task_input(tasks, "generic-import-examples", "parameters", "input_pattern") == {
        "componentInputParameter": "data_pattern"
    }
    # Trainer(examples=transform's transformed_examples, transform_graph=..., schema=schema_gen's
    # (raw) schema)
    assert _task_input(tasks, "generic-trainer", "artifacts", "examples") == _from(
        "generic-transform", "transformed_examples"
    )
    assert _task_input(tasks, "generic-trainer", "artifacts", "transform_graph") == _from(
        "generic-transform", "transform_graph"
    )
    assert _task_input(tasks, "generic-trainer", "artifacts", "schema") == _from(
        "generic-import-examples", "output_schema"
    )
    assert _task_input(tasks, "generic-transform", "artifacts", "examples") == _from(
        "generic-import-examples", "examples"
    )
    # Evaluator(examples=example_gen's (raw) examples, model=trainer's); Pusher(model,
    # model_blessing, destination)
    assert _task_input(tasks, "generic-evaluator", "artifacts", "examples") == _from(
        "generic-import-examples", "examples"
    )
    assert _task_input(tasks, "generic-pusher", "artifacts", "model") == _from(
        "generic-trainer", "model"
    )
    assert _task_input(tasks, "generic-pusher", "artifacts", "model_blessing") == _from(
        "generic-evaluator", "blessing"
    )
    assert _task_input(tasks, "generic-pusher", "parameters", "push_destination") == {
        "componentInputParameter": "serving_model_dir"
    }
    params = spec["root"]["inputDefinitions"]["parameters"]
    assert params["train_args"]["defaultValue"] == {
        "num_steps": 5000.0
    }  # TFX's TrainArgs(num_steps=5000)
    assert params["eval_args"]["defaultValue"] == {"num_steps": 100.0}
    metric = params["eval_config"]["defaultValue"]["metrics_specs"][0]["metrics"][0]
    assert metric == {
        "class_name": "SparseCategoricalAccuracy",
        "threshold": {"value_threshold": {"lower_bound": 0.9}},
    }
    pusher = yaml.safe_load((REPO / "components" / "pusher" / "component.yaml").read_text())
    assert spec["deploymentSpec"]["executors"]["exec-generic-pusher"] == next(
        iter(pusher["deploymentSpec"]["executors"].values())
    )


# Loads the pushed version as TF Serving would (the SavedModel in <destination>/<version>/) and
# serves every
# record of the data with it: raw serialized tf.Examples in, 10 logits out.
_SERVE_PUSHED = """
import glob, json, sys
import numpy as np
import tensorflow as tf

version_dir, pattern = sys.argv[1:3]
fn = tf.saved_model.load(version_dir).signatures["serving_default"]
records = list(tf.data.TFRecordDataset(
    sorted(glob.glob(pattern)), compression_type="GZIP").as_numpy_iterator())
labels = [tf.train.Example.FromString(r).features.feature["image_class"].int64_list.value[0]
          for r in records]
logits = fn(examples=tf.constant(records))["outputs"].numpy()
print("RESULT" + json.dumps({
    "rows": len(records), "shape": list(logits.shape),
    "accuracy": float(np.mean(np.argmax(logits, axis=1) == np.array(labels))),
}))
"""


@pytest.mark.timeout(
    3600
)  # five tasks, each a fresh process importing TensorFlow (and Beam) on a loaded machine
@pytest.mark.e2e
@pytest.mark.slow
def test_mnist_pipeline_runs_under_kfp_local_and_pushes_a_servable_model(tmp_path):
    data = tmp_path / "mnist_data"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    made = subprocess.run(
        [
            sys.executable,
            str(REPO / "examples" / "mnist" / "make_data.py"),
            str(data),
            "--examples",
            str(EXAMPLES),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert made.returncode == 0, made.stderr[-3000:]
    root, serving = tmp_path / "root", tmp_path / "serving" / "mnist"
    started = int(time.time())
    mnist_pipeline.run_local(
        str(root), str(data / "*"), str(serving), train_steps=120, eval_steps=5, timeout_s=1200
    )

    def one(pattern: str) -> Path:
        found = [p for p in root.glob(pattern) if "workspace-" not in str(p)]
        assert len(found) == 1, (pattern, found)
        return found[0]

    from generic_trainer.records import example_files, schemas

    examples = one("*/generic-import-examples/examples")
    counts = {
        s: sum(
            len(list(example_files.read_records(str(f))))
            for f in (examples / f"Split-{s}").iterdir()
        )
        for s in ("train", "eval")
    }
    assert sum(counts.values()) == EXAMPLES and counts["eval"] > 0  # ImportExampleGen's hash split
    schema = schemas.load_schema(str(one("*/generic-import-examples/output_schema")))
    shapes = {f.name: [d.size for d in f.shape.dim] for f in schema.feature}
    assert shapes["image_floats"] == [784]  # SchemaGen(infer_feature_shape=True)
    transformed = one("*/generic-transform/transformed_examples")
    assert {p.name for p in transformed.iterdir()} >= {"Split-train", "Split-eval"}
    model = one("*/generic-trainer/model")
    evaluation = json.loads(one("*/generic-evaluator/metrics").read_text())
    assert evaluation["blessed"] and evaluation["metrics"]["sparse_categorical_accuracy"] >= 0.8, (
        evaluation
    )
    assert (one("*/generic-evaluator/blessing") / "BLESSED").is_file()

    pushed = json.loads(one("*/generic-pusher/executor_output.json").read_text())
    metadata = pushed["artifacts"]["pushed_model"]["artifacts"][0]["metadata"]
    version = metadata["pushed_version"]
    assert metadata == {
        "pushed": 1,
        "pushed_destination": str(serving / version),
        "pushed_version": version,
    }
    assert started <= int(version) <= int(time.time()) and os.listdir(serving) == [version]
    files = {str(p.relative_to(serving / version)) for p in (serving / version).rglob("*")}
    assert files == {
        str(p.relative_to(model / "Format-Serving")) for p in (model / "Format-Serving").rglob("*")
    }
    served = subprocess.run(
        [sys.executable, "-c", _SERVE_PUSHED, str(serving / version), str(data / "*")],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert served.returncode == 0, served.stderr[-3000:]
    result = json.loads(served.stdout.split("RESULT", 1)[1])
    assert (
        result["rows"] == EXAMPLES
        and result["shape"] == [EXAMPLES, 10]
        and result["accuracy"] >= 0.8
    ), result
