"""The KFP component definitions: the checked-in YAML is what the definitions compile to, it loads,
its interface is what the runtime reads, its command is the image's entrypoint, and the image is
one setting that compiling can override."""

# No `from __future__ import annotations`: kfp reads the pipeline functions' annotations as types.
import json
import re
import subprocess
import sys

import pytest
import yaml
from conftest import REPO

from components import build, specs

TRAINER_YAML = REPO / "components" / "trainer" / "component.yaml"
TUNER_YAML = REPO / "components" / "tuner" / "component.yaml"
EXPECTED_ARGS = ["--executor-input", "{{$}}", "--executor-output-file", "{{$.outputs.output_file}}"]
# train and tune also get the run's identity from KFP, for their checkpoint dir (<base>/<run
# uuid>/<task name>).
RUN_IDENTITY = ["--run-id", "{{$.pipeline_job_uuid}}", "--task-name", "{{$.pipeline_task_name}}"]


def _container(path) -> dict:
    spec = yaml.safe_load(path.read_text())
    return next(iter(spec["deploymentSpec"]["executors"].values()))["container"]


def _interface(path) -> dict:
    spec = yaml.safe_load(path.read_text())
    return next(iter(spec["components"].values()))


def test_checked_in_yaml_matches_the_definitions():
    diffs = build.stale()
    assert not diffs, "component YAML out of date; run `python -m components.build`:\n" + "\n".join(
        diffs.values()
    )


def test_check_mode_fails_on_a_stale_yaml(tmp_path):
    for name in build.COMPONENTS:
        (tmp_path / name).mkdir()
        (tmp_path / name / "component.yaml").write_text(
            (REPO / "components" / name / "component.yaml").read_text()
        )
    assert build.main(["--check", "--out-dir", str(tmp_path)]) == 0
    text = (tmp_path / "trainer" / "component.yaml").read_text()
    (tmp_path / "trainer" / "component.yaml").write_text(text.replace("run_fn", "run_function"))
    assert build.main(["--check", "--out-dir", str(tmp_path)]) == 1


def test_trainer_container_runs_the_train_verb_with_the_executor_input():
    container = _container(TRAINER_YAML)
    assert container["command"] == ["generic-trainer"]
    assert container["args"] == ["train", *EXPECTED_ARGS, *RUN_IDENTITY]
    assert container["image"] == specs.DEFAULT_IMAGE
    tuner = _container(TUNER_YAML)
    assert tuner["command"] == ["generic-trainer"] and tuner["args"] == [
        "tune",
        *EXPECTED_ARGS,
        *RUN_IDENTITY,
    ]
    assert tuner["image"] == specs.DEFAULT_IMAGE


def test_command_is_the_images_entrypoint():
    """Kubernetes runs the command in place of the ENTRYPOINT; the ENTRYPOINT script runs it when
    docker
    (kfp.local's DockerRunner) appends it (tests/test_image_entrypoint.py)."""
    dockerfile = (REPO / "images" / "trainer" / "Dockerfile").read_text()
    entrypoints = re.findall(r"^ENTRYPOINT\s+(\[.*\])\s*$", dockerfile, re.M)
    assert entrypoints, "images/trainer/Dockerfile has no exec-form ENTRYPOINT"
    assert json.loads(entrypoints[-1]) == ["/usr/local/bin/generic-trainer-entrypoint"]
    assert _container(TRAINER_YAML)["command"] == ["generic-trainer"]


