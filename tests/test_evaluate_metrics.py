"""The evaluator's metric math on numpy arrays: example weights, value-restricted slices, per-slice thresholds,
the Poisson bootstrap, custom Keras metrics (fed like the built-in ones), and the config keys that set them."""

from __future__ import annotations

import json

import numpy as np
import pytest
from generic_trainer.errors import UserInputError
from generic_trainer.judge import eval_metrics
from generic_trainer.judge.eval_bootstrap import Resampler, interval
from generic_trainer.judge.eval_config import CustomMetric, SliceSpec
from generic_trainer.judge.eval_config_reader import parse_eval_config
from generic_trainer.judge.eval_thresholds import check_slice_thresholds

CLASSIFICATION = [
    "example_count",
    "weighted_example_count",
    "accuracy",
    "loss",
    "auc",
    "precision",
    "recall",
    "f1",
]
REGRESSION = [
    "example_count",
    "weighted_example_count",
    "loss",
    "mse",
    "rmse",
    "mae",
    "mean_label",
    "mean_prediction",
]


def _binary(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    p = np.clip(rng.normal(0.35 + 0.3 * labels, 0.2), 0, 1)
    return labels, np.stack([1 - p, p], axis=1)


@pytest.mark.parametrize("problem", ["binary", "multiclass", "regression"])
def test_an_integer_weight_is_the_example_repeated(problem):
    """Weight k == the example k times, for every built-in metric (weighted_example_count: the sum of weights)."""
    rng = np.random.default_rng(3)
    n = 60
    if problem == "binary":
        labels, preds = _binary(n, 4)
    elif problem == "multiclass":
        labels, preds = rng.integers(0, 3, n), rng.dirichlet([1, 1, 1], n)
    else:
        labels, preds = rng.normal(size=n), rng.normal(size=n)
    weights = rng.integers(0, 4, n).astype(float)  # 0 drops an example from every weighted sum
    weighted, repeated = eval_metrics.Accumulator(problem, 3), eval_metrics.Accumulator(problem, 3)
    weighted.add(labels, preds, weights)
    index = np.repeat(np.arange(n), weights.astype(int))
    repeated.add(labels[index], preds[index])
    names = REGRESSION if problem == "regression" else CLASSIFICATION
    got, expected = weighted.result(names), repeated.result(names)
    assert got.pop("example_count") == n and expected.pop("example_count") == weights.sum()
    assert got == pytest.approx(expected)
    assert got["weighted_example_count"] == weights.sum()


def test_weighted_accuracy_and_auc_by_hand():
    acc = eval_metrics.Accumulator("binary")
    p = np.array([0.1, 0.4, 0.35, 0.8])
    acc.add(np.array([0, 0, 1, 1]), np.stack([1 - p, p], axis=1), np.array([1.0, 3.0, 2.0, 0.5]))
    result = acc.result(["accuracy", "auc", "precision", "recall"])
    assert result["accuracy"] == pytest.approx(
        (1 + 3 + 0.5) / 6.5
    )  # 0.35 -> class 0 is the one wrong
    # weighted pairs (positive w, negative w): right: (2,1), (0.5,1), (0.5,3); wrong: (2,3) of 2.5 * 4 = 10.
    assert result["auc"] == pytest.approx((2 + 0.5 + 1.5) / 10)
    assert result["precision"] == 1.0 and result["recall"] == pytest.approx(0.5 / 2.5)
    assert acc.details()["confusion_matrix"] == [[2, 0], [1, 1]]  # counts, not weights


def test_slice_keys_value_specs_and_each_slice_once():
    specs = parse_eval_config(
        {
            "label_key": "y",
            "slices": [
                ["color"],
                {"values": {"color": "red"}},
                {"features": ["size"], "values": {"color": "red"}},
                ["size", "color"],
                {"values": {"n": 3}},
            ],
        }
    ).slices
    keys = eval_metrics.slice_keys({"color": [b"red", b"blue"], "size": [b"S"], "n": [3]}, specs)
    assert keys == [
        (("color", "red"),),
        (("color", "blue"),),
        (("color", "red"), ("size", "S")),
        (("color", "blue"), ("size", "S")),
        (("n", "3"),),
    ]
    assert eval_metrics.slice_keys({"color": [b"blue"]}, specs[1:2]) == []


def _slice_rows(evaluation, names):
    return [
        {
            "slice": eval_metrics.slice_name(k),
            "features": dict(k),
            "metrics": m.result(names),
            "baseline_metrics": None,
        }
        for k, m in evaluation.sorted_slices()
    ]


def test_slice_thresholds_name_the_failing_slice_and_unmatched_specs_fail():
    config = parse_eval_config(
        {
            "label_key": "y",
            "slice_thresholds": [
                {"slice": ["group"], "thresholds": {"accuracy": {"lower_bound": 0.6}}},
                {
                    "slice": {"values": {"group": "b"}},
                    "thresholds": {"example_count": {"lower_bound": 2}},
                },
                {
                    "slice": {"values": {"group": "zzz"}},
                    "thresholds": {"accuracy": {"lower_bound": 0.1}},
                },
                {"slice": [], "thresholds": {"accuracy": {"change": {"absolute": -0.5}}}},
            ],
        }
    )
    assert [s.describe() for s in config.slices] == [
        "group=*",
        "group=b",
        "group=zzz",
    ]  # computed, so judged
    labels = np.array([0, 1, 1, 0, 1])
    p = np.array([0.2, 0.9, 0.7, 0.8, 0.4])  # group a: all right; group b: 0.8 and 0.4 wrong
    groups = [[b"a"], [b"a"], [b"a"], [b"b"], [b"b"]]
    evaluation = eval_metrics.SlicedEvaluation("binary", 2, config.slices)
    keys = [eval_metrics.slice_keys({"group": g}, config.slices) for g in groups]
    evaluation.add(labels, np.stack([1 - p, p], axis=1), keys)
    names = config.metrics_for("binary")
    rows = check_slice_thresholds(
        config.slice_thresholds,
        evaluation.overall.result(names),
        None,
        _slice_rows(evaluation, names),
        has_baseline=False,
    )
    failed = [r["message"] for r in rows if r["passed"] is False]
    assert failed == [
        "slice group=b: accuracy 0 < lower bound 0.6",
        "slice group=zzz: no eval example is in this slice, so the accuracy threshold cannot be checked",
    ]
    assert {(r["slice"], r["check"], r["passed"]) for r in rows} >= {
        ("group=a", "lower_bound", True),
        ("group=b", "lower_bound", True),
        ("Overall", "change.absolute", None),
    }


def test_bootstrap_is_seeded_batch_size_free_and_brackets_the_value():
    labels, preds = _binary(400, 7)
    weights = np.random.default_rng(8).uniform(0.5, 2, 400)
    names = ["example_count", "accuracy", "auc"]

    def run(batch: int, seed: int) -> dict:
        evaluation, resampler = (
            eval_metrics.SlicedEvaluation("binary", 2, [], samples=50),
            Resampler(50, seed),
        )
        for start in range(0, 400, batch):
            part = slice(start, start + batch)
            evaluation.add(
                labels[part],
                preds[part],
                [[]] * len(labels[part]),
                weights[part],
                resampler.draw(len(labels[part])),
            )
        return {
            "value": evaluation.overall.result(names),
            "ci": evaluation.overall.intervals(names, 0.9),
        }

    def flat(result: dict) -> dict:
        return {
            **result["value"],
            **{f"{n}.{k}": v for n, ci in result["ci"].items() for k, v in ci.items()},
        }

    one, other = run(400, 1), run(37, 1)
    assert flat(one) == pytest.approx(
        flat(other), rel=1e-12
    )  # same seed, other batches: the same resamples
    assert flat(run(400, 2)) != pytest.approx(flat(one), rel=1e-3)
    for name in ("accuracy", "auc"):
        ci = one["ci"][name]
        assert ci["lower"] < one["value"][name] < ci["upper"] and ci["samples"] == 50
        assert 0.005 < ci["std_error"] < 0.1
    assert one["ci"]["example_count"]["lower"] < 400 < one["ci"]["example_count"]["upper"]
    assert interval([None, 1.0], 0.95) is None


def test_config_keys_for_metrics_weights_and_intervals():
    config = parse_eval_config(
        json.dumps(
            {
                "label_key": "y",
                "example_weight_key": "w",
                "metrics": [
                    "accuracy",
                    {"class_name": "keras.metrics.AUC", "config": {"num_thresholds": 1000}},
                    "tensorflow.keras.metrics.Precision",
                    {
                        "class_name": "SparseCategoricalAccuracy",
                        "module": "keras.metrics",
                        "name": "sca",
                    },
                ],
                "thresholds": {"auc": {"lower_bound": 0.5}},
                "confidence_intervals": {"samples": 30, "seed": 4},
            }
        )
    )
    assert config.custom_metrics == (
        CustomMetric("auc", "keras.metrics.AUC", {"num_thresholds": 1000, "name": "auc"}),
        CustomMetric("precision", "tensorflow.keras.metrics.Precision", {"name": "precision"}),
        CustomMetric("sca", "keras.metrics.SparseCategoricalAccuracy", {"name": "sca"}),
    )
    assert config.metrics_for("multiclass") == (
        "example_count",
        "weighted_example_count",
        "accuracy",
        "auc",
        "precision",
        "sca",
    )
    assert (config.ci_samples, config.ci_seed, config.ci_level) == (30, 4, 0.95)
    assert config.slices == () and SliceSpec().describe() == "Overall"
    from generic_trainer.evaluate import config_from_json

    assert config_from_json(json.loads(json.dumps(config.to_json()))) == config


@pytest.mark.parametrize(
    "config, key, needle",
    [
        (
            {"metrics": ["accuracy", "keras.metrics.AUC", "auc"]},
            "eval_config.metrics[2]",
            "both listed",
        ),
        ({"metrics": ["auc", "keras.metrics.AUC"]}, "eval_config.metrics[1]", 'another "name"'),
        ({"metrics": [{"class_name": "AUC"}]}, "eval_config.metrics[0].class_name", "module.Class"),
        (
            {"metrics": [{"class_name": "keras.metrics.AUC", "config": [1]}]},
            "eval_config.metrics[0].config",
            "object",
        ),
        (
            {"metrics": [{"class_name": "keras.metrics.AUC", "thresholds": 3}]},
            "eval_config.metrics[0]",
            "thresholds",
        ),
        ({"example_weight_key": 3}, "eval_config.example_weight_key", "non-empty string"),
        ({"slice_thresholds": {"island": 1}}, "eval_config.slice_thresholds", "list"),
        (
            {"slice_thresholds": [{"slice": ["a"]}]},
            "eval_config.slice_thresholds[0]",
            '"slice" and "thresholds"',
        ),
        (
            {"slice_thresholds": [{"slice": {"value": {"a": 1}}, "thresholds": {}}]},
            "eval_config.slice_thresholds[0].slice",
            "unknown keys ['value']",
        ),
        (
            {"slice_thresholds": [{"slice": ["a"], "thresholds": {"acc": {"lower_bound": 1}}}]},
            "eval_config.slice_thresholds[0].thresholds.acc",
            "unknown metric",
        ),
        (
            {"slice_thresholds": [{"slice": {"values": {"a": None}}, "thresholds": {}}]},
            "eval_config.slice_thresholds[0].slice.values.a",
            "feature value",
        ),
        (
            {"confidence_intervals": {"samples": 1}},
            "eval_config.confidence_intervals.samples",
            "2..10000",
        ),
        (
            {"confidence_intervals": {"level": 95}},
            "eval_config.confidence_intervals.level",
            "between 0 and 1",
        ),
        (
            {"confidence_intervals": {"samples": 10, "method": "jackknife"}},
            "eval_config.confidence_intervals",
            "method",
        ),
    ],
)
def test_new_config_errors_name_the_key(config, key, needle):
    with pytest.raises(UserInputError) as err:
        parse_eval_config({"label_key": "y", **config})
    assert err.value.input_name == key
    assert needle in str(err.value)


def test_keras_metrics_are_fed_like_the_built_in_ones():
    """keras.metrics.AUC / Precision / BinaryAccuracy, weighted, equal the built-in weighted metrics (AUC within
    1e-3); multiclass gets one-hot labels, Sparse* metrics class indices; errors name the metric."""
    from generic_trainer.judge.eval_keras_metrics import KerasMetrics

    config = parse_eval_config(
        {
            "label_key": "y",
            "metrics": [
                {
                    "class_name": "keras.metrics.AUC",
                    "config": {"num_thresholds": 10000},
                    "name": "keras_auc",
                },
                "tensorflow.keras.metrics.Precision",
                "keras.metrics.BinaryAccuracy",
                "keras.metrics.SparseCategoricalAccuracy",
            ],
        }
    )
    labels, preds = _binary(500, 11)
    weights = np.random.default_rng(12).uniform(0, 3, 500)
    keras_metrics, builtin = (
        KerasMetrics(config.custom_metrics, "binary", 2),
        eval_metrics.Accumulator("binary"),
    )
    for part in (slice(0, 123), slice(123, 500)):
        keras_metrics.add(labels[part], preds[part], weights[part])
        builtin.add(labels[part], preds[part], weights[part])
    got, expected = keras_metrics.result(), builtin.result(["auc", "precision", "accuracy"])
    assert got["keras_auc"] == pytest.approx(expected["auc"], abs=1e-3)
    assert got["precision"] == pytest.approx(expected["precision"], abs=1e-5)
    assert got["binary_accuracy"] == pytest.approx(expected["accuracy"], abs=1e-5)
    assert got["sparse_categorical_accuracy"] == pytest.approx(expected["accuracy"], abs=1e-5)

    rng = np.random.default_rng(5)
    labels3, probs3 = rng.integers(0, 3, 90), rng.dirichlet([1, 1, 1], 90)
    multi = KerasMetrics(
        parse_eval_config(
            {
                "label_key": "y",
                "metrics": [
                    "keras.metrics.CategoricalAccuracy",
                    "keras.metrics.SparseCategoricalAccuracy",
                ],
            }
        ).custom_metrics,
        "multiclass",
        3,
    )
    multi.add(labels3, probs3, None)
    accuracy = float((probs3.argmax(axis=1) == labels3).mean())
    assert multi.result() == pytest.approx(
        {"categorical_accuracy": accuracy, "sparse_categorical_accuracy": accuracy}
    )

    for entry, needle in [
        ("keras.metrics.NoSuchMetric", "keras.metrics has no 'NoSuchMetric'"),
        ("json.JSONDecoder", "not a Keras metric class"),
        ({"class_name": "keras.metrics.AUC", "config": {"curve": "nope"}}, "failed"),
        ({"class_name": "keras.metrics.F1Score", "config": {"average": None}}, "scalar"),
    ]:
        specs = parse_eval_config({"label_key": "y", "metrics": [entry]}).custom_metrics
        with pytest.raises(UserInputError) as err:
            m = KerasMetrics(specs, "multiclass", 3)
            m.add(labels3, probs3, None)
            m.result()
        assert err.value.input_name == f"eval_config.metrics.{specs[0].name}" and needle in str(
            err.value
        )
