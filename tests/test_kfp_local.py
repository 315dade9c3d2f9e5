"""The trainer component run the way KFP runs it: a real kfp.local pipeline, kfp's own placeholder
resolution, executor input and reading back of outputs; only the container is replaced by a host
process (pipelines/host_runner.py), so `generic-trainer` from .venv runs the resolved command.

One pipeline (tasks run in order): import the bundled penguin examples and schema with dsl.importer,
search hyperparameters with the tuner component (one short trial), train the penguin module with
the tuner's best hyperparameters and the schema, hand its model to a downstream component that
loads and calls it, and train a second, unrelated module with every optional input left out and a
custom_config whose integers KFP turns into floats.
"""

# No `from __future__ import annotations`: kfp reads the component and pipeline annotations as
# types.
import gzip
import json
import os
import re
import struct
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import NamedTuple

import pytest
from conftest import PENGUIN, REPO

pytestmark = pytest.mark.slow

SECRET = "s3cret-Value-never-shown"
# Every eval example is seen exactly once (whatever the 30-step model's accuracy), sliced by island.
EVAL_CONFIG = {
    "label_key": "species",
    "slices": [["island"]],
    "thresholds": {"example_count": {"lower_bound": 95, "upper_bound": 95}},
}

# A module unlike the bundled one: it reads no schema, counts the train records itself, fits a tiny
# regression on synthetic numbers, and reports what it was given.
TINY_MODULE = textwrap.dedent('''
    """Test module: records what fn_args held, trains y = 3x + 1, exports a SavedModel."""
    import json
    import os

    import keras
    import numpy as np
    import tensorflow as tf


    def _types(value):
        if isinstance(value, dict):
            return {k: _types(v) for k, v in value.items()}
        if isinstance(value, list):
            return [_types(v) for v in value]
        return type(value).__name__


    def train_tiny(fn_args):
        cfg = fn_args.custom_config
        files = [f for pattern in fn_args.train_files for f in tf.io.gfile.glob(pattern)]
        records = sum(1 for _ in tf.data.TFRecordDataset(files, compression_type="GZIP"))
        seen = {
            "custom_config": cfg, "types": _types(cfg), "schema_path": fn_args.schema_path,
            "transform_output": fn_args.transform_output,
            "hyperparameters": fn_args.hyperparameters,
            "base_model": fn_args.base_model, "train_steps": fn_args.train_steps,
        }
        with open(os.path.join(fn_args.model_run_dir, "fn_args_seen.json"), "w") as f:
            json.dump(seen, f)
        x = np.linspace(-1, 1, 64, dtype="float32").reshape(-1, 1)
        model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
        model.fit(x, 3 * x + 1, epochs=cfg["epochs"], batch_size=cfg["sizes"][0],
                  validation_data=(x, 3 * x + 1),
                  callbacks=[keras.callbacks.TensorBoard(log_dir=fn_args.model_run_dir)],
                  verbose=0)
        model.export(fn_args.serving_model_dir)
        return {"train_records": records}
''')

# The downstream component: reads the model artifact (and the metadata KFP hands it) from the
# executor input, loads the SavedModel, calls serving_default on two examples, and reports back
# as KFP expects (an executor output listing its output artifact).
CHECK_MODEL = textwrap.dedent("""
    import json, os, sys
    ex = json.loads(sys.argv[1])
    model = ex["inputs"]["artifacts"]["model"]["artifacts"][0]
    out = ex["outputs"]["artifacts"]["summary"]["artifacts"][0]
    import tensorflow as tf
    path = os.path.join(model["uri"], model["metadata"]["serving_model_path"])
    fn = tf.saved_model.load(path).signatures["serving_default"]
    name, spec = next(iter(fn.structured_input_signature[1].items()))
    if spec.dtype == tf.string:  # serialized tf.Example in: two records of the eval split
        examples = ex["inputs"]["artifacts"]["examples"]["artifacts"][0]["uri"]
        files = tf.io.gfile.glob(os.path.join(examples, "Split-eval", "*"))
        value = tf.stack(list(tf.data.TFRecordDataset(files, compression_type="GZIP").take(2)))
    else:
        value = tf.zeros([2] + spec.shape.as_list()[1:], spec.dtype)
    outputs = fn(**{name: value})
    summary = {"received_uri": model["uri"], "received_metadata": model["metadata"],
               "input": name, "outputs": sorted(outputs),
               "rows": int(next(iter(outputs.values())).shape[0])}
    os.makedirs(os.path.dirname(out["uri"]), exist_ok=True)
    with open(out["uri"], "w") as f:
        json.dump(summary, f)
    with open(ex["outputs"]["outputFile"], "w") as f:
        json.dump({"artifacts": {"summary": {"artifacts": [
            {"name": out["name"], "uri": out["uri"], "metadata": {"rows": summary["rows"]}}]}}}, f)
""")


