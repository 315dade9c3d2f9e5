"""The infra-validator: the trained penguin model is INFRA_BLESSED with latencies (and its warm-up
requests replay); models with a failing signature or one row for any batch are INFRA_NOT_BLESSED
with the reason (and get no warm-up file); the time and memory limits hold; a model the evaluator
did not bless is not loaded.
Tensor-input signatures: tests/test_signature_feed.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tiny_models
from conftest import PENGUIN, REPO, run_cli
from generic_trainer.errors import UserInputError
from generic_trainer.intake.judge_request import build_infra_validate_request
from generic_trainer.intake.paths import split_patterns
from generic_trainer.judge.infra_probe import read_records


def _artifact(name: str, title: str, uri) -> dict:
    return {
        "artifacts": [
            {"name": name, "type": {"schemaTitle": title}, "uri": str(uri), "metadata": {}}
        ]
    }


def _validate(model, out: Path, *extra) -> tuple[dict, str]:
    """Run the verb; returns (the printed summary, the log)."""
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
            "3",
            *extra,
        ]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]  # a broken model is a result, not a failure
    return json.loads(proc.stdout), proc.stderr


def _not_blessed(out: Path) -> str:
    assert not (out / "blessing" / "INFRA_BLESSED").exists()
    return (out / "blessing" / "INFRA_NOT_BLESSED").read_text()


def test_infra_validate_request_parses_sizes_and_numbers_and_names_bad_ones(tmp_path):
    base = {
        "model": str(tmp_path),
        "examples": str(PENGUIN / "data"),
        "blessing_dir": str(tmp_path / "b"),
    }
    request = build_infra_validate_request(
        {**base, "memory_limit": "512MiB", "timeout": "30", "num_requests": 4.0}
    )
    assert (
        request.memory_limit == 512 * 1024**2
        and request.timeout == 30.0
        and request.num_requests == 4
    )
    assert build_infra_validate_request({**base, "memory_limit": "0"}).memory_limit is None
    assert build_infra_validate_request({**base, "memory_limit": "2G"}).memory_limit == 2 * 10**9
    assert build_infra_validate_request(base).memory_limit == 8 * 1024**3
    assert build_infra_validate_request(base).write_warmup == 0
    assert build_infra_validate_request({**base, "write_warmup": 5.0}).write_warmup == 5
    for key, value, needle in [
        ("memory_limit", "lots", "size like 8GiB"),
        ("timeout", "-1", "seconds > 0"),
        ("batch_size", "2.5", ">= 1"),
        ("model_blessing", str(tmp_path / "nope"), "not exist"),
        ("blessing_dir", "", "required"),
        ("write_warmup", "1001", "at most 1000"),
        ("write_warmup", "-1", ">= 0"),
        ("schema", str(tmp_path / "nope"), "not exist"),
    ]:
        with pytest.raises(UserInputError) as err:
            build_infra_validate_request({**base, key: value})
        assert err.value.input_name == "--" + key.replace("_", "-") and needle in str(err.value)


def test_the_verbs_edge_loads_no_tensorflow(tmp_path):
    """Requests are built, and the verb modules imported, without TensorFlow: the model loads in the
    probe only."""
    code = (
        "import json, sys\n"
        "from generic_trainer import evaluate, infra_validate\n"
        "from generic_trainer.intake.judge_request import build_evaluate_request, "
        "build_infra_validate_request\n"
        f"v = {{'model': {str(tmp_path)!r}, 'examples': {str(PENGUIN / 'data')!r}, 'blessing_dir': "
        "'b'}\n"
        "build_infra_validate_request(v)\n"
        "build_evaluate_request({**v, 'eval_config': {'label_key': 'y', 'problem': 'binary'}})\n"
        "print(json.dumps(sorted(m for m in ('tensorflow', 'keras', 'kfp') if m in sys.modules)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []


@pytest.fixture(scope="module")
def broken_models(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("broken")
    return {
        "raising": tiny_models.raising(str(root / "raising"), "this model is broken on purpose"),
        "one_row": tiny_models.one_row(str(root / "one_row")),
    }


@pytest.mark.slow
def test_a_trained_model_is_infra_blessed_through_kfp_with_latencies_and_warmup(
    trained_penguin_model, tmp_path
):
    """Also --write-warmup through the component parameter: the tf.Example signature's warm-up
    requests replay."""
    import shutil

    model = tmp_path / "model"
    shutil.copytree(
        trained_penguin_model, model
    )  # the warm-up file goes into the model: not the shared one
    out = tmp_path / "outputs"
    evaluator_blessing = tmp_path / "evaluator_blessing"
    evaluator_blessing.mkdir()
    (evaluator_blessing / "BLESSED").write_text("")
    executor_input = {
        "inputs": {
            "parameterValues": {
                "num_requests": 5,
                "batch_size": 4,
                "timeout": 240.0,
                "memory_limit": "8GiB",
                "write_warmup": 3,
            },
            "artifacts": {
                "model": _artifact("m", "system.Model", model),
                "examples": _artifact("e", "system.Dataset", PENGUIN / "data"),
                "model_blessing": _artifact("mb", "system.Artifact", evaluator_blessing),
            },
        },
        "outputs": {
            "artifacts": {
                "blessing": _artifact("b", "system.Artifact", out / "blessing"),
                "metrics": _artifact("mt", "system.Metrics", out / "metrics"),
            },
            "outputFile": str(out / "executor_output.json"),
        },
    }
    proc = run_cli(["infra-validate", "--executor-input", json.dumps(executor_input)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (out / "blessing" / "INFRA_BLESSED").is_file() and not (
        out / "blessing" / "INFRA_NOT_BLESSED"
    ).exists()
    written = json.loads((out / "executor_output.json").read_text())["artifacts"]
    blessing = written["blessing"]["artifacts"][0]["metadata"]
    metrics = written["metrics"]["artifacts"][0]["metadata"]
    assert blessing["blessed"] == 1 and blessing["reasons"] == ""
    assert (
        metrics["requests"] == 5
        and metrics["failed_requests"] == 0
        and metrics["examples_per_request"] == 4
    )
    assert 0 < metrics["p50_latency_ms"] <= metrics["p99_latency_ms"] == blessing["p99_latency_ms"]
    assert metrics["load_seconds"] > 0
    assert "the evaluator blessed the model" in proc.stderr and "INFRA_BLESSED" in proc.stderr
    warmup = model / "Format-Serving" / "assets.extra" / "tf_serving_warmup_requests"
    assert blessing["warmup_requests"] == 3 and blessing["warmup_file"] == str(warmup)
    _replay(
        warmup,
        model / "Format-Serving",
        read_records(split_patterns(str(PENGUIN / "data"), ["eval"]), 3),
    )


def _replay(warmup: Path, model: Path, records: list[bytes]) -> None:
    """Each PredictionLog in the warm-up file holds one eval example, serialized; serving_default
    answers it."""
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    fn = tf.saved_model.load(str(model)).signatures["serving_default"]
    (name,) = fn.structured_input_signature[1]
    logs = [
        prediction_log_pb2.PredictionLog.FromString(r)
        for r in tf.data.TFRecordDataset(str(warmup)).as_numpy_iterator()
    ]
    assert len(logs) == len(records)
    for log, record in zip(logs, records, strict=True):
        request = log.predict_log.request
        assert request.model_spec.signature_name == "serving_default"
        assert tf.make_ndarray(request.inputs[name]).tolist() == [record]
        out = fn(**{name: tf.constant(tf.make_ndarray(request.inputs[name]))})
        assert sorted(out) == sorted(fn.structured_outputs) and out["outputs"].shape == (1, 3)


@pytest.mark.slow
def test_a_signature_that_raises_is_not_blessed_naming_the_error_and_gets_no_warmup(
    broken_models, tmp_path
):
    summary, _ = _validate(broken_models["raising"], tmp_path, "--write-warmup", "2")
    reason = _not_blessed(tmp_path)
    assert "warm-up request 1 (1 example): failed: InvalidArgumentError" in reason
    assert "this model is broken on purpose" in reason
    assert summary["metrics"]["failed_requests"] == 3 and "p50_latency_ms" not in summary["metrics"]
    assert "warmup_requests" not in summary["metrics"]
    assert not os.path.exists(
        os.path.join(broken_models["raising"], "assets.extra")
    )  # not blessed: no warm-up


@pytest.mark.slow
def test_a_model_answering_one_row_for_a_batch_is_not_blessed(broken_models, tmp_path):
    _validate(broken_models["one_row"], tmp_path, "--batch-size", "5")
    reason = _not_blessed(tmp_path)
    assert (
        "output 'outputs' has shape [1, 3] for 5 examples; expected one row per example" in reason
    )
    assert (
        "and 3 more requests" in reason
    )  # the second warm-up and the 3 timed requests, reported once


@pytest.mark.slow
def test_time_limit_kills_the_serving_process(broken_models, tmp_path):
    summary, log = _validate(broken_models["raising"], tmp_path, "--timeout", "1")
    assert "did not finish within the time limit of 1 s" in _not_blessed(tmp_path)
    pid = int(re.search(r"serving process (\d+) started", log).group(1))
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed with its process group, and reaped
    assert summary["blessed"] is False


@pytest.mark.slow
def test_memory_limit_applies_to_the_serving_process(broken_models, tmp_path):
    _validate(broken_models["raising"], tmp_path, "--memory-limit", "300MiB")
    reason = _not_blessed(tmp_path)
    assert "out of memory" in reason and "300 MiB" in reason


@pytest.mark.slow
def test_model_the_evaluator_did_not_bless_is_not_loaded(tmp_path):
    blessing = tmp_path / "evaluator"
    blessing.mkdir()
    (blessing / "NOT_BLESSED").write_text("accuracy 0.6 < lower bound 0.8\n")
    (tmp_path / "no-model-here").mkdir()
    summary, log = _validate(tmp_path / "no-model-here", tmp_path, "--model-blessing", blessing)
    assert "the evaluator did not bless the model" in _not_blessed(tmp_path)
    assert "accuracy 0.6 < lower bound 0.8" in summary["reasons"][0]
    assert "serving process" not in log
    (blessing / "NOT_BLESSED").unlink()
    proc = run_cli(
        [
            "infra-validate",
            "--model",
            tmp_path / "no-model-here",
            "--examples",
            PENGUIN / "data",
            "--blessing-dir",
            tmp_path / "b2",
            "--model-blessing",
            blessing,
        ]
    )
    assert (
        proc.returncode == 2
        and "--model-blessing: " in proc.stderr
        and "neither BLESSED" in proc.stderr
    )
    assert not (tmp_path / "b2").exists()


def test_infra_validator_component_interface_matches_the_cli():
    import yaml
    from generic_trainer import cli

    spec = yaml.safe_load((REPO / "components" / "infra_validator" / "component.yaml").read_text())
    iface = next(iter(spec["components"].values()))
    container = next(iter(spec["deploymentSpec"]["executors"].values()))["container"]
    assert container["command"] == ["generic-trainer"] and container["args"][0] == "infra-validate"
    artifacts = iface["inputDefinitions"]["artifacts"]
    assert {n: a["artifactType"]["schemaTitle"] for n, a in artifacts.items()} == {
        "model": "system.Model",
        "examples": "system.Dataset",
        "model_blessing": "system.Artifact",
        "schema": "system.Artifact",
    }
    assert {n for n, a in artifacts.items() if a.get("isOptional")} == {"model_blessing", "schema"}
    assert iface["inputDefinitions"]["parameters"]["write_warmup"]["defaultValue"] == 0
    assert {
        n: a["artifactType"]["schemaTitle"]
        for n, a in iface["outputDefinitions"]["artifacts"].items()
    } == {"blessing": "system.Artifact", "metrics": "system.Metrics"}
    dests = {
        a.dest
        for a in cli.build_parser()._subparsers._group_actions[0].choices["infra-validate"]._actions
    }
    assert set(iface["inputDefinitions"]["parameters"]) <= dests
