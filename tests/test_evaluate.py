"""The evaluator's edge (no TFMA): the short eval config's checks and its TFMA translation, the
request, TFX's legacy inputs, the KFP component. tests/test_evaluate_tfma.py runs TFMA itself."""

from __future__ import annotations

import json
import logging

import pytest
from conftest import PENGUIN, REPO, run_cli
from generic_trainer.errors import UserInputError
from generic_trainer.intake.judge_request import build_evaluate_request
from generic_trainer.judge import eval_short_form
from generic_trainer.judge.eval_config_reader import parse_eval_config

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
        (
            {"label_key": "y", "problem": "binary", "label_vocabulary": ["a", "b", "c"]},
            "eval_config.label_vocabulary",
            "a binary label has 2 classes; 3 given",
        ),
        (
            {"label_key": "y", "problem": "regression", "label_vocabulary": ["a", "b"]},
            "eval_config.label_vocabulary",
            "a regression label is a number",
        ),
    ],
)
def test_eval_config_errors_name_the_key(config, key, needle):
    with pytest.raises(UserInputError) as err:
        parse_eval_config(config if isinstance(config, str) else json.dumps(config))
    assert err.value.input_name == key
    assert needle in str(err.value)


def test_tfma_configs_pass_through_as_text():
    """A TFMA EvalConfig (text proto, JSON, dict) is handed to TFMA as it is, fields TFMA has
    included."""
    text = (
        "model_specs { signature_name: 'serving_default' label_key: 'species_xf'\n"
        "  preprocessing_function_names: 'transform_features' }\n"
        "metrics_specs { metrics { class_name: 'FairnessIndicators' } }"
    )
    assert parse_eval_config(text) == text
    as_dict = {"model_specs": [{"label_key": "y", "prediction_keys": {"a": "b"}}]}
    assert json.loads(parse_eval_config(as_dict)) == as_dict
    assert json.loads(parse_eval_config(json.dumps(as_dict))) == as_dict
    with pytest.raises(UserInputError, match="^--eval-config: not a valid text proto"):
        parse_eval_config("model_specs { label_key: ")


