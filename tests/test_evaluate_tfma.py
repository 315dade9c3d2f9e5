"""The evaluator's TFMA EvalConfig input (JSON or text proto, translated to the native config; every unsupported
field an error naming it), the text-proto reader, and end to end: a TFMA config with example weights, Keras
metrics, a per-slice threshold and confidence intervals, checked against the metrics worked out here."""

from __future__ import annotations

import json
from html import escape as html_escape

import numpy as np
import pytest
import tiny_models
from conftest import run_cli
from datagen import write_split
from generic_trainer.errors import UserInputError
from generic_trainer.judge import textproto
from generic_trainer.judge.eval_config import CustomMetric, SliceSpec, SliceThreshold, Threshold
from generic_trainer.judge.eval_config_reader import parse_eval_config

TEXT = """
# the penguin pipeline's TFMA config, as a TFX user writes it
model_specs { label_key: "species" prediction_key: 'outputs' example_weight_key: "w" }
model_specs { name: "baseline" is_baseline: true label_key: "species" }
slicing_specs {}
slicing_specs { feature_keys: ["island"] }
slicing_specs < feature_keys: "sex" feature_values { key: "island" value: "Biscoe" } >
metrics_specs {
  model_names: ["", "baseline"]
  metrics { class_name: "ExampleCount" }
  metrics {
    class_name: "SparseCategoricalAccuracy"
    threshold {
      value_threshold { lower_bound { value: 0.6 } }
      change_threshold { direction: HIGHER_IS_BETTER absolute { value: -1e-10 } }
    }
    per_slice_thresholds {
      slicing_specs { feature_keys: "island" }
      threshold { value_threshold { lower_bound { value: 0.5 } upper_bound: { value: 1 } } }
    }
  }
  metrics { class_name: "AUC" config: '"name": "auc_roc"' }
  metrics { class_name: "Precision" module: "tensorflow.keras.metrics" config: '{"top_k": 1}' }
  thresholds { key: "auc_roc" value { change_threshold { direction: LOWER_IS_BETTER relative { value: 0.1 } } } }
  per_slice_thresholds {
    key: "example_count"
    value { thresholds { slicing_specs { feature_values { key: "island" value: "Dream" } }
                         threshold { value_threshold { lower_bound { value: 10 } } } } }
  }
}
options { compute_confidence_intervals { value: true } confidence_intervals { method: POISSON_BOOTSTRAP } }
"""
# The same, as TFMA's json_format writes it (camelCase, wrappers as plain values, maps as objects).
JSON = {
    "modelSpecs": [
        {"labelKey": "species", "predictionKey": "outputs", "exampleWeightKey": "w"},
        {"name": "baseline", "isBaseline": True, "labelKey": "species"},
    ],
    "slicingSpecs": [
        {},
        {"featureKeys": ["island"]},
        {"featureKeys": ["sex"], "featureValues": {"island": "Biscoe"}},
    ],
    "metricsSpecs": [
        {
            "modelNames": ["", "baseline"],
            "metrics": [
                {"className": "ExampleCount"},
                {
                    "className": "SparseCategoricalAccuracy",
                    "threshold": {
                        "valueThreshold": {"lowerBound": 0.6},
                        "changeThreshold": {"direction": "HIGHER_IS_BETTER", "absolute": -1e-10},
                    },
                    "perSliceThresholds": [
                        {
                            "slicingSpecs": [{"featureKeys": ["island"]}],
                            "threshold": {"valueThreshold": {"lowerBound": 0.5, "upperBound": 1}},
                        }
                    ],
                },
                {"className": "AUC", "config": '"name": "auc_roc"'},
                {
                    "className": "Precision",
                    "module": "tensorflow.keras.metrics",
                    "config": '{"top_k": 1}',
                },
            ],
            "thresholds": {
                "auc_roc": {"changeThreshold": {"direction": "LOWER_IS_BETTER", "relative": 0.1}}
            },
            "perSliceThresholds": {
                "example_count": {
                    "thresholds": [
                        {
                            "slicingSpecs": [{"featureValues": {"island": "Dream"}}],
                            "threshold": {"valueThreshold": {"lowerBound": 10}},
                        }
                    ]
                }
            },
        }
    ],
    "options": {
        "computeConfidenceIntervals": True,
        "confidenceIntervals": {"method": "POISSON_BOOTSTRAP"},
    },
}


