"""signature_feed.py through infra-validate, tfma_inputs.py through evaluate: models whose
serving_default takes tensors (a Keras 3 `model.export()`, the Task API's default export) are fed
from the examples (TFMA feeds evaluate's by name, without a schema too; an input it cannot feed is
refused before it runs, exit 2, naming it); an input no feature matches is INFRA_NOT_BLESSED
with that reason, exit 0, in infra-validate (TFX's InfraValidator gives a verdict, so a pipeline's
dsl.If skips the push); `--write-warmup`
writes TF Serving warm-up requests that replay against the model, and nothing when the model is
not INFRA_BLESSED."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import tiny_models
from conftest import PENGUIN, REPO, run_cli
from datagen import write_schema, write_split
from generic_trainer.errors import UserInputError

TASK_FILE = REPO / "tests" / "task_modules" / "linear_task.py"
WARMUP = Path("assets.extra") / "tf_serving_warmup_requests"


def _fn(inputs: dict, root: Path):
    """serving_default of a saved model taking `inputs` ({name: TensorSpec}) and returning their sum
    per example."""
    import tensorflow as tf

    names = sorted(inputs)

    @tf.function(input_signature=[inputs[n] for n in names])
    def serve(*args):
        flat = [tf.reshape(tf.cast(a, tf.float32), [tf.shape(a)[0], -1]) for a in args]
        return {"sum": tf.reduce_sum(tf.concat(flat, axis=1), axis=1)}

    path = root / f"model_{len(list(root.glob('model_*')))}"
    module = tf.Module()
    tf.saved_model.save(module, str(path), signatures={"serving_default": serve})
    loaded = tf.saved_model.load(str(path))
    _KEEP.append(loaded)
    return loaded.signatures["serving_default"]


_KEEP: list = []  # the loaded models, alive while their signatures are used


def _records(rows: list[dict]) -> list[bytes]:
    from datagen import example_bytes

    return [example_bytes(r) for r in rows]


def test_feed_rules_cast_reshape_pad_and_errors(tmp_path):
    import tensorflow as tf
    from generic_trainer.judge.signature_feed import SignatureFeed

    rows = [
        {"a": [1.5], "n": [3], "v": [1.0, 2.0], "s": ["x"]},
        {"a": [2.5], "n": [4], "v": [5.0], "s": ["y"]},
    ]
    fn = _fn(
        {
            "a": tf.TensorSpec([None], tf.float64, name="a"),
            "n": tf.TensorSpec([None, 1], tf.float32, name="n"),
            "v": tf.TensorSpec([None, None], tf.float32, name="v"),
        },
        tmp_path,
    )
    feed = SignatureFeed(fn, "--model")
    assert not feed.examples
    inputs = feed.inputs(_records(rows))
    assert inputs["a"].dtype == tf.float64 and inputs["a"].numpy().tolist() == [
        1.5,
        2.5,
    ]  # [1] -> scalar per example
    assert inputs["n"].dtype == tf.float32 and inputs["n"].numpy().tolist() == [
        [3.0],
        [4.0],
    ]  # INT cast to float
    assert inputs["v"].numpy().tolist() == [[1.0, 2.0], [5.0, 0.0]]  # variable length, padded
    assert feed(_records(rows))["sum"].numpy().tolist() == [1.5 + 3 + 3, 2.5 + 4 + 5]

    schema = write_schema(str(tmp_path / "schema.pbtxt"), {"a": "FLOAT", "n": "INT", "s": "BYTES"})
    cases = [
        (
            {"s": tf.TensorSpec([None, 1], tf.float32, name="s")},
            "cannot take feature 's' of type BYTES",
        ),
        (
            {"a": tf.TensorSpec([None, 1], tf.int64, name="a")},
            "cannot take feature 'a' of type FLOAT",
        ),
        (
            {"a": tf.TensorSpec([None, 4], tf.float32, name="a")},
            "takes 4 value(s) per example; feature 'a' has 1",
        ),
        (
            {"b": tf.TensorSpec([None, 1], tf.float32, name="b")},
            "matches no feature of the examples",
        ),
    ]
    for specs, needle in cases:
        with pytest.raises(UserInputError) as err:
            SignatureFeed(
                _fn(specs, tmp_path), "--model", schema
            )  # with a schema: refused before any example is read
        assert err.value.input_name == "--model" and needle in str(err.value)
        assert f"features (in the schema {schema}): a (FLOAT[1]), n (INT[1]), s (BYTES[1])" in str(
            err.value
        )
    with pytest.raises(UserInputError) as err:  # without a schema: the first example's features
        fn = _fn({"b": tf.TensorSpec([None, 1], tf.float32, name="b")}, tmp_path)
        SignatureFeed(fn, "--model").inputs(_records(rows))
    assert "features (in the first eval example): a (FLOAT), n (INT), s (BYTES), v (FLOAT)" in str(
        err.value
    )
    with pytest.raises(
        UserInputError
    ) as err:  # the second example holds 1 value where the input takes 2
        fn = _fn({"v": tf.TensorSpec([None, 2], tf.float32, name="v")}, tmp_path)
        SignatureFeed(fn, "--model").inputs(_records(rows))
    assert "the eval examples do not fit serving_default's inputs {v: float32[None, 2]}" in str(
        err.value
    )


def _replay_warmup(model_path: Path, expected_records: list[bytes]) -> list[dict]:
    """Read the warm-up file back, parse each PredictionLog and call serving_default with its
    request."""
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    fn = tf.saved_model.load(str(model_path)).signatures["serving_default"]
    specs = fn.structured_input_signature[1]
    logs = [
        prediction_log_pb2.PredictionLog.FromString(r)
        for r in tf.data.TFRecordDataset(str(model_path / WARMUP)).as_numpy_iterator()
    ]
    assert len(logs) == len(expected_records)
    replies = []
    for log, record in zip(logs, expected_records, strict=True):
        request = log.predict_log.request
        assert request.model_spec.signature_name == "serving_default" and sorted(
            request.inputs
        ) == sorted(specs)
        arrays = {k: tf.make_ndarray(v) for k, v in request.inputs.items()}
        for name, array in arrays.items():
            assert (
                array.dtype == specs[name].dtype.as_numpy_dtype and array.shape[0] == 1
            )  # one example each
        out = fn(**{k: tf.constant(v) for k, v in arrays.items()})
        assert sorted(out) == sorted(fn.structured_outputs) and all(
            v.shape[0] == 1 for v in out.values()
        )
        replies.append(
            {"inputs": arrays, "outputs": {k: v.numpy() for k, v in out.items()}, "record": record}
        )
    return replies


def _eval_records(examples: Path, n: int) -> list[bytes]:
    from generic_trainer.intake.paths import split_patterns
    from generic_trainer.judge.infra_probe import read_records

    return read_records(split_patterns(str(examples), ["eval"]), n)


@pytest.mark.slow
def test_keras_export_with_tensor_inputs_infra_validated_with_warmup(tmp_path):
    import tensorflow as tf
    from generic_trainer.records import schemas

    model = Path(tiny_models.keras_tensor_inputs(str(tmp_path / "keras_model")))
    records = _eval_records(PENGUIN / "data", 10**6)
    spec = schemas.feature_spec_from_schema(schemas.load_schema(str(PENGUIN / "schema.pbtxt")))
    parsed = tf.io.parse_example(records, spec)
    fn = tf.saved_model.load(str(model)).signatures["serving_default"]
    probs = fn(
        bill_length_mm=parsed["bill_length_mm"],
        flipper_length_mm=parsed["flipper_length_mm"],
        year=tf.cast(parsed["year"][:, 0], tf.float32),
    )["output_0"].numpy()

    # evaluate is TFMA's pipeline, which feeds a signature the features by name and does not cast:
    # `year` (float32, an INT feature) is refused before TFMA runs, naming it, exit 2
    from generic_trainer import evaluate
    from generic_trainer.errors import UserInputError
    from generic_trainer.intake.judge_request import build_evaluate_request

    request = build_evaluate_request(
        {
            "model": str(model),
            "examples": str(PENGUIN / "data"),
            "schema": str(PENGUIN / "schema.pbtxt"),
            "blessing_dir": str(tmp_path / "b"),
            "eval_config": json.dumps({"label_key": "species"}),
        }
    )
    with pytest.raises(UserInputError) as refused:
        evaluate.run(request)
    assert refused.value.input_name == "--model"
    message = str(refused.value)
    assert "TFMA cannot feed serving_default of " in message
    assert "input 'year' (float32[None]) is float32, but TFMA feeds the INT feature as int64" in (
        message
    )
    assert "does not cast" in message and "bill_length_mm (FLOAT[1])" in message
    assert not (tmp_path / "b").exists()

    # infra-validate (no schema: the first eval example describes the features), with 3 warm-up
    # requests
    out = tmp_path / "iv"
    proc = run_cli(
        [
            "infra-validate",
            "--model",
            model,
            "--examples",
            PENGUIN / "data",
            "--blessing-dir",
            out / "blessing",
            "--metrics-file",
            out / "metrics.json",
            "--num-requests",
            "2",
            "--write-warmup",
            "3",
        ]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (out / "blessing" / "INFRA_BLESSED").is_file()
    summary = json.loads(proc.stdout)
    assert summary["metrics"]["warmup_requests"] == 3
    assert json.loads((out / "metrics.json").read_text())["warmup_file"] == str(model / WARMUP)
    replies = _replay_warmup(model, records[:3])
    for i, reply in enumerate(
        replies
    ):  # each request holds eval example i, in the signature's tensor form
        assert reply["inputs"]["bill_length_mm"].tolist() == [
            [pytest.approx(float(parsed["bill_length_mm"][i, 0]))]
        ]
        assert reply["inputs"]["year"].tolist() == [float(parsed["year"][i, 0])]
        np.testing.assert_allclose(reply["outputs"]["output_0"][0], probs[i], rtol=1e-5)
    assert not [
        p for p in (model / "assets.extra").iterdir() if p.name != WARMUP.name
    ]  # no temporary left


@pytest.fixture(scope="module")
def task_model(tmp_path_factory) -> dict:
    """The linear Task trained briefly by the CLI; its model is the Task API's default export
    (model.export)."""
    root = tmp_path_factory.mktemp("task")
    rng = np.random.default_rng(3)
    rows = [
        {"x1": [float(a)], "x2": [float(b)], "target": [float(2 * a - 3 * b)]}
        for a, b in rng.uniform(-1, 1, (60, 2))
    ]
    write_split(str(root / "examples"), "train", rows[:40])
    write_split(str(root / "examples"), "eval", rows[40:])
    schema = write_schema(
        str(root / "schema.pbtxt"), {"x1": "FLOAT", "x2": "FLOAT", "target": "FLOAT"}
    )
    proc = run_cli(
        [
            "train",
            "--task",
            f"{TASK_FILE}:LinearTask",
            "--examples",
            root / "examples",
            "--schema",
            schema,
            "--model-dir",
            root / "model",
            "--checkpoint-dir",
            root / "ckpt",
            "--params-override",
            "trainer.train_steps=10,trainer.validation_interval=10,trainer.checkpoint_interval=10",
        ]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {
        "root": root,
        "examples": root / "examples",
        "schema": schema,
        "model": root / "model",
        "rows": rows[40:],
    }


@pytest.mark.slow
def test_task_default_export_evaluated_and_infra_validated(task_model, tmp_path):
    model = tmp_path / "model"
    shutil.copytree(task_model["model"], model)
    config = {
        "label_key": "target",
        "problem": "regression",
        "thresholds": {"mse": {"upper_bound": 1e9}},
    }
    proc = run_cli(
        [
            "evaluate",
            "--model",
            model,
            "--examples",
            task_model["examples"],
            "--eval-config",
            json.dumps(config),
            "--blessing-dir",
            tmp_path / "eb",
            "--metrics-file",
            tmp_path / "evaluation.json",
        ]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    evaluation = json.loads((tmp_path / "evaluation.json").read_text())
    assert evaluation["blessed"] and evaluation["metrics"]["example_count"] == len(
        task_model["rows"]
    )
    assert "serving_default" in proc.stderr and (tmp_path / "eb" / "BLESSED").is_file()
    # no --schema: TFMA fed the tensor inputs x1, x2 from the examples' fixed-length features

    proc = run_cli(
        [
            "infra-validate",
            "--model",
            model,
            "--examples",
            task_model["examples"],
            "--schema",
            task_model["schema"],
            "--blessing-dir",
            tmp_path / "ib",
            "--model-blessing",
            tmp_path / "eb",
            "--num-requests",
            "2",
            "--write-warmup",
            "2",
        ]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "ib" / "INFRA_BLESSED").is_file()
    assert "serving_default takes tensors {" in proc.stderr
    replies = _replay_warmup(model / "Format-Serving", _eval_records(task_model["examples"], 2))
    for reply, row in zip(replies, task_model["rows"][:2], strict=True):
        assert reply["inputs"]["x1"].tolist() == [[pytest.approx(row["x1"][0])]]


@pytest.mark.slow
def test_unmatched_input_is_infra_not_blessed_naming_it(tmp_path):
    """infra-validate (KFP form): a verdict, exit 0, blessed False for dsl.If, the reason evaluate's
    exit 2 gives."""
    model = tiny_models.float_input(
        str(tmp_path / "float_input")
    )  # serving_default(x: float32[None, 4])
    out = tmp_path / "out"

    def artifact(name: str, title: str, uri) -> dict:
        return {
            "artifacts": [
                {"name": name, "type": {"schemaTitle": title}, "uri": str(uri), "metadata": {}}
            ]
        }

    executor_input = {
        "inputs": {
            "parameterValues": {"num_requests": 1, "write_warmup": 2},
            "artifacts": {
                "model": artifact("m", "system.Model", model),
                "examples": artifact("e", "system.Dataset", PENGUIN / "data"),
            },
        },
        "outputs": {
            "artifacts": {
                "blessing": artifact("b", "system.Artifact", out / "blessing"),
                "metrics": artifact("mt", "system.Metrics", out / "metrics"),
            },
            "parameters": {"blessed": {"outputFile": str(out / "blessed")}},
            "outputFile": str(out / "executor_output.json"),
        },
    }
    proc = run_cli(["infra-validate", "--executor-input", json.dumps(executor_input)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    reason = (
        "--model: serving_default input 'x' (float32[None, 4]) matches no feature of the examples"
    )
    features = "features (in the first eval example): bill_depth_mm (FLOAT), bill_length_mm (FLOAT)"
    written = (out / "blessing" / "INFRA_NOT_BLESSED").read_text()
    assert reason in written and features in written and "keras.Input(name=...)" in written
    assert not (out / "blessing" / "INFRA_BLESSED").exists()
    assert f"INFRA_NOT_BLESSED: {reason}" in proc.stderr
    output = json.loads((out / "executor_output.json").read_text())
    assert output["parameterValues"] == {"blessed": False}
    assert reason in output["artifacts"]["blessing"]["artifacts"][0]["metadata"]["reasons"]
    assert not (
        tmp_path / "float_input" / "assets.extra"
    ).exists()  # no warm-up requests for a model not blessed