def test_short_form_is_written_as_the_tfma_config_it_means():
    config = parse_eval_config(
        {
            "label_key": "species",
            "example_weight_key": "w",
            "metrics": ["accuracy", "auc", {"class_name": "keras.metrics.AUC", "name": "k_auc"}],
            "slices": [["island"]],
            "thresholds": {"accuracy": {"lower_bound": 0.8, "change": {"absolute": -0.01}}},
            "slice_thresholds": [
                {
                    "slice": {"values": {"island": "Biscoe"}},
                    "thresholds": {"auc": {"lower_bound": 0.7}},
                }
            ],
            "confidence_intervals": {"samples": 20},
        }
    )
    tfma = eval_short_form.to_tfma(config, "multiclass", 3)
    assert tfma["model_specs"] == [
        {"label_key": "species", "signature_name": "serving_default", "example_weight_key": "w"}
    ]
    assert tfma["slicing_specs"] == [
        {},
        {"feature_keys": ["island"]},
        {"feature_values": {"island": "Biscoe"}},
    ]
    metrics = {
        json.loads(m["config"])["name"]: (m, spec)
        for spec in tfma["metrics_specs"]
        for m in spec["metrics"]
    }
    accuracy, _ = metrics["accuracy"]
    assert accuracy["class_name"] == "SparseCategoricalAccuracy"
    assert "threshold" not in accuracy  # TFMA's MetricConfig.threshold would judge every slice
    assert accuracy["per_slice_thresholds"] == [
        {
            "slicing_specs": [{}],  # the overall slice only, as the short form means it
            "threshold": {
                "value_threshold": {"lower_bound": 0.8},
                "change_threshold": {"direction": "HIGHER_IS_BETTER", "absolute": -0.01},
            },
        }
    ]
    auc, spec = metrics["auc"]
    assert spec["aggregate"] == {
        "macro_average": True,
        "class_weights": {"0": 1.0, "1": 1.0, "2": 1.0},
    }
    assert auc["per_slice_thresholds"] == [
        {
            "slicing_specs": [{"feature_values": {"island": "Biscoe"}}],
            "threshold": {"value_threshold": {"lower_bound": 0.7}},
        }
    ]
    assert metrics["k_auc"][0]["module"] == "keras.metrics"
    assert metrics["example_count"][1]["example_weights"] == {"unweighted": True}
    assert metrics["weighted_example_count"][0]["class_name"] == "WeightedExampleCount"
    assert tfma["options"] == {"compute_confidence_intervals": True}
    binary = eval_short_form.to_tfma(
        parse_eval_config({"label_key": "y", "from_logits": True, "metrics": ["accuracy"]}),
        "binary",
        1,
    )
    [accuracy] = [m for m in binary["metrics_specs"][0]["metrics"]]
    assert json.loads(accuracy["config"]) == {"name": "accuracy", "threshold": 0.0}
    with pytest.raises(UserInputError, match="eval_config.from_logits"):
        eval_short_form.to_tfma(
            parse_eval_config({"label_key": "y", "from_logits": True, "metrics": ["auc"]}),
            "binary",
            1,
        )


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
    ok = {**base, "model": str(tmp_path), "blessing_dir": "b"}
    for key, value, needle in [
        ("timeout", "-1", "--timeout"),
        ("memory_limit", "lots", "--memory-limit"),
        ("feature_slicing_spec", '{"specs": [{"column": ["a"]}]}', "--feature-slicing-spec"),
        ("fairness_indicator_thresholds", "0.5,2", "--fairness-indicator-thresholds"),
        ("beam_pipeline_args", "runner=x", "--beam-pipeline-args"),
    ]:
        with pytest.raises(UserInputError, match=needle):
            build_evaluate_request({**ok, key: value})
    (tmp_path / "bucket" / "m").mkdir(parents=True)
    request = build_evaluate_request(
        {
            **base,
            "model": "gs://bucket/m",
            "blessing_dir": "gs://bucket/blessing",
            "evaluation_dir": "gs://bucket/evaluation",
            "eval_splits": ["eval", "train"],
            "gcs_root": str(tmp_path),
            "feature_slicing_spec": {"specs": [{"column_for_slicing": ["island", "sex"]}]},
            "fairness_indicator_thresholds": [0.25, 0.5],
            "beam_pipeline_args": ["--direct_num_workers=2"],
        }
    )
    assert request.model == str(tmp_path / "bucket" / "m")
    assert request.evaluation_dir == str(tmp_path / "bucket" / "evaluation")
    assert request.eval_splits == ("eval", "train")
    data = PENGUIN / "data"
    assert request.eval_files == (str(data / "Split-eval" / "*"), str(data / "Split-train" / "*"))
    assert request.feature_slicing_spec == (("island", "sex"),)
    assert request.fairness_indicator_thresholds == (0.25, 0.5)
    assert request.beam_args == ("--direct_num_workers=2",)
    assert request.timeout == 300.0 and request.memory_limit == 8 * 1024**3


def test_the_request_travels_to_the_sandbox_whole(tmp_path):
    """The sandbox's spec is the request's to_json: from_json gives the same request back (but
    `kfp` and the storage settings, which stay with the parent)."""
    from generic_trainer.intake.judge_request import EvaluateRequest
    from generic_trainer.judge.tfma_evaluation import Job

    for config in (
        parse_eval_config({"label_key": "y", "thresholds": {"accuracy": {"lower_bound": 0.5}}}),
        "model_specs { label_key: 'y' }",
    ):
        request = EvaluateRequest(
            model=str(tmp_path / "m"),
            examples=str(tmp_path / "e"),
            eval_config=config,
            blessing_dir=str(tmp_path / "b"),
            baseline_model=str(tmp_path / "base"),
            eval_splits=("eval", "test"),
            feature_slicing_spec=(("a", "b"),),
            fairness_indicator_thresholds=(0.5,),
            beam_args=("--x=1",),
            memory_limit=None,
            timeout=12.5,
        )
        value = json.loads(json.dumps(request.to_json()))
        assert EvaluateRequest.from_json(value) == request
        assert "kfp" not in value and "storage" not in value
        job = Job.from_request_json(value)
        assert job.feature_slicing_spec == (("a", "b"),) and job.eval_splits == ("eval", "test")


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
        "evaluation": "system.Artifact",
        "metrics": "system.Metrics",
        "blessing": "system.Artifact",
        "report": "system.HTML",
    }
    params = iface["inputDefinitions"]["parameters"]
    assert [n for n, p in params.items() if not p.get("isOptional")] == ["eval_config"]
    assert set(params) <= _cli_dests("evaluate")


def test_penguin_pipeline_wires_the_trained_model_to_evaluator_and_infra_validator(tmp_path):
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