def test_text_proto_and_json_translate_to_the_same_native_config(tmp_path):
    expected_slices = (
        SliceSpec(("island",)),
        SliceSpec(("sex",), (("island", "Biscoe"),)),
        SliceSpec((), (("island", "Dream"),)),
    )
    path = tmp_path / "eval_config.pbtxt"
    path.write_text(TEXT)
    configs = [
        parse_eval_config(TEXT),
        parse_eval_config(str(path)),
        parse_eval_config(json.dumps(JSON)),
        parse_eval_config(JSON),
    ]
    for config in configs:
        assert config == configs[0]
    config = configs[0]
    assert (config.label_key, config.prediction_key, config.example_weight_key) == (
        "species",
        "outputs",
        "w",
    )
    assert config.slices == expected_slices
    # With a weight key TFMA's ExampleCount is weighted: the native weighted_example_count (thresholds too).
    assert config.metrics == (
        "weighted_example_count",
        "sparse_categorical_accuracy",
        "auc_roc",
        "precision",
    )
    assert config.custom_metrics == (
        CustomMetric(
            "sparse_categorical_accuracy",
            "keras.metrics.SparseCategoricalAccuracy",
            {"name": "sparse_categorical_accuracy"},
        ),
        CustomMetric("auc_roc", "keras.metrics.AUC", {"num_thresholds": 10000, "name": "auc_roc"}),
        CustomMetric(
            "precision", "tensorflow.keras.metrics.Precision", {"top_k": 1, "name": "precision"}
        ),
    )
    assert config.thresholds == (
        Threshold(
            "sparse_categorical_accuracy",
            lower_bound=0.6,
            direction="higher_is_better",
            change_absolute=-1e-10,
        ),
        Threshold("auc_roc", direction="lower_is_better", change_relative=0.1),
    )
    assert config.slice_thresholds == (
        SliceThreshold(SliceSpec(("island",)), Threshold("sparse_categorical_accuracy", 0.5, 1.0)),
        SliceThreshold(
            SliceSpec((), (("island", "Dream"),)), Threshold("weighted_example_count", 10.0)
        ),
    )
    assert (config.ci_samples, config.ci_seed) == (20, 0)  # TFMA's number of bootstrap samples
    # A bare metric list: the built-in defaults apply; an empty slicing spec is the overall.
    plain = parse_eval_config('model_specs { label_key: "y" } slicing_specs {}')
    assert plain.metrics is None and plain.slices == () and plain.ci_samples == 0
    unweighted = parse_eval_config(
        'model_specs { label_key: "y" } metrics_specs { metrics { class_name: '
        '"ExampleCount" } thresholds { key: "example_count" value { value_threshold { '
        "lower_bound { value: 3 } } } } }"
    )
    assert unweighted.metrics == ("example_count",) and unweighted.thresholds == (
        Threshold("example_count", 3.0),
    )


BASE = 'model_specs { label_key: "y" }\n'