def test_trainer_component_declares_its_inputs_outputs_and_their_types():
    iface = _interface(TRAINER_YAML)
    artifacts = iface["inputDefinitions"]["artifacts"]
    types = {name: a["artifactType"]["schemaTitle"] for name, a in artifacts.items()}
    assert types == {
        "examples": "system.Dataset",
        "schema": "system.Artifact",
        "transform_graph": "system.Artifact",
        "hyperparameters": "system.Artifact",
        "base_model": "system.Model",
    }
    assert {n for n, a in artifacts.items() if a.get("isOptional")} == set(types) - {"examples"}
    params = iface["inputDefinitions"]["parameters"]
    assert {n: p["parameterType"] for n, p in params.items()} == {
        "module_file": "STRING",
        "run_fn": "STRING",
        "train_args": "STRUCT",
        "eval_args": "STRUCT",
        "custom_config": "STRUCT",
        "strategy": "STRING",
        "accelerator": "STRING",
        "prefetch_to_device": "STRING",
        "cache_examples": "STRING",
        "keras": "STRING",
        "module_sha256": "STRING",
        "task": "STRING",
        "experiment": "STRING",
        "config": "STRING",
        "mode": "STRING",
        "config_file": "LIST",
        "params_override": "STRING",
        "checkpoint_dir": "STRING",
        "cluster_timeout": "NUMBER_DOUBLE",
        "mixed_precision": "STRING",
        "jit_compile": "BOOLEAN",
        "steps_per_execution": "NUMBER_INTEGER",
        "serving_image": "STRING",
        "serving_accelerator": "STRING",
        "model_format": "STRING",
        "serving_image_region": "STRING",
        "export_tflite": "BOOLEAN",
        "tflite_quantization": "STRING",
        "tflite_tolerance": "NUMBER_DOUBLE",
    }
    # Either module_file (run_fn) or task (the Task API) is given: neither is required by itself.
    assert [n for n, p in params.items() if not p.get("isOptional")] == []
    assert (
        params["run_fn"]["defaultValue"] == "run_fn"
        and params["strategy"]["defaultValue"] == "auto"
    )
    outputs = {
        n: a["artifactType"]["schemaTitle"]
        for n, a in iface["outputDefinitions"]["artifacts"].items()
    }
    assert outputs == {
        "model": "system.Model",
        "model_run": "system.Artifact",
        "metrics": "system.Metrics",
        "report": "system.HTML",
    }
    # for a dsl.importer of google.UnmanagedContainerModel (Vertex AI Model Registry)
    assert {n: p["parameterType"] for n, p in iface["outputDefinitions"]["parameters"].items()} == {
        "serving_model_uri": "STRING",
        "serving_container_image": "STRING",
        "instance_schema_uri": "STRING",
        "prediction_schema_uri": "STRING",
    }
    assert all(a.get("description") for a in {**artifacts, **params}.values())


def test_tuner_component_declares_its_inputs_outputs_and_their_types():
    iface = _interface(TUNER_YAML)
    artifacts = iface["inputDefinitions"]["artifacts"]
    assert {n: a["artifactType"]["schemaTitle"] for n, a in artifacts.items()} == {
        "examples": "system.Dataset",
        "schema": "system.Artifact",
        "transform_graph": "system.Artifact",
        "hyperparameters": "system.Artifact",
        "base_model": "system.Model",
    }
    params = iface["inputDefinitions"]["parameters"]
    assert {n: p["parameterType"] for n, p in params.items()} == {
        "module_file": "STRING",
        "tuner_fn": "STRING",
        "train_args": "STRUCT",
        "eval_args": "STRUCT",
        "custom_config": "STRUCT",
        "max_trials": "NUMBER_INTEGER",
        "module_sha256": "STRING",
        "worker_timeout": "NUMBER_DOUBLE",
        "strategy": "STRING",
        "accelerator": "STRING",
        "prefetch_to_device": "STRING",
        "checkpoint_dir": "STRING",
    }
    assert params["tuner_fn"]["defaultValue"] == "tuner_fn"
    outputs = {
        n: a["artifactType"]["schemaTitle"]
        for n, a in iface["outputDefinitions"]["artifacts"].items()
    }
    assert outputs == {
        "best_hyperparameters": "system.Artifact",
        "tuner_results": "system.Artifact",
        "metrics": "system.Metrics",
        "report": "system.HTML",
    }


# The verb each component runs (its executor input is parsed with that verb's own maps).
COMPONENT_VERBS = {
    "trainer": "train",
    "tuner": "tune",
    "evaluator": "evaluate",
    "infra_validator": "infra-validate",
    "import_examples": "import-examples",
    "transform": "transform",
    "pusher": "push",
    "bulk_inferrer": "bulk-infer",
    "resolver": "resolve",
}


