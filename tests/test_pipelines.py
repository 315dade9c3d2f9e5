"""The example pipelines compile, and compile into what they claim: tuner -> trainer wiring for the
penguin pipeline, a chief pool of 1 plus a worker pool of N-1 (same image and command) for
Vertex."""

from __future__ import annotations

import logging
import re

import pytest
import yaml
from conftest import REPO
from generic_trainer import vertex, vertex_machines

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
    assert {
        "importer",
        "generic-import-examples",
        "generic-transform",
        "generic-tuner",
        "generic-trainer",
    } <= set(tasks)  # + evaluator and infra-validator under the branches
    imported = tasks["generic-import-examples"]["inputs"]
    assert imported["parameters"]["input_pattern"] == {"componentInputParameter": "csv_uri"}
    assert imported["parameters"]["splits"] == {"componentInputParameter": "splits"}
    assert imported["artifacts"]["schema"]["taskOutputArtifact"]["producerTask"] == "importer"
    transform = tasks["generic-transform"]["inputs"]
    assert transform["artifacts"]["examples"]["taskOutputArtifact"] == {
        "outputArtifactKey": "examples",
        "producerTask": "generic-import-examples",
    }
    assert transform["artifacts"]["schema"]["taskOutputArtifact"] == {
        "outputArtifactKey": "output_schema",
        "producerTask": "generic-import-examples",
    }
    assert transform["parameters"]["beam_pipeline_args"] == {
        "componentInputParameter": "beam_pipeline_args"
    }
    trainer = tasks["generic-trainer"]["inputs"]
    assert trainer["artifacts"]["hyperparameters"]["taskOutputArtifact"] == {
        "outputArtifactKey": "best_hyperparameters",
        "producerTask": "generic-tuner",
    }
    for task in (
        "generic-trainer",
        "generic-tuner",
    ):  # TFX's wiring: Transform's examples, the raw schema, the graph
        artifacts = tasks[task]["inputs"]["artifacts"]
        assert artifacts["examples"]["taskOutputArtifact"] == {
            "outputArtifactKey": "transformed_examples",
            "producerTask": "generic-transform",
        }
        assert artifacts["schema"]["taskOutputArtifact"] == {
            "outputArtifactKey": "output_schema",
            "producerTask": "generic-import-examples",
        }
        assert artifacts["transform_graph"]["taskOutputArtifact"] == {
            "outputArtifactKey": "transform_graph",
            "producerTask": "generic-transform",
        }
    tuner = tasks["generic-tuner"]["inputs"]
    assert tuner["parameters"]["max_trials"] == {"componentInputParameter": "max_trials"}
    assert tuner["parameters"]["train_args"] == {"componentInputParameter": "tuner_train_args"}
    params = spec["root"]["inputDefinitions"]["parameters"]
    assert {"csv_uri", "schema_uri", "module_file"} <= {
        n for n, p in params.items() if not p.get("isOptional")
    }
    assert params["train_args"]["defaultValue"] == {"num_steps": 500.0}
    # TFLite export: pipeline parameters passed to the trainer, on by default (module_transform.py's
    # model converts)
    assert trainer["parameters"]["export_tflite"] == {"componentInputParameter": "export_tflite"}
    assert trainer["parameters"]["tflite_quantization"] == {
        "componentInputParameter": "tflite_quantization"
    }
    assert params["export_tflite"] == {
        "defaultValue": True,
        "isOptional": True,
        "parameterType": "BOOLEAN",
    }
    assert params["tflite_quantization"] == {
        "defaultValue": "none",
        "isOptional": True,
        "parameterType": "STRING",
    }
    executors = spec["deploymentSpec"]["executors"]
    for name in ("trainer", "tuner", "import_examples", "transform"):
        assert executors[f"exec-generic-{name.replace('_', '-')}"][
            "container"
        ] == _component_yaml_container(name)
    assert executors["exec-importer"]["importer"]["typeSchema"]["schemaTitle"] == "system.Artifact"
    assert params["warmup_requests"]["defaultValue"] == 10
    validators = [
        (name, task)
        for component in spec["components"].values()
        for name, task in component.get("dag", {}).get("tasks", {}).items()
        if name.startswith("generic-infra-validator")
    ]
    assert (
        len(validators) == 2
    )  # both branches: warm-up requests from the pipeline parameter, features by the schema
    for _, task in validators:
        assert task["inputs"]["parameters"]["write_warmup"] == {
            "componentInputParameter": "pipelinechannel--warmup_requests"
        }
        assert task["inputs"]["artifacts"]["schema"]["componentInputArtifact"] == (
            "pipelinechannel--generic-import-examples-output_schema"
        )
    assert executors["exec-generic-infra-validator"]["container"] == _component_yaml_container(
        "infra_validator"
    )