@pytest.mark.parametrize(
    "text, key, needle",
    [
        (
            BASE + "cross_slicing_specs { baseline_spec {} }",
            "eval_config.cross_slicing_specs",
            "cross-slice",
        ),
        (
            'model_specs { label_keys { key: "a" value: "y" } }',
            "eval_config.model_specs[0].label_keys",
            "label_key",
        ),
        (
            'model_specs { label_key: "y" preprocessing_function_names: "f" }',
            "eval_config.model_specs[0].preprocessing_function_names",
            "serving_default",
        ),
        (
            'model_specs { label_key: "y" inference_batch_size: 3 }',
            "eval_config.model_specs[0].inference_batch_size",
            "--batch-size",
        ),
        (
            'model_specs { label_key: "y" padding_options { label_int_padding: 0 } }',
            "eval_config.model_specs[0].padding_options",
            "not supported",
        ),
        (
            BASE + 'slicing_specs { slice_keys_sql: "SELECT 1" }',
            "eval_config.slicing_specs[0].slice_keys_sql",
            "feature_keys",
        ),
        (
            BASE + "metrics_specs { binarize { class_ids { values: 1 } } }",
            "eval_config.metrics_specs[0].binarize",
            "binarized",
        ),
        (
            BASE + "metrics_specs { aggregate { macro_average: true } }",
            "eval_config.metrics_specs[0].aggregate",
            "macro",
        ),
        (
            BASE + 'metrics_specs { output_names: "a" }',
            "eval_config.metrics_specs[0].output_names",
            "one output",
        ),
        (
            BASE + 'metrics_specs { output_weights { key: "a" value: 1 } }',
            "eval_config.metrics_specs[0].output_weights",
            "one output",
        ),
        (
            BASE + 'metrics_specs { query_key: "q" }',
            "eval_config.metrics_specs[0].query_key",
            "ranking",
        ),
        (
            BASE + "metrics_specs { example_weights { unweighted: true } }",
            "eval_config.metrics_specs[0].example_weights",
            "weights every metric",
        ),
        (
            BASE + 'metrics_specs { cross_slice_thresholds { key: "a" value {} } }',
            "eval_config.metrics_specs[0].cross_slice_thresholds",
            "cross-slice",
        ),
        (
            BASE + 'metrics_specs { metrics { class_name: "AUC" cross_slice_thresholds {} } }',
            "eval_config.metrics_specs[0].metrics[0].cross_slice_thresholds",
            "cross-slice",
        ),
        (
            BASE + 'metrics_specs { metrics { class_name: "CalibrationPlot" } }',
            "eval_config.metrics_specs[0].metrics[0].class_name",
            "TFMA's CalibrationPlot is not supported",
        ),
        (
            BASE
            + 'metrics_specs { metrics { class_name: "X" module: "tensorflow_model_analysis.metrics" } }',
            "eval_config.metrics_specs[0].metrics[0].class_name",
            "not supported",
        ),
        (
            BASE + 'metrics_specs { metrics { class_name: "ExampleCount" config: \'"x": 1\' } }',
            "eval_config.metrics_specs[0].metrics[0].config",
            "no config",
        ),
        (
            BASE + 'metrics_specs { metrics { class_name: "AUC" config: "{not json" } }',
            "eval_config.metrics_specs[0].metrics[0].config",
            "not valid JSON",
        ),
        (
            BASE + 'metrics_specs { model_names: "candidate" }',
            "eval_config.metrics_specs[0].model_names",
            "candidate",
        ),
        (
            BASE + 'metrics_specs { metrics { class_name: "AUC" threshold { value_threshold '
            "{ lower_bound { value: 0.5 } } } }"
            ' thresholds { key: "auc" value { value_threshold { lower_bound { value: 0.6 } } } } }',
            "eval_config.metrics_specs[0].thresholds.auc",
            "second threshold",
        ),
        (
            BASE + 'metrics_specs { metrics { class_name: "AUC" threshold {} } }',
            "eval_config.metrics_specs[0].metrics[0].threshold",
            "value_threshold and/or change_threshold",
        ),
        (
            BASE
            + 'metrics_specs { metrics { class_name: "AUC" per_slice_thresholds { threshold {} } } }',
            "eval_config.metrics_specs[0].metrics[0].per_slice_thresholds[0]",
            "slicing_specs",
        ),
        (
            BASE + "options { min_slice_size { value: 5 } }",
            "eval_config.options.min_slice_size",
            "every slice",
        ),
        (
            BASE + 'options { disabled_outputs { values: "plots" } }',
            "eval_config.options.disabled_outputs",
            "written",
        ),
        (
            BASE + "options { include_default_metrics { value: true } }",
            "eval_config.options.include_default_metrics",
            "compiled metrics",
        ),
        (
            BASE + "options { confidence_intervals { method: JACKKNIFE } }",
            "eval_config.options.confidence_intervals.method",
            "POISSON_BOOTSTRAP",
        ),
        (
            BASE + "options { confidence_intervals { method: BOOTSTRAPPY } }",
            "eval_config.options.confidence_intervals.method",
            "one of",
        ),
        (
            'model_specs { label_key: "y" } model_specs { label_key: "y" }',
            "eval_config.model_specs",
            "one model spec",
        ),
        (
            'model_specs { label_key: "y" signature_name: "predict" }',
            "eval_config.model_specs[0].signature_name",
            "serving_default",
        ),
        (
            'model_specs { label_key: "y" model_type: "tf_lite" }',
            "eval_config.model_specs[0].model_type",
            "tf_lite",
        ),
        (
            'model_specs { label_key: "y" } model_specs { is_baseline: true label_key: "z" }',
            "eval_config.model_specs[1].label_key",
            "the model's",
        ),
        ('model_specs { prediction_key: "p" }', "eval_config.model_specs[0].label_key", "required"),
        ('slicing_specs { feature_keys: "a" }', "eval_config.model_specs", "required"),
        (
            'model_specs { label_key: "y" lable_key: "z" }',
            "eval_config.model_specs[0].lable_key",
            "no field",
        ),
        (
            'model_specs { label_key: "y" label_key: "z" }',
            "eval_config.model_specs[0].label_key",
            "set twice",
        ),
        (
            'model_specs { label_key: "y" is_baseline: maybe }',
            "eval_config.model_specs[0].is_baseline",
            "true or false",
        ),
        ("model_specs { label_key: 3 }", "eval_config.model_specs[0].label_key", "quoted string"),
        (
            'model_specs { label_key: "y" } metrics_specs { metrics { class_name: "AUC" threshold { value_threshold { '
            "lower_bound { value: high } } } } }",
            "eval_config.metrics_specs[0].metrics[0].threshold.value_threshold.lower_bound",
            "a number",
        ),
        ('model_specs { label_key: "y" ', "--eval-config", "'}' missing"),
        (
            'model_specs { label_key "y" }',
            "--eval-config",
            "expected ':' or '{' at line 1 column 25",
        ),
    ],
)
def test_unsupported_and_wrong_tfma_fields_are_errors_naming_the_field(text, key, needle):
    with pytest.raises(UserInputError) as err:
        parse_eval_config(text)
    assert err.value.input_name == key
    assert needle in str(err.value)


