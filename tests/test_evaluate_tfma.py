# ruff: noqa: F811  (the fixtures imported from test_tfx_real_modules are parameters here)
"""`evaluate` is TFMA: real TFMA runs through the CLI, on TFX's own configs and module files.

- the bundled penguin model with the short form (KFP form): the summary equals the numbers of a
  plain `tfma.run_model_analysis` on the same model, config and data, exactly (what
  bench/tfma_compare.py checked by hand), and TFMA's readers read the `evaluation` output;
- string labels with the short form's `label_vocabulary` and a change threshold against a
  baseline: TFMA's accuracy equals the model's own on the class ids, NOT_BLESSED from TFMA's
  validation result;
- TFX's penguin local pipeline EvalConfig (label `species_xf`, `preprocessing_function_names`) on
  a model trained with TFX's wiring from the wheel's penguin_utils_keras.py, with a baseline, TFX's
  evaluator_module.py, the legacy feature_slicing_spec and two example splits, in one run;
- TFX's taxi native-Keras EvalConfig (`tips_xf`) with FairnessIndicators (and
  fairness_indicator_thresholds) on a model trained from the wheel's taxi_utils_native_keras.py.

The TFX-wired models are test_tfx_real_modules' session fixtures (trained once per run, shared
with the tests of the module files); the bundled penguin model is conftest's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import PENGUIN, run_cli
from test_tfx_real_modules import (  # noqa: F401 (fixtures)
    penguin_keras,
    taxi,
    taxi_native_keras,
    tfx_root,
)

pytestmark = pytest.mark.slow

# TFX's penguin_pipeline_local.py EvalConfig (accuracy_threshold 0.6), as its text proto
PENGUIN_LOCAL_CONFIG = """
model_specs {
  signature_name: "serving_default"
  label_key: "species_xf"
  preprocessing_function_names: "transform_features"
}
slicing_specs {}
metrics_specs {
  metrics {
    class_name: "SparseCategoricalAccuracy"
    threshold {
      value_threshold { lower_bound { value: 0.6 } }
      change_threshold { direction: HIGHER_IS_BETTER absolute { value: -1e-10 } }
    }
  }
}
"""
# TFX's taxi_pipeline_native_keras.py EvalConfig, plus a FairnessIndicators metric
TAXI_NATIVE_KERAS_CONFIG = """
model_specs {
  signature_name: "serving_default"
  label_key: "tips_xf"
  preprocessing_function_names: "transform_features"
}
slicing_specs {}
metrics_specs {
  metrics {
    class_name: "BinaryAccuracy"
    threshold {
      value_threshold { lower_bound { value: 0.6 } }
      change_threshold { direction: HIGHER_IS_BETTER absolute { value: -1e-10 } }
    }
  }
  metrics { class_name: "FairnessIndicators" config: '{"thresholds": [0.3, 0.7]}' }
}
"""
PENGUIN_SHORT = {
    "label_key": "species",
    "slices": [["island"]],
    "metrics": ["accuracy", "loss", "auc", "precision"],
    "thresholds": {"accuracy": {"lower_bound": 0.8, "change": {"absolute": -0.01}}},
    "slice_thresholds": [
        {
            "slice": {"values": {"island": "Biscoe"}},
            "thresholds": {"accuracy": {"lower_bound": 0.5}},
        }
    ],
}


def _evaluate(*args) -> tuple[dict, str]:
    proc = run_cli(["evaluate", *[str(a) for a in args]], timeout=600)
    assert proc.returncode == 0, proc.stderr[-6000:]
    return json.loads(proc.stdout), proc.stderr


def _artifact(name: str, title: str, uri: Path) -> dict:
    return {
        "artifacts": [
            {"name": name, "type": {"schemaTitle": title}, "uri": str(uri), "metadata": {}}
        ]
    }


def _plain_tfma(model: Path, config: dict, data: str, out: Path) -> dict:
    """A plain tfma.run_model_analysis: {slice: {metric name: value}} of the candidate."""
    import tensorflow_model_analysis as tfma
    from google.protobuf import json_format
    from tensorflow_model_analysis.proto import config_pb2

    eval_config = json_format.ParseDict(config, config_pb2.EvalConfig())
    shared = tfma.default_eval_shared_model(
        eval_saved_model_path=str(model), eval_config=eval_config
    )
    result = tfma.run_model_analysis(
        eval_shared_model=shared,
        eval_config=eval_config,
        data_location=data,
        output_path=str(out),
        file_format="tfrecords",
    )
    plain = {}
    for slice_key, metrics in result.slicing_metrics:
        name = tfma.slicer.stringify_slice_key(slice_key) or "Overall"
        values = next(iter(next(iter(metrics.values())).values()))
        plain[name] = {k.split("\n_")[-1]: v.get("doubleValue") for k, v in values.items()}
    return plain


def test_short_form_summary_equals_plain_tfma_kfp_form(trained_penguin_model, tmp_path):
    import tensorflow_model_analysis as tfma

    out = tmp_path / "outputs"
    executor_input = {
        "inputs": {
            "parameterValues": {"eval_config": PENGUIN_SHORT},
            "artifacts": {
                "model": _artifact("m", "system.Model", trained_penguin_model),
                "examples": _artifact("e", "system.Dataset", PENGUIN / "data"),
                "schema": _artifact("s", "system.Artifact", PENGUIN / "schema.pbtxt"),
            },
        },
        "outputs": {
            "artifacts": {
                "evaluation": _artifact("ev", "system.Artifact", out / "evaluation"),
                "metrics": _artifact("mt", "system.Metrics", out / "metrics"),
                "blessing": _artifact("b", "system.Artifact", out / "blessing"),
                "report": _artifact("r", "system.HTML", out / "report"),
            },
            "parameters": {"blessed": {"outputFile": str(out / "blessed")}},
            "outputFile": str(out / "executor_output.json"),
        },
    }
    summary, stderr = _evaluate("--executor-input", json.dumps(executor_input))
    assert "change thresholds are skipped" in stderr
    assert summary["blessed"] is True and (out / "blessing" / "BLESSED").is_file()
    executor_output = json.loads((out / "executor_output.json").read_text())
    assert executor_output["parameterValues"] == {"blessed": True}  # what a dsl.If tests
    written = executor_output["artifacts"]
    assert written["blessing"]["artifacts"][0]["metadata"]["blessed"] == 1
    scalars = written["metrics"]["artifacts"][0]["metadata"]
    assert scalars["example_count"] == 95 and scalars["accuracy"] == summary["metrics"]["accuracy"]
    # TFMA's own readers read the evaluation output
    evaluation = str(out / "evaluation")
    assert tfma.load_validation_result(evaluation).validation_ok
    loaded = tfma.load_eval_result(evaluation)
    assert len(loaded.slicing_metrics) == 4  # overall and three islands
    # the summary is TFMA's numbers: a plain run_model_analysis with the config as run
    metrics_json = json.loads((out / "metrics").read_text())
    config = metrics_json["tfma_eval_config"]
    plain = _plain_tfma(
        trained_penguin_model / "Format-Serving",
        config,
        str(PENGUIN / "data" / "Split-eval" / "*"),
        tmp_path / "plain",
    )
    ours = {s["slice"]: s["metrics"] for s in metrics_json["slices"]}
    assert (
        set(ours) == set(plain) == {"Overall", "island:Biscoe", "island:Dream", "island:Torgersen"}
    )
    for name, values in ours.items():
        nan_as_none = {
            k: None if v in ("NaN", None) or v != v else v for k, v in plain[name].items()
        }
        assert values == nan_as_none, name
    rows = {(r["slice"], r["metric"]): r for r in metrics_json["thresholds"]}
    assert rows[("Overall", "accuracy")]["passed"] is True
    assert any(s.startswith("{feature_values") and m == "accuracy" for s, m in rows)
    html = (out / "report").read_text()
    assert "BLESSED" in html and "island:Biscoe" in html


SPECIES = ["Adelie", "Chinstrap", "Gentoo"]


def _string_labels(out: Path) -> tuple[Path, list[int], list[bytes]]:
    """The penguin eval split with `species_name` beside `species` (the class id): (examples dir,
    the class ids, the records)."""
    import tensorflow as tf

    [source] = (PENGUIN / "data" / "Split-eval").iterdir()
    records = list(
        tf.data.TFRecordDataset(str(source), compression_type="GZIP").as_numpy_iterator()
    )
    (out / "Split-eval").mkdir(parents=True)
    ids = []
    with tf.io.TFRecordWriter(str(out / "Split-eval" / "data.gz"), options="GZIP") as writer:
        for record in records:
            example = tf.train.Example.FromString(record)
            ids.append(example.features.feature["species"].int64_list.value[0])
            example.features.feature["species_name"].bytes_list.value.append(
                SPECIES[ids[-1]].encode()
            )
            writer.write(example.SerializeToString())
    return out, ids, records


def test_string_labels_and_a_change_threshold_against_a_baseline(trained_penguin_model, tmp_path):
    import numpy as np
    import tensorflow as tf
    import tensorflow_model_analysis as tfma

    examples, ids, records = _string_labels(tmp_path / "examples")
    config = {
        "label_key": "species_name",
        "label_vocabulary": SPECIES,
        "thresholds": {"accuracy": {"change": {"absolute": 0.5}}},
    }
    summary, stderr = _evaluate(
        "--model", trained_penguin_model, "--baseline-model", trained_penguin_model,
        "--examples", examples, "--eval-config", json.dumps(config),
        "--blessing-dir", tmp_path / "blessing", "--evaluation-dir", tmp_path / "evaluation",
    )  # fmt: skip
    # TFMA mapped the names to class ids: its accuracy is the model's own on the ids
    serving = tf.saved_model.load(str(trained_penguin_model / "Format-Serving"))
    probabilities = serving.signatures["serving_default"](tf.constant(records))["outputs"].numpy()
    expected = float(np.mean(np.argmax(probabilities, axis=1) == np.array(ids)))
    assert summary["metrics"]["accuracy"] == pytest.approx(expected, abs=1e-6)
    assert summary["metrics"]["example_count"] == len(ids)
    assert "TFMA maps them to class ids through label_vocabulary" in stderr
    assert summary["blessed"] is False and (tmp_path / "blessing" / "NOT_BLESSED").is_file()
    assert summary["baseline_metrics"]["accuracy"] == summary["metrics"]["accuracy"]
    assert any("change of accuracy" in r for r in summary["reasons"])
    result = tfma.load_validation_result(str(tmp_path / "evaluation"))
    assert not result.validation_ok
    baseline = tfma.load_eval_result(str(tmp_path / "evaluation"), model_name="baseline")
    assert baseline.slicing_metrics


@pytest.mark.e2e
def test_tfx_penguin_local_config_baseline_module_file_legacy_slicing_and_splits(
    penguin_keras, tfx_root, tmp_path
):
    import tensorflow_model_analysis as tfma

    model = penguin_keras / "model"
    testdata = tfx_root / "tfx" / "components" / "testdata"
    examples, schema = (
        testdata / "penguin" / "data",
        testdata / "penguin" / "schema" / "schema.pbtxt",
    )
    module = testdata / "module_file" / "evaluator_module.py"
    summary, stderr = _evaluate(
        "--model", model, "--baseline-model", model, "--examples", examples, "--schema", schema,
        "--eval-config", PENGUIN_LOCAL_CONFIG, "--module-file", module,
        "--feature-slicing-spec", '{"specs": [{"column_for_slicing": ["species"]}]}',
        "--eval-splits", "eval,train", "--beam-pipeline-args=--direct_num_workers=1",
        "--blessing-dir", tmp_path / "blessing", "--evaluation-dir", tmp_path / "evaluation",
    )  # fmt: skip
    accuracy = summary["metrics"]["sparse_categorical_accuracy"]
    assert summary["baseline_metrics"]["sparse_categorical_accuracy"] == accuracy
    # the threshold applies to every slice, the legacy spec's species too: TFMA's verdict decides
    # (the change, 0, passes absolute -1e-10)
    validation_ok = tfma.load_validation_result(str(tmp_path / "evaluation")).validation_ok
    assert summary["blessed"] == validation_ok and (validation_ok or summary["reasons"])
    assert accuracy >= 0.6 or not validation_ok
    assert (tmp_path / "blessing" / ("BLESSED" if validation_ok else "NOT_BLESSED")).is_file()
    loaded = tfma.load_eval_result(str(tmp_path / "evaluation"), model_name="candidate")
    names = {tfma.slicer.stringify_slice_key(k) for k, _ in loaded.slicing_metrics}
    assert names & {"", "Overall"} and {n for n in names if n.startswith("species:")}
    read = stderr.split("TFMA on ", 1)[1].split("\n", 1)[0]
    assert "Split-eval/*" in read and "Split-train/*" in read  # both splits, as example_splits


@pytest.mark.e2e
def test_tfx_taxi_native_keras_config_with_fairness_indicators(taxi, taxi_native_keras, tmp_path):
    import tensorflow_model_analysis as tfma

    examples, schema = taxi
    summary, _ = _evaluate(
        "--model", taxi_native_keras / "model", "--examples", examples, "--schema", schema,
        "--eval-config", TAXI_NATIVE_KERAS_CONFIG, "--fairness-indicator-thresholds", "0.5",
        "--blessing-dir", tmp_path / "blessing", "--evaluation-dir", tmp_path / "evaluation",
    )  # fmt: skip
    accuracy = summary["metrics"]["binary_accuracy"]
    assert summary["blessed"] == (accuracy >= 0.6), summary["reasons"]
    fairness = [k for k in summary["metrics"] if k.startswith("fairness_indicators_metrics/")]
    for threshold in ("0.3", "0.5", "0.7"):
        assert f"fairness_indicators_metrics/false_positive_rate@{threshold}" in fairness
    assert (
        tfma.load_validation_result(str(tmp_path / "evaluation")).validation_ok
        == (summary["blessed"])
    )


def test_a_run_past_the_time_limit_is_not_blessed_and_publishes_no_evaluation(
    trained_penguin_model, tmp_path
):
    summary, _ = _evaluate(
        "--model", trained_penguin_model, "--examples", PENGUIN / "data",
        "--eval-config", json.dumps(PENGUIN_SHORT), "--timeout", "0.5",
        "--blessing-dir", tmp_path / "blessing", "--evaluation-dir", tmp_path / "evaluation",
    )  # fmt: skip
    assert summary["blessed"] is False and "time limit" in summary["reasons"][0]
    assert (tmp_path / "blessing" / "NOT_BLESSED").is_file()
    assert not (tmp_path / "evaluation").exists()  # TFMA's output appears whole or not at all