def test_penguin_pipeline_without_tuner_passes_no_hyperparameters_and_takes_the_image(tmp_path):
    spec = _compile(
        penguin_pipeline, tmp_path, tune=False, image="registry.example.com/me/trainer:7"
    )
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
def test_vertex_pipeline_runs_the_trainer_component_in_chief_and_worker_pools(tmp_path, replicas):
    spec = _compile(
        vertex_multiworker_pipeline,
        tmp_path,
        replica_count=replicas,
        machine_type="n1-standard-8",
        accelerator_type="NVIDIA_TESLA_T4",
        accelerator_count=2,
        base_output_directory="gs://bucket/runs/1",
        tensorboard="projects/p/locations/l/tensorboards/9",
        service_account="trainer@p.iam.gserviceaccount.com",
    )
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
        assert container["args"] == [
            a.replace("{{$}}", "{{$.json_escape[1]}}") for a in trainer["args"]
        ]
        assert pool["machine_spec"] == {
            "machine_type": "n1-standard-8",
            "accelerator_type": "NVIDIA_TESLA_T4",
            "accelerator_count": 2,
        }
    assert params["base_output_directory"]["defaultValue"] == "gs://bucket/runs/1"
    assert params["tensorboard"]["defaultValue"] == "projects/p/locations/l/tensorboards/9"
    assert params["service_account"]["defaultValue"] == "trainer@p.iam.gserviceaccount.com"
    # The trainer's own inputs are carried over into the custom-job task.
    assert task_inputs["artifacts"]["examples"]["taskOutputArtifact"]["producerTask"] == "importer"
    assert (
        "strategy" not in task_inputs["parameters"]
    )  # GCPC's own (scheduling), not the trainer's tf.distribute one
    assert params["strategy"]["defaultValue"] == "STANDARD"
    launcher = next(
        e
        for e in spec["deploymentSpec"]["executors"].values()
        if "container" in e and "custom_job" in " ".join(e["container"]["command"])
    )
    assert launcher["container"]["image"].startswith(
        "gcr.io/ml-pipeline/google-cloud-pipeline-components"
    )


def test_vertex_pipeline_without_accelerator_sets_only_the_machine_type(tmp_path):
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
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipelines.vertex_multiworker_pipeline",
            "--output",
            str(out),
            "--replica-count",
            "4",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    params, _ = _custom_job(yaml.safe_load(out.read_text()))
    assert [p["replica_count"] for p in params["worker_pool_specs"]["defaultValue"]] == [1, 3]


def _dag(spec: dict, component: str) -> dict:
    return spec["components"][component]["dag"]["tasks"]


def _upload_chain(spec: dict, blessed_task: str) -> tuple[dict, str]:
    """The `upload-requested` condition task whose inner condition is `blessed_task`'s blessed
    output, and the
    component inside that."""
    for component in [spec["root"], *spec["components"].values()]:
        for task in component.get("dag", {}).get("tasks", {}).values():
            if task["taskInfo"]["name"] != "upload-requested":
                continue
            blessed = next(iter(_dag(spec, task["componentRef"]["name"]).values()))
            if f"--{blessed_task}-blessed'] == true" in blessed.get("triggerPolicy", {}).get(
                "condition", ""
            ):
                assert blessed["taskInfo"]["name"] == "blessed"
                return task, blessed["componentRef"]["name"]
    raise AssertionError(f"no upload under dsl.If({blessed_task}.blessed)")