def test_json_tfma_fields_are_checked_too():
    with pytest.raises(UserInputError) as err:
        parse_eval_config({"modelSpecs": [{"labelKey": "y"}], "metricsSpecs": [{"binarize": {}}]})
    assert err.value.input_name == "eval_config.metrics_specs[0].binarize"
    with pytest.raises(UserInputError) as err:
        parse_eval_config({"model_specs": [{"label_key": "y"}], "label_key": "y"})
    assert err.value.input_name == "eval_config.label_key" and "EvalConfig has no field" in str(
        err.value
    )


def test_text_proto_reader():
    fields = textproto.parse(
        'a: "x" "y\\n\\x41\\101" # comment\n b { c: [1, -2.5e3, inf] d <e: \'q\\\'\'> } ; f: t'
    )
    scalar = textproto.Scalar
    assert fields == [
        ("a", scalar("string", "xy\nAA")),
        (
            "b",
            [
                ("c", scalar("word", "1")),
                ("c", scalar("word", "-2.5e3")),
                ("c", scalar("word", "inf")),
                ("d", [("e", scalar("string", "q'"))]),
            ],
        ),
        ("f", scalar("word", "t")),
    ]
    for bad, needle in [
        ("a: }", "expected a value at line 1 column 4"),
        ("a { b: 1", "'}' missing"),
        ("1a: 2", "expected a field name"),
        ('a: "x', "unexpected character"),
        ("a: [1, 2", "expected ']'"),
    ]:
        with pytest.raises(ValueError, match=needle):
            textproto.parse(bad)