def _artifact_maps(verb: str):
    from generic_trainer import cli
    from generic_trainer.intake.options import artifact_maps

    return artifact_maps(cli.VERBS[verb].declaration)


def test_runtime_maps_every_artifact_of_the_components():
    """Each input/output artifact name of a component's YAML is one kfp_io turns into a request
    value, by the maps of the verb the component runs (derived from its own declaration)."""
    assert set(COMPONENT_VERBS) == set(build.COMPONENTS)
    for name, verb in COMPONENT_VERBS.items():
        maps = _artifact_maps(verb)
        iface = _interface(REPO / "components" / name / "component.yaml")
        assert set(iface["inputDefinitions"].get("artifacts", {})) == set(maps.inputs)
        assert set(iface["outputDefinitions"]["artifacts"]) == set(maps.outputs)


def test_one_artifact_name_fills_what_each_verb_declares(tmp_path):
    """`metrics` is an output of train and evaluate: evaluate's fills --metrics-file, train's
    nothing (its metadata holds the metrics); resolve's `model` fills --model-dir as train's does.
    Each verb parses its executor input with its own declaration's maps."""
    from generic_trainer.artifacts import kfp_io

    def executor_input(output: str) -> dict:
        art = {"name": output, "type": {"schemaTitle": "system.Artifact"}}
        arts = {output: {"artifacts": [{**art, "uri": f"gs://b/run/{output}"}]}}
        return {"inputs": {}, "outputs": {"artifacts": arts, "outputFile": str(tmp_path / "o")}}

    evaluated, _ = kfp_io.parse(
        executor_input("metrics"), _artifact_maps("evaluate"), gcs_root=str(tmp_path)
    )
    trained, kfp = kfp_io.parse(
        executor_input("metrics"), _artifact_maps("train"), gcs_root=str(tmp_path)
    )
    assert evaluated["metrics_file"] == str(tmp_path / "b/run/metrics")
    assert "metrics_file" not in trained and kfp.path("metrics") == str(tmp_path / "b/run/metrics")
    resolved, _ = kfp_io.parse(
        executor_input("model"), _artifact_maps("resolve"), gcs_root=str(tmp_path)
    )
    assert resolved["model_dir"] == str(tmp_path / "b/run/model")


@pytest.mark.parametrize("verb, path", [("train", TRAINER_YAML), ("tune", TUNER_YAML)])
def test_cli_accepts_every_component_parameter(verb, path):
    """Parameters arrive as values keyed by name; each must be a flag of the verb (or
    train_args/eval_args)."""
    from generic_trainer import cli

    parser = cli.build_parser()
    sub = parser._subparsers._group_actions[0].choices[verb]
    dests = {a.dest for a in sub._actions}
    params = set(_interface(path)["inputDefinitions"]["parameters"]) - {"train_args", "eval_args"}
    assert params <= dests, params - dests
    assert {"executor_input", "executor_output_file"} <= dests


# CLI flags a component deliberately does not offer as an input, and why.
CLI_ONLY = {
    "executor_input": "the KFP contract itself: the component passes {{$}}",
    "executor_output_file": "the KFP contract itself: the component passes "
    "{{$.outputs.output_file}}",
    "run_id": "filled by KFP's {{$.pipeline_job_uuid}} in the component's args, not by the user",
    "task_name": "filled by KFP's {{$.pipeline_task_name}} in the component's args, not by the "
    "user",
    "gcs_root": "where gs:// is mounted is the platform's (/gcs on Vertex); tests and local runs "
    "set it",
    "log_level": "KFP and Vertex log viewers filter by level themselves; INFO is what a run should "
    "show",
}
CLI_ONLY_BY_VERB = {
    "tune": {
        "keras": "keras-tuner searches Keras 3 models only: auto and keras3 both mean Keras 3"
    },
}
# Component inputs that carry several flags, or outputs that give a flag its value.
GROUPED = {
    "train_args": {"train_steps", "train_splits"},
    "eval_args": {"eval_steps", "eval_splits"},
}
OUTPUT_FLAGS = {
    "model": "model_dir",
    "model_run": "model_run_dir",
    "report": "report_file",
    "metrics": "metrics_file",  # the metrics artifact's metadata holds what --metrics-file would
    "best_hyperparameters": "best_hyperparameters_dir",
    "tuner_results": "tuner_results_file",
}