def _assert_upload_steps(
    spec: dict, blessed_task: str, trainer_task: str, location_param: str
) -> None:
    """Under dsl.If(blessed) and dsl.If(model_display_name != ''): import the trainer's SavedModel
    as a
    google.UnmanagedContainerModel (its URI and serving image from the trainer's outputs) and
    upload it."""
    requested, component = _upload_chain(spec, blessed_task)
    assert requested["taskInfo"]["name"] == "upload-requested"
    assert requested["triggerPolicy"]["condition"] == (
        "inputs.parameter_values['pipelinechannel--model_display_name'] != ''"
    )
    keys = {
        re.sub(r"-\d+$", "", t["taskInfo"]["name"]): key for key, t in _dag(spec, component).items()
    }
    assert set(keys) == {"import-serving-model", "model-upload"}
    tasks = {name: _dag(spec, component)[key] for name, key in keys.items()}
    importer = tasks["import-serving-model"]
    assert importer["inputs"]["parameters"]["uri"] == {
        "componentInputParameter": f"pipelinechannel--{trainer_task}-serving_model_uri"
    }
    assert importer["inputs"]["parameters"] == {
        name: {"componentInputParameter": f"pipelinechannel--{trainer_task}-{output}"}
        for name, output in (
            ("uri", "serving_model_uri"),
            ("metadata", "serving_container_image"),
            ("metadata-2", "instance_schema_uri"),
            ("metadata-3", "prediction_schema_uri"),
        )
    }
    executor = spec["deploymentSpec"]["executors"][
        spec["components"][importer["componentRef"]["name"]]["executorLabel"]
    ]["importer"]
    assert executor == {
        "artifactUri": {"runtimeParameter": "uri"},
        "metadata": {
            "containerSpec": {"imageUri": "{{$.inputs.parameters['metadata']}}"},
            "predictSchemata": {
                "instanceSchemaUri": "{{$.inputs.parameters['metadata-2']}}",
                "predictionSchemaUri": "{{$.inputs.parameters['metadata-3']}}",
            },
        },
        "typeSchema": {"schemaTitle": "google.UnmanagedContainerModel", "schemaVersion": "0.0.1"},
    }
    upload = tasks["model-upload"]
    assert upload["inputs"]["artifacts"] == {
        "unmanaged_container_model": {
            "taskOutputArtifact": {
                "outputArtifactKey": "artifact",
                "producerTask": keys["import-serving-model"],
            }
        }
    }
    assert upload["inputs"]["parameters"]["display_name"] == {
        "componentInputParameter": "pipelinechannel--model_display_name"
    }
    assert upload["inputs"]["parameters"]["location"] == {"componentInputParameter": location_param}
    launcher = spec["deploymentSpec"]["executors"][
        spec["components"][upload["componentRef"]["name"]]["executorLabel"]
    ]["container"]
    assert (
        launcher["command"][-1]
        == "google_cloud_pipeline_components.container.v1.model.upload_model.launcher"
    )


def test_penguin_pipeline_uploads_a_blessed_model_to_the_model_registry(tmp_path):
    spec = _compile(penguin_pipeline, tmp_path)
    params = spec["root"]["inputDefinitions"]["parameters"]
    assert (
        params["model_display_name"]["defaultValue"] == ""
    )  # no upload unless named (kfp.local runs skip it)
    assert params["model_location"]["defaultValue"] == "us-central1"
    for infra in (
        "generic-infra-validator",
        "generic-infra-validator-2",
    ):  # with a baseline, and the first model
        _assert_upload_steps(spec, infra, "generic-trainer", "pipelinechannel--model_location")


PRODUCTION = dict(
    replica_count=3,
    machine_type="a2-highgpu-1g",
    accelerator_type="NVIDIA_TESLA_A100",
    accelerator_count=1,
    chief_machine_type="a2-highgpu-2g",
    chief_accelerator_count="2",
    reduction_server_count="2",
    scheduling_strategy="SPOT",
    timeout="12h",
    max_wait_duration="30m",
    network="projects/123/global/networks/vpc",
    reserved_ip_range=["range-a"],
    label={"team": "ml"},
    persistent_resource_id=None,
    encryption_spec_key_name="projects/p/locations/us-central1/keyRings/r/cryptoKeys/k",
    restart_job_on_worker_restart=True,
    base_output_directory="gs://bucket/runs/1",
)