# --------------------------------------------------------------------------------------------
# End to end: weights, Keras metrics, a failing slice, confidence intervals
# --------------------------------------------------------------------------------------------

E2E_CONFIG = """
model_specs { label_key: "label" example_weight_key: "w" }
slicing_specs { feature_keys: "group" }
metrics_specs {
  metrics { class_name: "ExampleCount" }
  metrics { class_name: "WeightedExampleCount" }
  metrics {
    class_name: "BinaryAccuracy"
    per_slice_thresholds { slicing_specs { feature_keys: "group" }
                           threshold { value_threshold { lower_bound { value: 0.6 } } } }
  }
  metrics { class_name: "AUC" }
}
options { compute_confidence_intervals { value: true } }
"""


def _e2e_rows() -> list[dict]:
    rng = np.random.default_rng(21)
    rows = []
    for i in range(60):
        group = "ab"[i % 2]
        label = int(rng.integers(0, 2))
        # group a: the score follows the label; group b: it mostly does not
        score = float(
            np.clip(
                rng.normal(0.3 + 0.4 * label if group == "a" else 0.6 - 0.2 * label, 0.15), 0, 1
            )
        )
        rows.append(
            {
                "label": [label],
                "score": [score],
                "group": [group],
                "w": [float(rng.uniform(0.5, 2))],
            }
        )
    return rows


def _weighted_auc(labels, scores, weights) -> float:
    pos, neg = labels == 1, labels == 0
    wins = (scores[pos][:, None] > scores[neg][None, :]) + 0.5 * (
        scores[pos][:, None] == scores[neg][None, :]
    )
    pair_weights = weights[pos][:, None] * weights[neg][None, :]
    return float((wins * pair_weights).sum() / pair_weights.sum())


