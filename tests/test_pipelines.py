"""The example pipelines compile, and compile into what they claim: tuner -> trainer wiring for the
penguin pipeline, a chief pool of 1 plus a worker pool of N-1 (same image and command) for Vertex."""

from __future__ import annotations

import pytest
import yaml
from conftest import REPO

from pipelines import penguin_pipeline, vertex_multiworker_pipeline


def _component_yaml_container(name: str) -> dict:
    spec = yaml.safe_load((REPO / "components" / name / "component.yaml").read_text())
    return next(iter(spec["deploymentSpec"]["executors"].values()))["container"]


def _compile(module, tmp_path, **kwargs) -> dict:
    out = tmp_path / "pipeline.yaml"
    module.compile_pipeline(str(out), **kwargs)
    return yaml.safe_load(out.read_text())


def test_penguin_pipeline_wires_import_transform_tuner_and_trainer(tmp_path):
    spec = _compile(penguin_pipeline, tmp_path)
    tasks = spec["root"]["dag"]["tasks"]
    assert {"importer", "generic-import-examples", "generic-transform", "generic-tuner", "generic-trainer"} <= set(
        tasks)  # + evaluator and infra-validator under the branches
    imported = tasks["generic-import-examples"]["inputs"]
    assert imported["parameters"]["input_pattern"] == {"componentInputParameter": "csv_uri"}
    assert imported["parameters"]["splits"] == {"componentInputParameter": "splits"}
    assert imported["artifacts"]["schema"]["taskOutputArtifact"]["producerTask"] == "importer"
    transform = tasks["generic-transform"]["inputs"]
    assert transform["artifacts"]["examples"]["taskOutputArtifact"] == {
        "outputArtifactKey": "examples", "producerTask": "generic-import-examples"}
    assert transform["artifacts"]["schema"]["taskOutputArtifact"] == {
        "outputArtifactKey": "output_schema", "producerTask": "generic-import-examples"}
    assert transform["parameters"]["beam_pipeline_args"] == {"componentInputParameter": "beam_pipeline_args"}
    trainer = tasks["generic-trainer"]["inputs"]
    assert trainer["artifacts"]["hyperparameters"]["taskOutputArtifact"] == {
        "outputArtifactKey": "best_hyperparameters", "producerTask": "generic-tuner"}
    for task in ("generic-trainer", "generic-tuner"):
        artifacts = tasks[task]["inputs"]["artifacts"]
        assert artifacts["examples"]["taskOutputArtifact"]["producerTask"] == "generic-import-examples"
        assert artifacts["transform_graph"]["taskOutputArtifact"] == {
            "outputArtifactKey": "transform_graph", "producerTask": "generic-transform"}
    tuner = tasks["generic-tuner"]["inputs"]
    assert tuner["parameters"]["max_trials"] == {"componentInputParameter": "max_trials"}
    assert tuner["parameters"]["train_args"] == {"componentInputParameter": "tuner_train_args"}
    params = spec["root"]["inputDefinitions"]["parameters"]
    assert {"csv_uri", "schema_uri", "module_file"} <= {n for n, p in params.items() if not p.get("isOptional")}
    assert params["train_args"]["defaultValue"] == {"num_steps": 500.0}
    executors = spec["deploymentSpec"]["executors"]
    for name in ("trainer", "tuner", "import_examples", "transform"):
        assert executors[f"exec-generic-{name.replace('_', '-')}"]["container"] == _component_yaml_container(name)
    assert executors["exec-importer"]["importer"]["typeSchema"]["schemaTitle"] == "system.Artifact"


def test_penguin_pipeline_without_tuner_and_for_another_image(tmp_path):
    spec = _compile(penguin_pipeline, tmp_path, tune=False, image="registry.example.com/me/trainer:7")
    tasks = spec["root"]["dag"]["tasks"]
    assert "generic-tuner" not in tasks
    assert "hyperparameters" not in tasks["generic-trainer"]["inputs"]["artifacts"]
    container = spec["deploymentSpec"]["executors"]["exec-generic-trainer"]["container"]
    assert container["image"] == "registry.example.com/me/trainer:7"
    assert container["args"] == _component_yaml_container("trainer")["args"]


