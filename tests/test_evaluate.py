"""The evaluator: eval config validation, metrics by hand, slices on a hand-checked set, thresholds, and the
`evaluate` verb end to end (a trained penguin model blessed; a 3-step model NOT_BLESSED against it; KFP form)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import tiny_models
from conftest import PENGUIN, REPO, run_cli
from datagen import write_schema, write_split
from generic_trainer.errors import UserInputError
from generic_trainer.intake.judge_request import build_evaluate_request
from generic_trainer.judge import eval_metrics
from generic_trainer.judge.eval_config import SliceSpec
from generic_trainer.judge.eval_config_reader import parse_eval_config
from generic_trainer.judge.eval_thresholds import check_thresholds

# --------------------------------------------------------------------------------------------
# Eval config
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "config, key, needle",
    [
        ({}, "eval_config.label_key", "required"),
        ("", "--eval-config", "required"),
        (
            "[1]",
            "--eval-config",
            "neither a JSON object, a TFMA EvalConfig text proto nor an existing file",
        ),
        ('{"label_key": "y",', "--eval-config", "not valid JSON"),
        ({"label_key": "y", "typo": 1}, "--eval-config", "typo"),
        ({"label_key": ""}, "eval_config.label_key", "non-empty string"),
        (
            {"label_key": "y", "problem": "ranking"},
            "eval_config.problem",
            "multiclass, binary, regression",
        ),
        ({"label_key": "y", "metrics": ["accuracy", "acuracy"]}, "eval_config.metrics", "acuracy"),
        (
            {"label_key": "y", "problem": "regression", "metrics": ["auc"]},
            "eval_config.metrics",
            "regression",
        ),
        ({"label_key": "y", "slices": "island"}, "eval_config.slices", "list of feature lists"),
        ({"label_key": "y", "slices": [["a", "a"]]}, "eval_config.slices[0]", "twice"),
        (
            {"label_key": "y", "thresholds": {"accuracy": {"lower_bound": "high"}}},
            "eval_config.thresholds.accuracy.lower_bound",
            "finite number",
        ),
        (
            {
                "label_key": "y",
                "thresholds": {"accuracy": {"lower_bound": 0.9, "upper_bound": 0.1}},
            },
            "eval_config.thresholds.accuracy",
            "above upper_bound",
        ),
        (
            {
                "label_key": "y",
                "thresholds": {"accuracy": {"change": {"direction": "up", "absolute": 0}}},
            },
            "eval_config.thresholds.accuracy.change.direction",
            "higher_is_better",
        ),
        (
            {
                "label_key": "y",
                "thresholds": {"accuracy": {"change": {"direction": "higher_is_better"}}},
            },
            "eval_config.thresholds.accuracy.change",
            "absolute",
        ),
        (
            {"label_key": "y", "thresholds": {"accuracy": {}}},
            "eval_config.thresholds.accuracy",
            "lower_bound",
        ),
        (
            {"label_key": "y", "thresholds": {"f2": {"lower_bound": 0.5}}},
            "eval_config.thresholds.f2",
            "unknown",
        ),
        (
            {"label_key": "y", "problem": "binary", "thresholds": {"mae": {"upper_bound": 1}}},
            "eval_config.thresholds.mae",
            "binary",
        ),
        (
            {"label_key": "y", "label_vocabulary": ["a", "a"]},
            "eval_config.label_vocabulary",
            "twice",
        ),
    ],
)
def test_eval_config_errors_name_the_key(config, key, needle):
    with pytest.raises(UserInputError) as err:
        parse_eval_config(config if isinstance(config, str) else json.dumps(config))
    assert err.value.input_name == key
    assert needle in str(err.value)


def test_eval_config_from_file_defaults_and_inferred_directions(tmp_path):
    path = tmp_path / "eval.json"
    path.write_text(
        json.dumps(
            {
                "label_key": "y",
                "slices": [["a"], "b", ["a", "b"]],
                "thresholds": {"loss": {"change": {"relative": 0.1}}, "f1": {"lower_bound": 0.5}},
            }
        )
    )
    config = parse_eval_config(str(path))
    assert config.slices == (SliceSpec(("a",)), SliceSpec(("b",)), SliceSpec(("a", "b")))
    directions = {t.metric: t.direction for t in config.thresholds}
    assert directions == {"loss": "lower_is_better", "f1": None}
    # Defaults per problem, plus any metric a threshold names.
    assert config.metrics_for("binary") == (
        "example_count",
        "accuracy",
        "loss",
        "auc",
        "precision",
        "recall",
        "f1",
    )
    weighted = parse_eval_config({"label_key": "y", "example_weight_key": "w"})
    assert weighted.metrics_for("regression")[:2] == ("example_count", "weighted_example_count")
    with pytest.raises(UserInputError, match="f1"):
        config.metrics_for("regression")


def test_evaluate_request_checks_inputs_without_tensorflow(tmp_path):
    base = {"examples": str(PENGUIN / "data"), "eval_config": '{"label_key": "species"}'}
    with pytest.raises(UserInputError, match="--model: required"):
        build_evaluate_request({**base, "blessing_dir": str(tmp_path / "b")})
    with pytest.raises(UserInputError, match="--baseline-model: .* does not exist"):
        build_evaluate_request(
            {
                **base,
                "model": str(tmp_path),
                "baseline_model": str(tmp_path / "nope"),
                "blessing_dir": str(tmp_path / "b"),
            }
        )
    with pytest.raises(UserInputError, match="--blessing-dir: required"):
        build_evaluate_request({**base, "model": str(tmp_path)})
    with pytest.raises(UserInputError, match="--batch-size"):
        build_evaluate_request(
            {**base, "model": str(tmp_path), "blessing_dir": "b", "batch_size": "0"}
        )
    (tmp_path / "bucket" / "m").mkdir(parents=True)
    request = build_evaluate_request(
        {
            **base,
            "model": "gs://bucket/m",
            "blessing_dir": "gs://bucket/blessing",
            "eval_splits": ["eval", "test"],
            "gcs_root": str(tmp_path),
        }
    )
    assert request.model == str(tmp_path / "bucket" / "m")
    assert request.blessing_dir == str(tmp_path / "bucket" / "blessing")
    assert request.eval_splits == ("eval", "test") and request.batch_size == 256
    assert (
        request.timeout == 300.0 and request.memory_limit == 8 * 1024**3
    )  # infra-validate's defaults
    limited = build_evaluate_request(
        {**base, "model": str(tmp_path), "blessing_dir": "b", "timeout": "30", "memory_limit": "0"}
    )
    assert limited.timeout == 30.0 and limited.memory_limit is None
    for key, value, needle in [
        ("timeout", "-1", "--timeout"),
        ("memory_limit", "lots", "--memory-limit"),
    ]:
        with pytest.raises(UserInputError, match=needle):
            build_evaluate_request(
                {**base, "model": str(tmp_path), "blessing_dir": "b", key: value}
            )


def test_eval_config_travels_to_the_sandbox_exactly():
    from generic_trainer.evaluate import config_from_json

    config = parse_eval_config(
        {
            "label_key": "y",
            "prediction_key": "p",
            "problem": "multiclass",
            "from_logits": True,
            "label_vocabulary": ["a", "b", "c"],
            "metrics": ["accuracy", "f1"],
            "slices": [["x"], ["x", "z"]],
            "thresholds": {
                "accuracy": {"lower_bound": 0.5, "change": {"absolute": -0.1}},
                "loss": {"upper_bound": 2.0},
            },
        }
    )
    assert config_from_json(json.loads(json.dumps(config.to_json()))) == config
    plain = parse_eval_config({"label_key": "y"})
    assert config_from_json(json.loads(json.dumps(plain.to_json()))) == plain


def test_the_request_travels_to_the_sandbox_whole(tmp_path):
    """The sandbox's spec is the request's to_json: from_json gives the same request back (but `kfp`)."""
    import dataclasses

    from generic_trainer.intake.judge_request import EvaluateRequest

    config = parse_eval_config(
        {"label_key": "y", "slices": [["x"]], "thresholds": {"accuracy": {"lower_bound": 0.5}}}
    )
    request = EvaluateRequest(
        model=str(tmp_path / "m"),
        examples=str(tmp_path / "e"),
        eval_config=config,
        blessing_dir=str(tmp_path / "b"),
        baseline_model=str(tmp_path / "base"),
        eval_splits=("eval", "test"),
        batch_size=7,
        memory_limit=None,
        timeout=12.5,
    )
    back = EvaluateRequest.from_json(json.loads(json.dumps(request.to_json())))
    assert back == request and isinstance(back.eval_splits, tuple) and back.eval_config == config
    assert "kfp" not in request.to_json()
    assert (
        EvaluateRequest.from_json(dataclasses.replace(request, schema="s").to_json()).schema == "s"
    )


# --------------------------------------------------------------------------------------------
# Metrics and thresholds, by hand
# --------------------------------------------------------------------------------------------


def test_binary_metrics_by_hand():
    acc = eval_metrics.Accumulator("binary")
    p = np.array([0.1, 0.4, 0.35, 0.8])
    acc.add(np.array([0, 0, 1, 1]), np.stack([1 - p, p], axis=1))
    result = acc.result(["example_count", "accuracy", "auc", "precision", "recall", "f1", "loss"])
    # Pairs (positive, negative) ranked right: (0.35 > 0.1), (0.8 > 0.1), (0.8 > 0.4); wrong: (0.35 < 0.4).
    assert result["auc"] == pytest.approx(0.75)
    assert result["accuracy"] == 0.75  # 0.1, 0.4 -> 0 (right), 0.35 -> 0 (wrong), 0.8 -> 1 (right)
    assert (
        result["precision"] == 1.0
        and result["recall"] == 0.5
        and result["f1"] == pytest.approx(2 / 3)
    )
    assert result["loss"] == pytest.approx(
        -(math.log(0.9) + math.log(0.6) + math.log(0.35) + math.log(0.8)) / 4
    )
    assert acc.details()["confusion_matrix"] == [[2, 0], [1, 1]]


def test_regression_metrics_and_streaming_equals_one_batch():
    labels, preds = np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.5, 2.0, 2.0, 6.0])
    whole, parts = eval_metrics.Accumulator("regression"), eval_metrics.Accumulator("regression")
    whole.add(labels, preds)
    parts.add(labels[:1], preds[:1])
    parts.add(labels[1:], preds[1:])
    names = ["example_count", "mse", "rmse", "mae", "mean_label", "mean_prediction", "loss"]
    expected = {
        "example_count": 4,
        "mse": (0.25 + 0 + 1 + 4) / 4,
        "rmse": math.sqrt(5.25 / 4),
        "mae": (0.5 + 0 + 1 + 2) / 4,
        "mean_label": 2.5,
        "mean_prediction": 2.875,
        "loss": 5.25 / 4,
    }
    assert whole.result(names) == pytest.approx(expected)
    assert parts.result(names) == pytest.approx(expected)


def test_thresholds_bounds_change_and_direction():
    config = parse_eval_config(
        {
            "label_key": "y",
            "thresholds": {
                "accuracy": {
                    "lower_bound": 0.7,
                    "change": {"direction": "higher_is_better", "absolute": -0.01},
                },
                "loss": {"upper_bound": 1.0, "change": {"relative": 0.1}},
            },
        }
    )
    candidate, baseline = {"accuracy": 0.75, "loss": 0.5}, {"accuracy": 0.80, "loss": 0.4}
    rows = {
        (r["metric"], r["check"]): r
        for r in check_thresholds(config.thresholds, candidate, baseline)
    }
    assert rows["accuracy", "lower_bound"]["passed"] is True
    assert rows["accuracy", "change.absolute"]["passed"] is False  # dropped 0.05 > 0.01 allowed
    assert rows["accuracy", "change.absolute"]["change"] == pytest.approx(-0.05)
    assert rows["loss", "upper_bound"]["passed"] is True
    assert (
        rows["loss", "change.relative"]["passed"] is False
    )  # rose 25% > 10% allowed (lower is better)
    assert rows["loss", "change.relative"]["change"] == pytest.approx(0.25)
    better = check_thresholds(config.thresholds, {"accuracy": 0.795, "loss": 0.42}, baseline)
    assert all(r["passed"] for r in better)
    alone = check_thresholds(config.thresholds, candidate, None)
    assert [r["passed"] for r in alone] == [
        True,
        None,
        True,
        None,
    ]  # change bounds skipped without a baseline


# --------------------------------------------------------------------------------------------
# Slices on a hand-checked set, through evaluate.run with hand-made SavedModels
# --------------------------------------------------------------------------------------------

# label, class the model predicts (feature "pred"), color (several or none), size; the baseline model
# predicts feature "pred_b", which is always the label.
ROWS = [
    (0, 0, ["red"], "S"),
    (1, 1, ["red"], "M"),
    (2, 1, ["red"], "S"),
    (0, 2, ["blue"], "S"),
    (1, 1, ["blue"], "L"),
    (2, 2, ["red", "blue"], "M"),
    (0, 0, [], "L"),
    (1, 0, ["green"], "S"),
]
# Worked out by hand from ROWS: (examples, correct) per slice.
EXPECTED_SLICES = {
    "color=blue": (3, 2),
    "color=green": (1, 0),
    "color=red": (4, 3),
    "size=L": (2, 2),
    "size=M": (2, 2),
    "size=S": (4, 1),
    "color=blue, size=L": (1, 1),
    "color=blue, size=M": (1, 1),
    "color=blue, size=S": (1, 0),
    "color=green, size=S": (1, 0),
    "color=red, size=M": (2, 2),
    "color=red, size=S": (2, 1),
}


@pytest.fixture(scope="module")
def hand_set(tmp_path_factory):
    root = tmp_path_factory.mktemp("hand")
    rows = []
    for label, pred, colors, size in ROWS:
        row = {"label": [label], "pred": [pred], "pred_b": [label], "size": [size]}
        if colors:
            row["color"] = colors
        rows.append(row)
    write_split(str(root / "data"), "eval", rows[:5])
    write_split(
        str(root / "data"), "eval", rows[5:], gzipped=False
    )  # a second file, not compressed
    (root / "data" / "Split-eval" / "data_tfrecord-00000-of-00001").rename(
        root / "data" / "Split-eval" / "part-2"
    )
    write_schema(
        str(root / "schema.pbtxt"),
        {"label": "INT", "pred": "INT", "pred_b": "INT", "size": "BYTES", "color": "BYTES"},
        dense=False,
    )
    model = tiny_models.class_from_feature(str(root / "model"), "pred")
    baseline = tiny_models.class_from_feature(str(root / "baseline"), "pred_b")
    two_outputs = tiny_models.class_from_feature(
        str(root / "two_outputs"), "pred", extra_output=True
    )
    return {
        "root": root,
        "data": str(root / "data"),
        "schema": str(root / "schema.pbtxt"),
        "model": model,
        "baseline": baseline,
        "two_outputs": two_outputs,
    }


def _evaluate(hand_set, out: Path, config: dict, **values):
    from generic_trainer import evaluate

    request = build_evaluate_request(
        {
            "model": hand_set["model"],
            "examples": hand_set["data"],
            "eval_config": json.dumps(config),
            "blessing_dir": str(out / "blessing"),
            "metrics_file": str(out / "metrics.json"),
            "report_file": str(out / "report.html"),
            "batch_size": 3,
            **values,
        }
    )
    return evaluate.run(request)


@pytest.mark.slow
def test_slices_counts_and_metrics_on_a_hand_checked_set(hand_set, tmp_path):
    config = {
        "label_key": "label",
        "slices": [["color"], ["size"], ["color", "size"]],
        "metrics": ["accuracy", "loss", "precision", "recall"],
        "thresholds": {"accuracy": {"lower_bound": 0.6}},
    }
    result = _evaluate(hand_set, tmp_path, config, schema=hand_set["schema"])
    assert result.problem == "multiclass" and result.classes == ["0", "1", "2"]
    assert result.metrics["example_count"] == 8 and result.metrics["accuracy"] == 5 / 8
    # The model gives 0.8 to its class: -ln 0.8 for the 5 right, -ln 0.1 for the 3 wrong.
    assert result.metrics["loss"] == pytest.approx((5 * -math.log(0.8) + 3 * -math.log(0.1)) / 8)
    # Per class (right / predicted, right / labelled): 0: 2/3, 2/3; 1: 2/3, 2/3; 2: 1/2, 1/2.
    assert result.metrics["precision"] == pytest.approx((2 / 3 + 2 / 3 + 1 / 2) / 3)
    assert result.metrics["recall"] == pytest.approx((2 / 3 + 2 / 3 + 1 / 2) / 3)
    assert result.details["confusion_matrix"] == [[2, 0, 1], [1, 2, 0], [0, 1, 1]]
    got = {
        s["slice"]: (s["metrics"]["example_count"], s["metrics"]["accuracy"]) for s in result.slices
    }
    assert got == {name: (n, right / n) for name, (n, right) in EXPECTED_SLICES.items()}
    assert [s["slice"] for s in result.slices][:3] == ["color=blue", "color=green", "color=red"]
    assert result.blessed and (tmp_path / "blessing" / "BLESSED").is_file()
    assert not (tmp_path / "blessing" / "NOT_BLESSED").exists()
    written = json.loads((tmp_path / "metrics.json").read_text())
    assert written["slices"] == result.slices and written["blessed"] is True
    html = (tmp_path / "report.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and "BLESSED" in html and "color=red, size=S" in html
    assert html.count("<svg") == 1  # the confusion matrix


@pytest.mark.slow
def test_baseline_comparison_by_hand_not_blessed(hand_set, tmp_path):
    config = {
        "label_key": "label",
        "slices": [["size"]],
        "thresholds": {"accuracy": {"lower_bound": 0.5, "change": {"absolute": -0.1}}},
    }
    result = _evaluate(hand_set, tmp_path, config, baseline_model=hand_set["baseline"])
    assert result.baseline_metrics["accuracy"] == 1.0 and result.metrics["accuracy"] == 5 / 8
    assert not result.blessed
    assert (
        len(result.reasons) == 1 and "accuracy changed by -0.375 vs baseline" in result.reasons[0]
    )
    marker = tmp_path / "blessing" / "NOT_BLESSED"
    assert marker.read_text().strip() == result.reasons[0]
    assert not (tmp_path / "blessing" / "BLESSED").exists()
    size_s = next(s for s in result.slices if s["slice"] == "size=S")
    assert size_s["metrics"]["accuracy"] == 1 / 4 and size_s["baseline_metrics"]["accuracy"] == 1.0
    html = (tmp_path / "report.html").read_text()
    assert "NOT_BLESSED" in html and "Comparison" in html and html.count("<svg") == 2


@pytest.mark.slow
def test_sandboxed_result_equals_the_in_process_computation(hand_set, tmp_path):
    """`run` serves the models in the sandbox; its result is exactly what `compute` finds in this process."""
    import dataclasses

    from generic_trainer import evaluate

    config = {
        "label_key": "label",
        "slices": [["color"], ["size"]],
        "metrics": ["accuracy", "loss", "auc", "f1"],
        "thresholds": {"accuracy": {"lower_bound": 0.5, "change": {"absolute": -0.1}}},
    }
    result = _evaluate(hand_set, tmp_path, config, baseline_model=hand_set["baseline"])
    request = build_evaluate_request(
        {
            "model": hand_set["model"],
            "baseline_model": hand_set["baseline"],
            "examples": hand_set["data"],
            "eval_config": json.dumps(config),
            "blessing_dir": str(tmp_path / "unused"),
            "batch_size": 3,
        }
    )
    direct = evaluate.compute(request)
    assert {**dataclasses.asdict(result), "seconds": 0} == {
        **dataclasses.asdict(direct),
        "seconds": 0,
    }
    assert not (tmp_path / "unused").exists()


@pytest.mark.slow
@pytest.mark.e2e
def test_model_errors_name_the_input(hand_set, tmp_path):
    with pytest.raises(UserInputError) as err:
        _evaluate(hand_set, tmp_path, {"label_key": "label"}, model=hand_set["two_outputs"])
    assert (
        err.value.input_name == "eval_config.prediction_key"
        and "predicted_class, probabilities" in str(err.value)
    )
    with pytest.raises(UserInputError) as err:
        _evaluate(hand_set, tmp_path, {"label_key": "colour"})
    assert err.value.input_name == "eval_config.label_key" and "color, label, pred" in str(
        err.value
    )
    with pytest.raises(UserInputError) as err:
        _evaluate(
            hand_set,
            tmp_path,
            {"label_key": "label", "slices": [["colour"]]},
            schema=hand_set["schema"],
        )
    assert err.value.input_name == "eval_config.slices[0]"
    with pytest.raises(UserInputError) as err:
        _evaluate(hand_set, tmp_path, {"label_key": "label", "problem": "binary"})
    assert err.value.input_name == "eval_config.problem" and "3 columns" in str(err.value)
    with pytest.raises(UserInputError) as err:
        _evaluate(
            hand_set,
            tmp_path,
            {"label_key": "label"},
            model=tiny_models.float_input(str(tmp_path / "f")),
        )
    assert (
        err.value.input_name == "--model"
        and "input 'x' (float32[None, 4]) matches no feature" in str(err.value)
    )
    assert (
        not (tmp_path / "blessing").exists() and not (tmp_path / "metrics.json").exists()
    )  # nothing half-written
    result = _evaluate(
        hand_set,
        tmp_path,
        {"label_key": "label", "prediction_key": "probabilities"},
        model=hand_set["two_outputs"],
    )
    assert result.metrics["accuracy"] == 5 / 8 and (tmp_path / "blessing" / "BLESSED").is_file()


# --------------------------------------------------------------------------------------------
# The verb end to end: the trained penguin model, and a 3-step model against it
# --------------------------------------------------------------------------------------------

PENGUIN_CONFIG = {
    "label_key": "species",
    "slices": [["island"]],
    "thresholds": {"accuracy": {"lower_bound": 0.8, "change": {"absolute": -0.01}}},
}


@pytest.fixture(scope="module")
def worse_penguin_model(tmp_path_factory) -> Path:
    """The penguin module trained for 3 steps only."""
    out = tmp_path_factory.mktemp("worse")
    proc = run_cli(
        [
            "train",
            "--examples",
            PENGUIN / "data",
            "--module-file",
            PENGUIN / "module.py",
            "--schema",
            PENGUIN / "schema.pbtxt",
            "--model-dir",
            out / "model",
            "--train-steps",
            "3",
            "--eval-steps",
            "1",
        ]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out / "model"


@pytest.mark.slow
def test_trained_model_blessed_without_baseline_kfp_form(trained_penguin_model, tmp_path):
    out = tmp_path / "outputs"

    def artifact(name, title, uri):
        return {
            "artifacts": [
                {"name": name, "type": {"schemaTitle": title}, "uri": str(uri), "metadata": {}}
            ]
        }

    executor_input = {
        "inputs": {
            "parameterValues": {
                "eval_config": {**PENGUIN_CONFIG, "slices": [["island"], ["sex"]]},
                "batch_size": 32.0,
            },
            "artifacts": {
                "model": artifact("m", "system.Model", trained_penguin_model),
                "examples": artifact("e", "system.Dataset", PENGUIN / "data"),
                "schema": artifact("s", "system.Artifact", PENGUIN / "schema.pbtxt"),
            },
        },
        "outputs": {
            "artifacts": {
                "evaluation": artifact("ev", "system.Metrics", out / "evaluation"),
                "blessing": artifact("b", "system.Artifact", out / "blessing"),
                "report": artifact("r", "system.HTML", out / "report"),
            },
            "outputFile": str(out / "executor_output.json"),
        },
    }
    proc = run_cli(["evaluate", "--executor-input", json.dumps(executor_input)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (out / "blessing" / "BLESSED").is_file()
    written = json.loads((out / "executor_output.json").read_text())["artifacts"]
    assert written["blessing"]["artifacts"][0]["metadata"]["blessed"] == 1
    scalars = written["evaluation"]["artifacts"][0]["metadata"]
    assert scalars["accuracy"] >= 0.8 and scalars["example_count"] == 95 and scalars["blessed"] == 1
    assert not any(k.startswith("baseline_") for k in scalars)
    evaluation = json.loads((out / "evaluation").read_text())
    islands = {
        s["features"]["island"]: s["metrics"]["example_count"]
        for s in evaluation["slices"]
        if "island" in s["features"]
    }
    assert sum(islands.values()) == 95 and len(islands) == 3
    assert {s["slice"] for s in evaluation["slices"]} >= {"sex=male", "sex=female"}
    assert "skipped, no baseline" in proc.stderr
    assert (out / "report").read_text().startswith("<!DOCTYPE html>")


@pytest.mark.slow
def test_worse_model_not_blessed_against_the_trained_baseline(
    trained_penguin_model, worse_penguin_model, tmp_path
):
    proc = run_cli(
        [
            "evaluate",
            "--model",
            worse_penguin_model,
            "--baseline-model",
            trained_penguin_model,
            "--examples",
            PENGUIN / "data",
            "--eval-config",
            json.dumps(PENGUIN_CONFIG),
            "--blessing-dir",
            tmp_path / "blessing",
            "--metrics-file",
            tmp_path / "metrics.json",
            "--report-file",
            tmp_path / "report.html",
        ]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]  # NOT_BLESSED is a result, not a failure
    summary = json.loads(proc.stdout)
    assert summary["blessed"] is False
    assert summary["metrics"]["accuracy"] < summary["baseline_metrics"]["accuracy"] - 0.01
    assert any(r.startswith("accuracy changed by -") for r in summary["reasons"])
    assert (tmp_path / "blessing" / "NOT_BLESSED").is_file() and not (
        tmp_path / "blessing" / "BLESSED"
    ).exists()
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    change = next(r for r in metrics["thresholds"] if r["check"] == "change.absolute")
    assert (
        change["passed"] is False and change["baseline"] == summary["baseline_metrics"]["accuracy"]
    )
    assert metrics["baseline_details"]["label_counts"] == metrics["details"]["label_counts"]
    html = (tmp_path / "report.html").read_text()
    assert "NOT_BLESSED" in html and "island=Biscoe" in html and html.count("<svg") == 2


@pytest.mark.slow
def test_bad_eval_config_fails_before_anything_is_written(tmp_path):
    proc = run_cli(
        [
            "evaluate",
            "--model",
            tmp_path,
            "--examples",
            PENGUIN / "data",
            "--blessing-dir",
            tmp_path / "blessing",
            "--eval-config",
            '{"label_key": "species", "thresholds": {"accuracy": 1}}',
        ]
    )
    assert proc.returncode == 2
    assert "eval_config.thresholds.accuracy: expected an object" in proc.stderr
    assert not (tmp_path / "blessing").exists()


# --------------------------------------------------------------------------------------------
# The KFP component and the penguin pipeline's four steps
# --------------------------------------------------------------------------------------------


def _component(name: str) -> tuple[dict, dict]:
    import yaml

    spec = yaml.safe_load((REPO / "components" / name / "component.yaml").read_text())
    return next(iter(spec["components"].values())), next(
        iter(spec["deploymentSpec"]["executors"].values())
    )


def _cli_dests(verb: str) -> set[str]:
    from generic_trainer import cli

    return {a.dest for a in cli.build_parser()._subparsers._group_actions[0].choices[verb]._actions}


def test_evaluator_component_interface_matches_the_cli():
    iface, executor = _component("evaluator")
    assert executor["container"]["command"] == ["generic-trainer"]
    assert executor["container"]["args"][:3] == ["evaluate", "--executor-input", "{{$}}"]
    artifacts = iface["inputDefinitions"]["artifacts"]
    assert {n: a["artifactType"]["schemaTitle"] for n, a in artifacts.items()} == {
        "model": "system.Model",
        "baseline_model": "system.Model",
        "examples": "system.Dataset",
        "schema": "system.Artifact",
    }
    assert {n for n, a in artifacts.items() if a.get("isOptional")} == {"baseline_model", "schema"}
    outputs = {
        n: a["artifactType"]["schemaTitle"]
        for n, a in iface["outputDefinitions"]["artifacts"].items()
    }
    assert outputs == {
        "evaluation": "system.Metrics",
        "blessing": "system.Artifact",
        "report": "system.HTML",
    }
    params = iface["inputDefinitions"]["parameters"]
    assert [n for n, p in params.items() if not p.get("isOptional")] == ["eval_config"]
    assert set(params) <= _cli_dests("evaluate")


def test_penguin_pipeline_trainer_evaluator_infra_validator(tmp_path):
    import yaml

    from pipelines import penguin_pipeline

    out = tmp_path / "pipeline.yaml"
    penguin_pipeline.compile_pipeline(str(out))
    spec = yaml.safe_load(out.read_text())
    branches = spec["root"]["dag"]["tasks"]["condition-branches-1"]
    assert branches["inputs"]["artifacts"]["pipelinechannel--generic-trainer-model"][
        "taskOutputArtifact"
    ] == {"outputArtifactKey": "model", "producerTask": "generic-trainer"}
    params = spec["root"]["inputDefinitions"]["parameters"]
    assert params["baseline_model_uri"]["defaultValue"] == "" and params["eval_config"][
        "defaultValue"
    ] == json.loads(json.dumps(penguin_pipeline.EVAL_CONFIG))
    parse_eval_config(penguin_pipeline.EVAL_CONFIG)  # the default config is valid
    conditions = {
        t["taskInfo"]["name"]: t
        for t in spec["components"]["comp-condition-branches-1"]["dag"]["tasks"].values()
    }
    assert conditions["with-baseline"]["triggerPolicy"]["condition"] == (
        "inputs.parameter_values['pipelinechannel--baseline_model_uri'] != ''"
    )
    for branch, suffix in (("with-baseline", ""), ("first-model", "-2")):
        tasks = spec["components"][conditions[branch]["componentRef"]["name"]]["dag"]["tasks"]
        evaluator, infra = (
            tasks[f"generic-evaluator{suffix}"]["inputs"],
            tasks[f"generic-infra-validator{suffix}"],
        )
        assert evaluator["artifacts"]["model"] == {
            "componentInputArtifact": "pipelinechannel--generic-trainer-model"
        }
        assert infra["inputs"]["artifacts"]["model"] == evaluator["artifacts"]["model"]
        assert infra["inputs"]["artifacts"]["model_blessing"]["taskOutputArtifact"] == {
            "outputArtifactKey": "blessing",
            "producerTask": f"generic-evaluator{suffix}",
        }
        assert ("baseline_model" in evaluator["artifacts"]) == (branch == "with-baseline")
    with_baseline = spec["components"][conditions["with-baseline"]["componentRef"]["name"]]["dag"][
        "tasks"
    ]
    producer = with_baseline["generic-evaluator"]["inputs"]["artifacts"]["baseline_model"][
        "taskOutputArtifact"
    ]["producerTask"]
    assert (
        producer.startswith("importer")
        and with_baseline[producer]["taskInfo"]["name"] == "import-baseline-model"
    )