@pytest.mark.slow
def test_tfma_config_end_to_end_weights_keras_metrics_slice_threshold_intervals(tmp_path):
    rows = _e2e_rows()
    write_split(str(tmp_path / "data"), "eval", rows)
    model = tiny_models.probability_from_feature(str(tmp_path / "model"))
    (tmp_path / "eval_config.pbtxt").write_text(E2E_CONFIG)
    proc = run_cli(
        [
            "evaluate",
            "--model",
            model,
            "--examples",
            tmp_path / "data",
            "--eval-config",
            tmp_path / "eval_config.pbtxt",
            "--blessing-dir",
            tmp_path / "blessing",
            "--metrics-file",
            tmp_path / "metrics.json",
            "--report-file",
            tmp_path / "report.html",
            "--batch-size",
            "16",
        ]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "metrics.json").read_text())
    labels = np.array([r["label"][0] for r in rows])
    scores = np.array([r["score"][0] for r in rows], dtype=np.float32).astype(np.float64)
    weights = np.array([r["w"][0] for r in rows], dtype=np.float32).astype(np.float64)
    groups = np.array([r["group"][0] for r in rows])
    by_slice = {
        "Overall": result["metrics"],
        **{s["slice"]: s["metrics"] for s in result["slices"]},
    }
    assert set(by_slice) == {"Overall", "group=a", "group=b"}
    accuracies = {}
    for name, mask in [
        ("Overall", groups != ""),
        ("group=a", groups == "a"),
        ("group=b", groups == "b"),
    ]:
        got = by_slice[name]
        right = (scores[mask] > 0.5) == (labels[mask] == 1)
        accuracies[name] = float((right * weights[mask]).sum() / weights[mask].sum())
        assert got["example_count"] == mask.sum()
        assert got["weighted_example_count"] == pytest.approx(weights[mask].sum(), rel=1e-6)
        assert got["binary_accuracy"] == pytest.approx(accuracies[name], abs=1e-6)
        assert got["auc"] == pytest.approx(
            _weighted_auc(labels[mask], scores[mask], weights[mask]), abs=1e-3
        )
    assert accuracies["group=a"] >= 0.6 > accuracies["group=b"]
    reason = f"slice group=b: binary_accuracy {accuracies['group=b']:.4g} < lower bound 0.6"
    assert result["blessed"] is False and result["reasons"] == [reason]
    assert (tmp_path / "blessing" / "NOT_BLESSED").read_text().strip() == reason
    # 20 Poisson bootstrap samples (TFMA's number): an interval per metric, overall and per slice.
    for intervals, values in [
        (result["confidence_intervals"], result["metrics"]),
        *((s["confidence_intervals"], s["metrics"]) for s in result["slices"]),
    ]:
        for name in ("binary_accuracy", "auc", "example_count"):
            ci = intervals[name]
            assert ci["samples"] == 20 and ci["lower"] <= ci["upper"] and ci["std_error"] > 0
            assert (
                ci["lower"] - 3 * ci["std_error"] < values[name] < ci["upper"] + 3 * ci["std_error"]
            )
    html = (tmp_path / "report.html").read_text()
    assert "95% interval (20 bootstrap samples)" in html and "<td>group=b</td>" in html
    assert html_escape(reason) in html


@pytest.mark.slow
def test_native_weighted_metrics_and_intervals_are_reproducible_whatever_the_batch(tmp_path):
    """In-process: the built-in weighted accuracy equals Keras' BinaryAccuracy fed the same weights, and the
    seeded bootstrap gives the same intervals with batches of 7 and of 60."""
    from generic_trainer import evaluate
    from generic_trainer.intake.judge_request import build_evaluate_request

    write_split(str(tmp_path / "data"), "eval", _e2e_rows())
    model = tiny_models.probability_from_feature(str(tmp_path / "model"))
    config = {
        "label_key": "label",
        "example_weight_key": "w",
        "problem": "binary",
        "slices": [["group"]],
        "metrics": ["accuracy", "auc", "keras.metrics.BinaryAccuracy"],
        "slice_thresholds": [
            {"slice": {"values": {"group": "a"}}, "thresholds": {"auc": {"lower_bound": 0.7}}}
        ],
        "confidence_intervals": {"samples": 40, "seed": 3, "level": 0.9},
    }
    results = [
        evaluate.compute(
            build_evaluate_request(
                {
                    "model": model,
                    "examples": str(tmp_path / "data"),
                    "eval_config": json.dumps(config),
                    "blessing_dir": str(tmp_path / "b"),
                    "batch_size": batch,
                }
            )
        )
        for batch in (7, 60)
    ]
    for result in results:
        assert result.blessed, result.reasons
        assert result.metrics["accuracy"] == pytest.approx(
            result.metrics["binary_accuracy"], abs=1e-6
        )
        assert [(r["slice"], r["metric"], r["passed"]) for r in result.thresholds] == [
            ("group=a", "auc", True)
        ]
    first, second = (
        {
            f"{where}.{metric}.{k}": v
            for where, intervals in [
                ("Overall", r.confidence_intervals),
                *((s["slice"], s["confidence_intervals"]) for s in r.slices),
            ]
            for metric, ci in intervals.items()
            for k, v in ci.items()
        }
        for r in results
    )
    assert len(first) == 3 * 5 * 4 and first == pytest.approx(
        second, rel=1e-5
    )  # float32 Keras sums: 1e-5
    assert first["Overall.accuracy.samples"] == 40