def _count_tfrecords(directory: Path) -> int:
    """Records in the gzipped TFRecord files of `directory`, read from the framing (no
    TensorFlow)."""
    count = 0
    for path in directory.glob("*.gz"):
        data = gzip.decompress(path.read_bytes())
        offset = 0
        while offset < len(data):
            (length,) = struct.unpack("<Q", data[offset : offset + 8])
            offset += 8 + 4 + length + 4
            count += 1
    return count


@pytest.fixture(scope="module")
def kfp_run(tmp_path_factory):
    """Run the pipeline once; returns (pipeline outputs, commands the host runner ran, task
    logs)."""
    from kfp import components, dsl
    from kfp.dsl import Artifact, Dataset, Input, Metrics, Model, Output

    from pipelines.host_runner import HostTaskHandler, host_runner

    tmp = tmp_path_factory.mktemp("kfp")
    tiny = tmp / "tiny_module.py"
    tiny.write_text(TINY_MODULE)
    trainer = components.load_component_from_file(
        str(REPO / "components" / "trainer" / "component.yaml")
    )
    evaluator = components.load_component_from_file(
        str(REPO / "components" / "evaluator" / "component.yaml")
    )
    infra_validator = components.load_component_from_file(
        str(REPO / "components" / "infra_validator" / "component.yaml")
    )
    tuner = components.load_component_from_file(
        str(REPO / "components" / "tuner" / "component.yaml")
    )

    @dsl.container_component
    def check_model(model: Input[Model], examples: Input[Dataset], summary: Output[Artifact]):
        return dsl.ContainerSpec(
            image="python:3.11",
            command=["python3", "-c", CHECK_MODEL],
            args=[dsl.PIPELINE_TASK_EXECUTOR_INPUT_PLACEHOLDER],
        )

    class Outputs(NamedTuple):
        best_hyperparameters: Artifact
        tuner_metrics: Metrics
        penguin_model: Model
        penguin_metrics: Metrics
        penguin_report: Artifact
        summary: Artifact
        tiny_model: Model
        tiny_run: Artifact
        tiny_metrics: Metrics
        evaluation: Metrics
        blessing: Artifact
        infra_blessing: Artifact
        infra_metrics: Metrics

    @dsl.pipeline(name="generic-trainer-local-test")
    def pipeline(
        examples_uri: str, schema_uri: str, penguin_module: str, tiny_module: str
    ) -> Outputs:
        examples = dsl.importer(artifact_uri=examples_uri, artifact_class=Dataset)
        schema = dsl.importer(artifact_uri=schema_uri, artifact_class=Artifact)
        tuned = tuner(
            examples=examples.output,
            schema=schema.output,
            module_file=penguin_module,
            max_trials=1,
            train_args={"num_steps": 5},
            eval_args={"num_steps": 2},
        )
        penguin = trainer(
            examples=examples.output,
            schema=schema.output,
            module_file=penguin_module,
            hyperparameters=tuned.outputs["best_hyperparameters"],
            train_args={"num_steps": 30},
            eval_args={"num_steps": 5},
            custom_config={"epochs": 2, "batch_size": 16, "api_token": SECRET},
        )
        check = check_model(model=penguin.outputs["model"], examples=examples.output)
        evaluated = evaluator(
            model=penguin.outputs["model"],
            examples=examples.output,
            schema=schema.output,
            eval_config=EVAL_CONFIG,
        )
        validated = infra_validator(
            model=penguin.outputs["model"],
            examples=examples.output,
            model_blessing=evaluated.outputs["blessing"],
            num_requests=3,
            batch_size=4,
        )
        small = trainer(
            examples=examples.output,
            module_file=tiny_module,
            run_fn="train_tiny",
            custom_config={"epochs": 3, "sizes": [16, 8], "nested": {"depth": 2}, "rate": 0.5},
        )
        small.after(check)
        return Outputs(
            tuned.outputs["best_hyperparameters"],
            tuned.outputs["metrics"],
            penguin.outputs["model"],
            penguin.outputs["metrics"],
            penguin.outputs["report"],
            check.outputs["summary"],
            small.outputs["model"],
            small.outputs["model_run"],
            small.outputs["metrics"],
            evaluated.outputs["metrics"],
            evaluated.outputs["blessing"],
            validated.outputs["blessing"],
            validated.outputs["metrics"],
        )

    ran: list[tuple[list[str], HostTaskHandler]] = []
    original_run = HostTaskHandler.run

    def recording_run(self):
        ran.append((self.full_command, self))
        return original_run(self)

    bin_dir = os.path.dirname(sys.executable)  # .venv/bin: generic-trainer and python3
    env = {"PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.update({k: "" for k in ("TF_CONFIG", "CLUSTER_SPEC")})
    HostTaskHandler.run = recording_run
    try:
        with host_runner(str(tmp / "root"), env=env, timeout_s=300):
            outputs = pipeline(
                examples_uri=str(PENGUIN / "data"),
                schema_uri=str(PENGUIN / "schema.pbtxt"),
                penguin_module=str(PENGUIN / "module.py"),
                tiny_module=str(tiny),
            )
    finally:
        HostTaskHandler.run = original_run
    return outputs, ran


def test_model_and_metrics_artifacts_as_kfp_reads_them(kfp_run):
    outputs, _ = kfp_run
    model = outputs.outputs["penguin_model"]
    serving = Path(model.path) / "Format-Serving"
    assert (serving / "saved_model.pb").is_file() and (
        serving / "variables" / "variables.index"
    ).is_file()
    assert model.metadata["framework"] == "tensorflow"
    assert model.metadata["serving_model_path"] == "Format-Serving"
    assert model.metadata["signature_names"] == ["serving_default"]
    assert model.metadata["train_steps"] == 30
    assert model.metadata["num_replicas"] == 1
    metrics = outputs.outputs["penguin_metrics"].metadata
    assert {"accuracy", "loss", "train_accuracy", "train_loss"} <= set(metrics)
    assert all(isinstance(v, float) for v in metrics.values())
    assert 0.0 <= metrics["accuracy"] <= 1.0


def test_report_artifact_shows_the_run_without_secrets(kfp_run):
    outputs, _ = kfp_run
    html = Path(outputs.outputs["penguin_report"].path).read_text()
    assert html.startswith("<!DOCTYPE html>")
    assert html.count("<svg") >= 2  # loss and accuracy curves from the TensorBoard logs
    assert ">loss</text>" in html and "validation" in html
    assert "module.py" in html and "Final metrics" in html
    assert SECRET not in html


def test_downstream_component_receives_and_calls_the_model(kfp_run):
    outputs, _ = kfp_run
    summary_artifact = outputs.outputs["summary"]
    summary = json.loads(Path(summary_artifact.path).read_text())
    assert summary["received_uri"] == outputs.outputs["penguin_model"].uri
    assert summary["received_metadata"]["signature_names"] == ["serving_default"]
    assert summary["input"] == "examples" and summary["rows"] == 2
    assert summary_artifact.metadata == {"rows": 2}


def test_optional_inputs_left_out_and_ints_restored(kfp_run):
    outputs, ran = kfp_run
    # KFP itself turned the nested ints into floats in the executor input ...
    tiny_cmd = next(cmd for cmd, _ in ran if "train_tiny" in " ".join(cmd))
    assert tiny_cmd[:3] == ["generic-trainer", "train", "--executor-input"]
    executor_input = json.loads(tiny_cmd[3])
    raw = executor_input["inputs"]["parameterValues"]["custom_config"]
    assert raw["epochs"] == 3 and isinstance(raw["epochs"], float)
    assert set(executor_input["inputs"].get("artifacts", {})) == {"examples"}
    # ... and the module got ints back (floats that are not whole stay floats).
    seen = json.loads((Path(outputs.outputs["tiny_run"].path) / "fn_args_seen.json").read_text())
    assert seen["custom_config"] == {
        "epochs": 3,
        "sizes": [16, 8],
        "nested": {"depth": 2},
        "rate": 0.5,
    }
    assert seen["types"] == {
        "epochs": "int",
        "sizes": ["int", "int"],
        "nested": {"depth": "int"},
        "rate": "float",
    }
    assert seen["schema_path"] is None and seen["transform_output"] is None
    assert (
        seen["hyperparameters"] is None
        and seen["base_model"] is None
        and seen["train_steps"] is None
    )
    train_records = _count_tfrecords(PENGUIN / "data" / "Split-train")
    assert outputs.outputs["tiny_metrics"].metadata["train_records"] == train_records
    assert (
        Path(outputs.outputs["tiny_model"].path) / "Format-Serving" / "saved_model.pb"
    ).is_file()


def test_secret_custom_config_value_not_in_logs_or_metadata(kfp_run):
    outputs, ran = kfp_run
    penguin_cmd, penguin_task = next(
        (cmd, task) for cmd, task in ran if cmd[1] == "train" and "module.py" in " ".join(cmd)
    )
    assert SECRET in penguin_cmd[3]  # KFP passes it in the executor input ...
    assert '"api_token": "***"' in penguin_task.output  # ... the trainer logs it redacted ...
    for _, task in ran:
        assert SECRET not in task.output
    for artifact in outputs.outputs.values():  # ... and never writes it to metadata
        assert SECRET not in json.dumps(artifact.metadata)


def test_tuner_component_feeds_the_trainer(kfp_run):
    outputs, _ = kfp_run
    best = json.loads(
        (
            Path(outputs.outputs["best_hyperparameters"].path) / "best_hyperparameters.txt"
        ).read_text()
    )
    assert set(best) == {"space", "values"} and best["values"]
    tuner_metrics = outputs.outputs["tuner_metrics"].metadata
    assert tuner_metrics["trials_completed"] == 1.0 and "best_score" in tuner_metrics
    # The trainer's report lists the hyperparameters it was given: the tuner's best values.
    html = Path(outputs.outputs["penguin_report"].path).read_text()
    row = re.search(r"<td>hyperparameters</td><td>([^<]*)</td>", html).group(1)
    given = json.loads(row.replace("&quot;", '"'))
    assert given["values"] == best["values"]


def test_evaluator_and_infra_validator_bless_the_trained_model(kfp_run):
    outputs, ran = kfp_run
    eval_count = _count_tfrecords(PENGUIN / "data" / "Split-eval")
    assert eval_count == 95
    evaluation, blessing = outputs.outputs["evaluation"], outputs.outputs["blessing"]
    assert blessing.metadata["blessed"] == 1 and (Path(blessing.path) / "BLESSED").is_file()
    assert blessing.metadata["current_model"] == outputs.outputs["penguin_model"].path
    assert (
        evaluation.metadata["example_count"] == eval_count
        and 0 <= evaluation.metadata["accuracy"] <= 1
    )
    written = json.loads(Path(evaluation.path).read_text())
    islands = [s for s in written["slices"] if s["slice"] != "Overall"]
    assert sum(s["metrics"]["example_count"] for s in islands) == eval_count
    assert {s["slice"] for s in islands} == {"island:Biscoe", "island:Dream", "island:Torgersen"}
    infra, latency = outputs.outputs["infra_blessing"], outputs.outputs["infra_metrics"].metadata
    assert infra.metadata["blessed"] == 1 and (Path(infra.path) / "INFRA_BLESSED").is_file()
    assert latency["requests"] == 3 and latency["failed_requests"] == 0
    assert 0 < latency["p50_latency_ms"] <= latency["p99_latency_ms"]
    infra_cmd = next(cmd for cmd, _ in ran if cmd[1] == "infra-validate")
    artifacts = json.loads(infra_cmd[3])["inputs"]["artifacts"]
    assert (
        artifacts["model_blessing"]["artifacts"][0]["uri"] == blessing.uri
    )  # the evaluator's blessing


# The TFLite model and the SavedModel on every eval row and on copies of each with an island, or a
# sex, that the
# vocabularies lack (the transform graph's default id): the TFLite model takes the parsed features,
# the SavedModel
# serialized tf.Examples. Every row is copied because a briefly trained model can be so sure of a
# row that its
# softmax does not move in float32 when one feature changes; over the whole split some row always
# does.
_TFLITE_REPLAY = """
import glob, json, sys
import numpy as np
import tensorflow as tf

MODEL, EVAL = sys.argv[1:3]
records = tf.data.TFRecordDataset(sorted(glob.glob(EVAL + "/*")), compression_type="GZIP")
known = [tf.train.Example.FromString(r) for r in records.as_numpy_iterator()]
examples = list(known)
for key, unknown in (("island", b"Atlantis"), ("sex", b"unknown")):
    for example in known:
        copy = tf.train.Example.FromString(example.SerializeToString())
        copy.features.feature[key].bytes_list.value[:] = [unknown]
        examples.append(copy)
serving = tf.saved_model.load(MODEL + "/Format-Serving").signatures["serving_default"]
want = serving(examples=tf.constant([e.SerializeToString() for e in examples]))["outputs"].numpy()
interpreter = tf.lite.Interpreter(model_path=MODEL + "/Format-TFLite/model.tflite")
runner = interpreter.get_signature_runner("serving_default")
features = {}
for name, detail in runner.get_input_details().items():
    values = [getattr(e.features.feature[name], kind).value[0] for e in examples
              for kind in ("float_list", "int64_list", "bytes_list")
              if getattr(e.features.feature[name], kind).value]
    features[name] = np.array(
        values, dtype=object if detail["dtype"] == np.bytes_ else detail["dtype"]).reshape(-1, 1)
got = runner(**features)["outputs"]
print("RESULT" + json.dumps({
    "max_abs_diff": float(np.max(np.abs(got - want))),
    "rows": len(known),
    "oov_rows_differ_from_known": bool(
        np.abs(got[len(known):] - np.tile(want[:len(known)], (2, 1))).max() > 1e-6),
}))
"""


@pytest.mark.timeout(
    3600
)  # six tasks, each a fresh process importing TensorFlow (and Beam) on a loaded machine
@pytest.mark.e2e
def test_penguin_pipeline_from_csv_to_a_blessed_model(tmp_path):
    """pipelines/penguin_pipeline.py as it ships: CSV -> import-examples -> transform -> tuner ->
    trainer ->
    evaluator -> infra-validator, every task the real CLI behind kfp.local (tiny training)."""
    from pipelines import penguin_pipeline

    root = tmp_path / "root"
    penguin_pipeline.run_local(
        str(root), train_steps=300, tune=True, max_trials=1, eval_steps=5, timeout_s=1200
    )

    def one(pattern: str) -> Path:
        found = [p for p in root.glob(pattern) if "workspace-" not in str(p)]
        assert len(found) == 1, (pattern, found)
        return found[0]

    examples = one("*/generic-import-examples/examples")
    counts = {s: _count_tfrecords(examples / f"Split-{s}") for s in ("train", "eval")}
    assert counts == {
        "train": 224,
        "eval": 109,
    }  # as `import-examples --splits train:2,eval:1` splits the CSV
    assert (one("*/generic-import-examples/output_schema") / "schema.pbtxt").read_text() == (
        PENGUIN / "schema.pbtxt"
    ).read_text()
    graph = one("*/generic-transform/transform_graph")
    assert {p.name for p in graph.iterdir()} == {"transform_fn", "transformed_metadata", "metadata"}
    transformed = one("*/generic-transform/transformed_examples")
    assert {s: _count_tfrecords(transformed / f"Split-{s}") for s in ("train", "eval")} == counts
    best = json.loads(
        (one("*/generic-tuner/best_hyperparameters") / "best_hyperparameters.txt").read_text()
    )
    assert set(best["values"]) == {"learning_rate", "units", "num_layers"}
    model = one("*/generic-trainer/model")
    assert (model / "Format-Serving" / "saved_model.pb").is_file()
    # export_tflite is on by default: the model converted with TFLite's built-in ops, checked on the
    # eval split
    tflite = model / "Format-TFLite" / "model.tflite"
    assert tflite.is_file()
    trainer_output = json.loads(one("*/generic-trainer/executor_output.json").read_text())
    metadata = trainer_output["artifacts"]["model"]["artifacts"][0]["metadata"]
    assert metadata["tflite_model_path"] == "Format-TFLite/model.tflite"
    assert metadata["tflite_size_bytes"] == tflite.stat().st_size > 0
    assert metadata["tflite_quantization"] == "none" and metadata["tflite_tolerance"] == 1e-4
    assert 0 <= metadata["tflite_max_abs_diff"] <= 1e-4
    # The trainer gets Transform's transformed examples (TFX's wiring); its serving model takes raw
    # tf.Examples, so
    # the trainer checks the TFLite model on random inputs, and the replay below checks it on the
    # raw eval split.
    assert metadata["tflite_validated_on"] == "random inputs (no examples given)"
    validation = json.loads((model / "Format-TFLite" / "validation.json").read_text())
    assert validation["input_names"] == [
        "bill_depth_mm",
        "bill_length_mm",
        "body_mass_g",
        "flipper_length_mm",
        "island",
        "sex",
        "year",
    ]  # the parsed features, the label left out
    check = subprocess.run(
        [sys.executable, "-c", _TFLITE_REPLAY, str(model), str(examples / "Split-eval")],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert check.returncode == 0, check.stderr[-3000:]
    replay = json.loads(check.stdout.split("RESULT", 1)[1])
    assert replay["rows"] == counts["eval"] and replay["max_abs_diff"] <= 1e-4, (
        replay
    )  # unknown values included
    assert replay["oov_rows_differ_from_known"], (
        replay
    )  # the unknown values reached the model, not an error
    blessing = one("*/generic-evaluator*/blessing")
    assert (blessing / "BLESSED").is_file(), list(blessing.iterdir())
    evaluation = json.loads(one("*/generic-evaluator*/metrics").read_text())
    assert (
        evaluation["metrics"]["example_count"] == counts["eval"]
        and evaluation["metrics"]["accuracy"] >= 0.8
    )
    assert (one("*/generic-infra-validator*/blessing") / "INFRA_BLESSED").is_file()
    # the infra-validator wrote the pipeline's 10 warm-up requests (TF Serving's PredictionLog
    # records) into the model
    from generic_trainer.records.example_files import read_records

    warmup = (
        one("*/generic-trainer/model")
        / "Format-Serving"
        / "assets.extra"
        / "tf_serving_warmup_requests"
    )
    assert len(list(read_records(str(warmup)))) == 10