@pytest.mark.parametrize("verb, path", [("train", TRAINER_YAML), ("tune", TUNER_YAML)])
def test_component_inputs_match_the_cli_flags(verb, path):
    """Every flag of the verb is a component input (or output), unless listed above with its
    reason."""
    from generic_trainer import cli

    sub = cli.build_parser()._subparsers._group_actions[0].choices[verb]
    flags = {a.dest for a in sub._actions if a.dest != "help"}
    iface = _interface(path)
    covered = set()
    for name in iface["inputDefinitions"]["parameters"]:
        covered |= GROUPED.get(name, {name})
    artifacts = _artifact_maps(verb)
    covered |= {artifacts.inputs[name] for name in iface["inputDefinitions"]["artifacts"]}
    covered |= {OUTPUT_FLAGS[name] for name in iface["outputDefinitions"]["artifacts"]}
    allowed = set(CLI_ONLY) | set(CLI_ONLY_BY_VERB.get(verb, {}))
    assert flags - covered - allowed == set(), "flags the component lacks"
    assert covered - flags == set(), "component inputs the CLI lacks"
    assert allowed <= flags, "allow-list names a flag that no longer exists"
    assert not allowed & covered, "allow-listed flag is a component input after all"


def test_the_component_image_comes_from_the_flag_else_the_environment(tmp_path, monkeypatch):
    assert (
        build.main(["--image", "registry.example.com/t/trainer:v1", "--out-dir", str(tmp_path)])
        == 0
    )
    assert (
        _container(tmp_path / "trainer" / "component.yaml")["image"]
        == "registry.example.com/t/trainer:v1"
    )
    assert (
        _container(tmp_path / "tuner" / "component.yaml")["image"]
        == "registry.example.com/t/trainer:v1"
    )
    monkeypatch.setenv(specs.IMAGE_ENV, "registry.example.com/t/trainer:env")
    assert specs.resolve_image() == "registry.example.com/t/trainer:env"
    assert specs.resolve_image("explicit:1") == "explicit:1"
    proc = subprocess.run(
        [sys.executable, "-m", "components.build", "--out-dir", str(tmp_path / "env")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        _container(tmp_path / "env" / "trainer" / "component.yaml")["image"]
        == "registry.example.com/t/trainer:env"
    )


def test_yaml_loads_and_type_checks_when_called_in_a_pipeline(tmp_path):
    from kfp import compiler, components, dsl
    from kfp.dsl import Model
    from kfp.dsl.types.type_utils import InconsistentTypeException

    trainer = components.load_component_from_file(str(TRAINER_YAML))
    assert trainer.name == "generic-trainer"

    @dsl.pipeline(name="ok")
    def ok(examples_uri: str):
        examples = dsl.importer(artifact_uri=examples_uri, artifact_class=dsl.Dataset)
        trainer(examples=examples.output, module_file="gs://b/module.py")

    compiler.Compiler().compile(ok, str(tmp_path / "ok.yaml"))
    compiled = yaml.safe_load((tmp_path / "ok.yaml").read_text())
    task = compiled["root"]["dag"]["tasks"]["generic-trainer"]
    assert set(task["inputs"]["artifacts"]) == {"examples"}  # optional inputs left out stay out
    assert (
        task["inputs"]["parameters"]["module_file"]["runtimeValue"]["constant"]
        == "gs://b/module.py"
    )

    with pytest.raises(TypeError, match="examples"):

        @dsl.pipeline(name="missing")
        def missing(examples_uri: str):
            trainer(module_file="gs://b/module.py")

    with pytest.raises(InconsistentTypeException, match="examples"):

        @dsl.pipeline(name="wrong-type")
        def wrong_type(model_uri: str):
            model = dsl.importer(artifact_uri=model_uri, artifact_class=Model)
            trainer(examples=model.output, module_file="m.py")