def test_vertex_pipeline_production_options_pools_and_upload(tmp_path):
    spec = _compile(vertex_multiworker_pipeline, tmp_path, **PRODUCTION)
    params, _ = _custom_job(spec)
    defaults = {
        name: params[name].get("defaultValue")
        for name in (
            "timeout",
            "strategy",
            "max_wait_duration",
            "network",
            "reserved_ip_ranges",
            "labels",
            "encryption_spec_key_name",
            "restart_job_on_worker_restart",
            "base_output_directory",
        )
    }
    assert defaults == {
        "timeout": "43200s",
        "strategy": "SPOT",
        "max_wait_duration": "1800s",
        "network": "projects/123/global/networks/vpc",
        "reserved_ip_ranges": ["range-a"],
        "labels": {"team": "ml"},
        "encryption_spec_key_name": "projects/p/locations/us-central1/keyRings/r/cryptoKeys/k",
        "restart_job_on_worker_restart": True,
        "base_output_directory": "gs://bucket/runs/1",
    }
    pools = params["worker_pool_specs"]["defaultValue"]
    assert [p["machine_spec"] for p in pools] == [
        {
            "machine_type": "a2-highgpu-2g",
            "accelerator_type": "NVIDIA_TESLA_A100",
            "accelerator_count": 2,
        },
        {
            "machine_type": "a2-highgpu-1g",
            "accelerator_type": "NVIDIA_TESLA_A100",
            "accelerator_count": 1,
        },
        {"machine_type": "n1-highcpu-16"},
    ]
    assert [p["replica_count"] for p in pools] == [1, 2, 2]
    assert pools[2]["container_spec"] == {"image_uri": vertex.REDUCTION_SERVER_IMAGE}
    # the trainer's args carry KFP's run uuid and task name: checkpoints under
    # AIP_CHECKPOINT_DIR/<run>/<task>
    assert pools[0]["container_spec"]["args"][-4:] == [
        "--run-id",
        "{{$.pipeline_job_uuid}}",
        "--task-name",
        "{{$.pipeline_task_name}}",
    ]
    tasks = spec["root"]["dag"]["tasks"]
    assert tasks["generic-evaluator"]["inputs"]["artifacts"]["model"]["taskOutputArtifact"] == {
        "outputArtifactKey": "model",
        "producerTask": "generic-trainer",
    }
    assert tasks["generic-evaluator"]["inputs"]["parameters"]["eval_config"] == {
        "componentInputParameter": "eval_config"
    }
    _assert_upload_steps(
        spec, "generic-infra-validator", "generic-trainer", "pipelinechannel--location"
    )
    persistent = _compile(
        vertex_multiworker_pipeline,
        tmp_path,
        evaluate=False,
        replica_count=1,
        persistent_resource_id="my-pool",
    )
    params, _ = _custom_job(persistent)
    assert params["persistent_resource_id"]["defaultValue"] == "my-pool"
    assert set(persistent["root"]["dag"]["tasks"]) == {"importer", "importer-2", "generic-trainer"}


@pytest.mark.parametrize(
    "options, flag, message",
    [
        (
            {"machine_type": "n1-standard-8", "accelerator_type": "NVIDIA_L4"},
            "--machine-type",
            "n1-standard-8 with 1x NVIDIA_L4: n1 machines take",
        ),
        (
            {"machine_type": "g2-standard-8"},
            "--machine-type",
            "g2-standard-8 comes with 1x NVIDIA_L4",
        ),
        (
            {"chief_machine_type": "e2-standard-4", "accelerator_type": "NVIDIA_TESLA_T4"},
            "--chief-machine-type",
            "e2 machines take no accelerators",
        ),
        ({"scheduling_strategy": "PREEMPTIBLE"}, "--scheduling-strategy", "expected one of"),
        ({"reduction_server_count": 1}, "--reduction-server-count", "needs --replica-count >= 2"),
        ({"label": {"Team": "x"}}, "--label", "expected key=value"),
    ],
)
def test_vertex_pipeline_refuses_bad_job_options_before_compiling(options, flag, message):
    from generic_trainer.errors import UserInputError

    with pytest.raises(UserInputError, match=f"^{flag}: .*{message}"):
        vertex_multiworker_pipeline.custom_job_trainer(**options)


def test_vertex_pipeline_warns_when_a_pool_has_blackwell_gpus(caplog):
    """As vertex-job does: a B200 chief over H100 workers needs the Blackwell CUDA image; H100s
    alone do not."""
    h100 = {
        "machine_type": "a3-highgpu-1g",
        "accelerator_type": "NVIDIA_H100_80GB",
        "accelerator_count": 1,
    }
    with caplog.at_level(logging.WARNING, logger="generic_trainer.vertex"):
        vertex_multiworker_pipeline.job_options(2, **h100)
        assert not caplog.records
        opts = vertex_multiworker_pipeline.job_options(
            2,
            **h100,
            chief_machine_type="a4-highgpu-8g",
            chief_accelerator_type="NVIDIA_B200",
            chief_accelerator_count=8,
        )
    assert opts["chief_accelerator_type"] == "NVIDIA_B200"
    assert [r.getMessage() for r in caplog.records] == [vertex_machines.image_note("NVIDIA_B200")]


def test_vertex_pipeline_command_line_names_the_bad_option(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipelines.vertex_multiworker_pipeline",
            "--output",
            str(tmp_path / "v.yaml"),
            "--machine-type",
            "a2-highgpu-8g",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 2
    assert (
        "--machine-type: a2-highgpu-8g: a2-highgpu-8g comes with 8x NVIDIA_TESLA_A100"
        in proc.stderr
    )
    assert not (tmp_path / "v.yaml").exists()