def _custom_job(spec: dict) -> tuple[dict, dict]:
    """The custom-job component's parameter definitions and its task inputs."""
    component = next(c for name, c in spec["components"].items() if "generic-trainer" in name)
    task = spec["root"]["dag"]["tasks"]["generic-trainer"]
    return component["inputDefinitions"]["parameters"], task["inputs"]


@pytest.mark.parametrize("replicas", [3, 1])
def test_vertex_pipeline_worker_pools(tmp_path, replicas):
    spec = _compile(vertex_multiworker_pipeline, tmp_path, replica_count=replicas, machine_type="n1-standard-8",
                    accelerator_type="NVIDIA_TESLA_T4", accelerator_count=2,
                    base_output_directory="gs://bucket/runs/1", tensorboard="projects/p/locations/l/tensorboards/9",
                    service_account="trainer@p.iam.gserviceaccount.com")
    params, task_inputs = _custom_job(spec)
    pools = params["worker_pool_specs"]["defaultValue"]
    assert len(pools) == (2 if replicas > 1 else 1)
    assert pools[0]["replica_count"] == 1  # the chief
    if replicas > 1:
        assert pools[1]["replica_count"] == replicas - 1  # the workers
    trainer = _component_yaml_container("trainer")
    for pool in pools:
        container = pool["container_spec"]
        assert container["image_uri"] == trainer["image"]
        assert container["command"] == trainer["command"] == ["generic-trainer"]
        # GCPC JSON-escapes the executor input placeholder; everything else is the component's args.
        assert container["args"] == [a.replace("{{$}}", "{{$.json_escape[1]}}") for a in trainer["args"]]
        assert pool["machine_spec"] == {"machine_type": "n1-standard-8", "accelerator_type": "NVIDIA_TESLA_T4",
                                        "accelerator_count": 2}
    assert params["base_output_directory"]["defaultValue"] == "gs://bucket/runs/1"
    assert params["tensorboard"]["defaultValue"] == "projects/p/locations/l/tensorboards/9"
    assert params["service_account"]["defaultValue"] == "trainer@p.iam.gserviceaccount.com"
    # The trainer's own inputs are carried over into the custom-job task.
    assert task_inputs["artifacts"]["examples"]["taskOutputArtifact"]["producerTask"] == "importer"
    assert task_inputs["parameters"]["strategy"]["runtimeValue"]["constant"] == "auto"
    launcher = next(e for e in spec["deploymentSpec"]["executors"].values() if "container" in e
                    and "custom_job" in " ".join(e["container"]["command"]))
    assert launcher["container"]["image"].startswith("gcr.io/ml-pipeline/google-cloud-pipeline-components")


def test_vertex_pipeline_without_accelerator(tmp_path):
    spec = _compile(vertex_multiworker_pipeline, tmp_path, replica_count=2)
    params, _ = _custom_job(spec)
    pools = params["worker_pool_specs"]["defaultValue"]
    assert [p["machine_spec"] for p in pools] == [{"machine_type": "n1-standard-4"}] * 2
    with pytest.raises(ValueError, match="replica_count"):
        vertex_multiworker_pipeline.custom_job_trainer(replica_count=0)


def test_pipeline_modules_compile_from_the_command_line(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "v.yaml"
    proc = subprocess.run([sys.executable, "-m", "pipelines.vertex_multiworker_pipeline", "--output", str(out),
                           "--replica-count", "4"], cwd=REPO, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    params, _ = _custom_job(yaml.safe_load(out.read_text()))
    assert [p["replica_count"] for p in params["worker_pool_specs"]["defaultValue"]] == [1, 3]