@pytest.mark.parametrize(
    "dtype,shape,feature,needle",
    [
        ("int64", [-1], ("INT", 1), ""),  # [None] takes a one-value feature (TFMA reshapes)
        ("float32", [-1, 1], ("FLOAT", None), ""),
        ("string", [-1, 1], ("BYTES", 1), ""),
        ("float32", [-1, -1], ("FLOAT", None), ""),  # one unknown dimension: TFMA reshapes to -1
        ("float32", [-1], ("INT", 1), "TFMA feeds the INT feature as int64 and does not cast"),
        ("int32", [-1, 1], ("INT", 1), "is int32, but TFMA feeds the INT feature as int64"),
        ("float32", [-1, 4], ("FLOAT", 1), "takes 4 value(s) per example; the feature holds 1"),
        ("float32", [-1, -1, -1], ("FLOAT", None), "more than one unknown dimension"),
        ("float32", [], ("FLOAT", 1), "has no batch dimension"),
        ("float32", None, ("FLOAT", 1), ""),  # unknown rank: TFMA feeds the feature as it is
    ],
)
def test_tfma_input_problem_names_a_tensor_input_tfma_cannot_feed(dtype, shape, feature, needle):
    from generic_trainer.judge import tfma_inputs
    from generic_trainer.judge.signature_feed import Feature

    problem = tfma_inputs.input_problem(dtype, shape, Feature(*feature))
    assert (needle in problem) if needle else problem == ""


def test_tfma_feeds_serialized_examples_to_one_string_input_naming_no_feature():
    from generic_trainer.judge import tfma_inputs

    features = {"x": None, "text": None}
    assert tfma_inputs.takes_examples({"examples": ("string", [-1])}, features)
    assert not tfma_inputs.takes_examples({"text": ("string", [-1])}, features)  # a feature
    assert not tfma_inputs.takes_examples({"text_input": ("string", [-1])}, features)  # Keras'
    assert not tfma_inputs.takes_examples({"x": ("float32", [-1]), "y": ("float32", [-1])}, {})


@pytest.mark.parametrize(
    "vocabulary,kind,width,needle",
    [
        (("a", "b", "c"), "bytes_list", 3, ""),
        (("no", "yes"), "bytes_list", 1, ""),  # binary: one sigmoid column
        (None, "bytes_list", 3, "holds strings; give the class names in class-id order"),
        (("a", "b"), "int64_list", 2, "maps string labels to class ids; the label 'y' holds"),
        (("a", "b"), "bytes_list", 3, "names 2 classes; the model outputs 3 columns"),
    ],
)
def test_string_labels_need_a_vocabulary_that_fits_the_model(vocabulary, kind, width, needle):
    from generic_trainer.judge import eval_problem
    from generic_trainer.judge.eval_config import EvalConfig

    config = EvalConfig(label_key="y", label_vocabulary=vocabulary)
    if not needle:
        eval_problem.check_vocabulary(config, kind, width)
        return
    with pytest.raises(UserInputError) as err:
        eval_problem.check_vocabulary(config, kind, width)
    assert err.value.input_name == "eval_config.label_vocabulary" and needle in str(err.value)


def test_tfma_pipeline_runs_in_process_on_the_fnapirunner_unless_the_args_say_otherwise():
    """Beam's DirectRunner would first try Prism (a binary fetched from GitHub at run time)."""
    from apache_beam.options.pipeline_options import DirectOptions, StandardOptions
    from generic_trainer.beam import beam_run

    default = beam_run.in_process_options([])
    assert default.view_as(StandardOptions).runner == "FnApiRunner"
    assert default.view_as(DirectOptions).direct_running_mode == "in_memory"
    processes = beam_run.in_process_options(["--direct_running_mode=multi_processing"])
    assert processes.view_as(StandardOptions).runner is None
    dataflow = beam_run.in_process_options(["--runner=DataflowRunner", "--project=p"])
    assert dataflow.view_as(StandardOptions).runner == "DataflowRunner"


def test_a_pipeline_on_the_in_process_options_never_tries_prism(caplog):
    import apache_beam as beam
    from apache_beam.testing.util import assert_that, equal_to
    from generic_trainer.beam import beam_run

    caplog.set_level(logging.INFO)
    with beam.Pipeline(options=beam_run.in_process_options([])) as pipeline:
        assert_that(pipeline | beam.Create([1, 2]) | beam.Map(lambda x: x * 3), equal_to([3, 6]))
    assert "prism" not in caplog.text.lower()
