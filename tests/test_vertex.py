"""Vertex AI: `generic-trainer vertex-job` builds the CustomJob the SDK sends (only the network call
is replaced), and the container does what Vertex expects of it: AIP_* output dirs, gs:// URIs read
through the /gcs mount (configurable root), executor output from the chief only."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import shutil
import sys
from pathlib import Path

import pytest
from conftest import PENGUIN, REPO, free_port, run_cli
from generic_trainer import cli, vertex, vertex_machines
from generic_trainer.errors import UserInputError

IMAGE = "us-central1-docker.pkg.dev/my-proj/generic-trainer/trainer:0123abc"
BASE = [
    "vertex-job",
    "--project",
    "my-proj",
    "--region",
    "us-central1",
    "--image",
    IMAGE,
    "--base-output-dir",
    "gs://my-bucket/runs/7",
]
TRAIN_ARGS = [
    "--examples",
    "gs://my-bucket/data",
    "--module-file",
    "gs://my-bucket/code/module.py",
    "--train-steps",
    "1000",
]


def _pool(
    replicas: int, args: list[str], machine: dict, disk_gb: int = 100, env: list | None = None
) -> dict:
    container = {"imageUri": IMAGE, "command": ["generic-trainer"], "args": args}
    if env:
        container["env"] = env
    return {
        "containerSpec": container,
        "diskSpec": {"bootDiskSizeGb": disk_gb, "bootDiskType": "pd-ssd"},
        "machineSpec": machine,
        "replicaCount": str(replicas),
    }


def _dry_run(capsys, argv: list[str]) -> dict:
    """Run `argv` (a vertex-job command line) with --dry-run; returns the printed request."""
    split = argv.index("--")
    assert cli.main([*argv[:split], "--dry-run", *argv[split:]]) == 0
    return json.loads(capsys.readouterr().out)


def test_dry_run_prints_the_full_multi_worker_job(capsys):
    spec = _dry_run(
        capsys,
        [
            *BASE,
            "--replica-count",
            "3",
            "--machine-type",
            "n1-standard-8",
            "--accelerator-type",
            "NVIDIA_TESLA_T4",
            "--accelerator-count",
            "2",
            "--service-account",
            "trainer@my-proj.iam.gserviceaccount.com",
            "--tensorboard",
            "projects/my-proj/locations/us-central1/tensorboards/42",
            "--env",
            "TF_USE_LEGACY_KERAS=1",
            "--restart-job-on-worker-restart",
            "--display-name",
            "penguin run 7",
            "--",
            *TRAIN_ARGS,
        ],
    )
    machine = {
        "machineType": "n1-standard-8",
        "acceleratorType": "NVIDIA_TESLA_T4",
        "acceleratorCount": 2,
    }
    args = ["train", *TRAIN_ARGS]
    env = [{"name": "TF_USE_LEGACY_KERAS", "value": "1"}]
    assert spec == {
        "parent": "projects/my-proj/locations/us-central1",
        "customJob": {
            "displayName": "penguin run 7",
            "jobSpec": {
                "workerPoolSpecs": [
                    _pool(1, args, machine, env=env),
                    _pool(2, args, machine, env=env),
                ],
                "baseOutputDirectory": {"outputUriPrefix": "gs://my-bucket/runs/7"},
                "serviceAccount": "trainer@my-proj.iam.gserviceaccount.com",
                "tensorboard": "projects/my-proj/locations/us-central1/tensorboards/42",
                "scheduling": {"restartJobOnWorkerRestart": True},
            },
        },
    }


def test_a_blackwell_gpu_warns_that_the_image_needs_the_blackwell_cuda_libraries(capsys):
    assert (
        cli.main(
            [
                *BASE,
                "--machine-type",
                "a4-highgpu-8g",
                "--accelerator-type",
                "NVIDIA_B200",
                "--accelerator-count",
                "8",
                "--dry-run",
                "--",
                *TRAIN_ARGS,
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    machine = json.loads(captured.out)["customJob"]["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]
    assert machine == {
        "machineType": "a4-highgpu-8g",
        "acceleratorType": "NVIDIA_B200",
        "acceleratorCount": 8,
    }
    assert (
        "NVIDIA_B200 is a Blackwell GPU: the image must carry CUDA >= 12.8 and cuDNN >= 9.7 "
        "libraries; the default GPU image has 12.5 / 9.3, so build it with --build-arg "
        "CUDA_LOCK=cuda-blackwell.lock"
    ) in " ".join(captured.err.split())
    assert (
        cli.main(
            [
                *BASE,
                "--machine-type",
                "a3-highgpu-1g",
                "--accelerator-type",
                "NVIDIA_H100_80GB",
                "--accelerator-count",
                "1",
                "--dry-run",
                "--",
                *TRAIN_ARGS,
            ]
        )
        == 0
    )
    assert "CUDA_LOCK" not in capsys.readouterr().err  # Hopper and older: the default image serves


def test_dry_run_single_replica_cpu_tune_job(capsys):
    spec = _dry_run(
        capsys,
        [
            *BASE,
            "--boot-disk-size-gb",
            "200",
            "--",
            "tune",
            "--examples",
            "gs://b/d",
            "--module-file",
            "m.py",
            "--max-trials",
            "8",
            "--best-hyperparameters-dir",
            "gs://b/hp",
        ],
    )
    assert spec["customJob"] == {
        "displayName": "generic-trainer-tune",
        "jobSpec": {
            "workerPoolSpecs": [
                _pool(
                    1,
                    [
                        "tune",
                        "--examples",
                        "gs://b/d",
                        "--module-file",
                        "m.py",
                        "--max-trials",
                        "8",
                        "--best-hyperparameters-dir",
                        "gs://b/hp",
                    ],
                    {"machineType": "n1-standard-4"},
                    disk_gb=200,
                )
            ],
            "baseOutputDirectory": {"outputUriPrefix": "gs://my-bucket/runs/7"},
        },
    }


@pytest.mark.parametrize(
    "extra, rest, flag",
    [
        (["--replica-count", "0"], TRAIN_ARGS, "--replica-count"),
        (["--replica-count", "two"], TRAIN_ARGS, "--replica-count"),
        (["--accelerator-count", "2"], TRAIN_ARGS, "--accelerator-count"),
        (
            ["--accelerator-type", "NVIDIA_L4", "--accelerator-count", "0"],
            TRAIN_ARGS,
            "--accelerator-count",
        ),
        (["--tensorboard", "projects/p/locations/l/tensorboards/1"], TRAIN_ARGS, "--tensorboard"),
        (["--env", "1BAD=x"], TRAIN_ARGS, "--env"),
        ([], [], "--"),
        ([], ["evaluate", "--examples", "x"], "--"),
        ([], ["--executor-input", "{}"], "--"),
    ],
)
def test_bad_flags_name_the_flag(capsys, extra, rest, flag):
    code = cli.main([*BASE, *extra, "--dry-run", "--", *rest])
    assert code == 2
    captured = capsys.readouterr()  # the CLI logs to stderr
    assert f"vertex-job failed: {flag}: " in captured.err
    assert captured.out == ""


@pytest.mark.parametrize(
    "rest, message",
    [
        (["--train-steps", "-5"], "-- train: --train-steps: expected a whole number of steps >= 0"),
        (["--train-steps=inf"], "-- train: --train-steps: expected a whole number"),
        (["--eval-steps", "1e400"], "-- train: --eval-steps: expected a whole number"),
        (["--train-stepz", "5"], "-- train: unknown flags --train-stepz"),
        (["--custom-confg", '{"token": "TYPO-S3CRET"}'], "-- train: unknown flags --custom-confg"),
        (["--bogus=1", "--also"], "-- train: unknown flags --bogus, --also"),
        (["--train-steps"], "-- train: argument --train-steps: expected one argument"),
        (["--custom-config", '{"epochs": 2'], "-- train: --custom-config: not valid JSON"),
        (["--custom-config", "[1, 2]"], "-- train: --custom-config: expected a JSON object"),
        (
            ["--custom-config", '{"a": ' * 500 + "1" + "}" * 500],
            "-- train: --custom-config: nested deeper than the limit",
        ),
        (
            ["--custom-config", '{"secret_keys": 7}'],
            "-- train: --custom-config: secret_keys: expected a key name",
        ),
        (["--train-splits", "../etc"], "-- train: --train-splits:"),
        (["--strategy", "tpu"], "-- train: argument --strategy: invalid choice"),
        (["--mixed-precision", "fp8"], "-- train: argument --mixed-precision: invalid choice"),
        (
            ["--task", "t.py:T"],
            "-- train: --task: give either --task module:Class or --module-file",
        ),
        (["--help"], "-- train: --help is not an argument for a job"),
    ],
)
def test_container_args_are_checked_by_the_trainers_parser_before_the_job_is_built(
    capsys, rest, message
):
    """What the container would refuse (exit 2) is refused here, naming the argument, before any job
    exists."""
    assert cli.main([*BASE, "--dry-run", "--", *TRAIN_ARGS, *rest]) == 2
    captured = capsys.readouterr()
    assert f"vertex-job failed: {message}" in captured.err, captured.err[-1500:]
    assert "the container's arguments" in captured.err and captured.out == ""
    assert "S3CRET" not in captured.err and "Traceback" not in captured.err


@pytest.mark.parametrize(
    "rest, message",
    [
        (
            ["tune", "--examples", "gs://b/d", "--module-file", "m.py"],
            "-- tune: --best-hyperparameters-dir: required",
        ),
        (
            [
                "tune",
                "--examples",
                "gs://b/d",
                "--module-file",
                "m.py",
                "--best-hyperparameters-dir",
                "gs://b/h",
                "--max-trials",
                "-1",
            ],
            "-- tune: --max-trials: expected a whole number",
        ),
        (
            [
                "tune",
                "--examples",
                "gs://b/d",
                "--module-file",
                "m.py",
                "--best-hyperparameters-dir",
                "gs://b/h",
                "--strategy",
                "multi_worker_mirrored",
            ],
            "-- tune: argument --strategy: invalid choice",
        ),
        (["--module-file", "gs://b/m.py"], "-- train: --examples: required"),
        (["--examples", "gs://b/d"], "-- train: --module-file: required"),
        (
            ["--task", "t.py:T", "--params-override", "trainer.train_steps=[[["],
            "-- train: --params-override: not valid",
        ),
        (
            ["--task", "t.py:T", "--params-override", "{a: &a [*a]}"],
            "-- train: --params-override: the alias *a",
        ),
        (["--task", "t.py:T", "--mode", "fit"], "-- train: argument --mode: invalid choice"),
        (
            ["--task", "t.py:T", "--keras", "tf_keras"],
            "-- train: --keras: the Task API runs Keras 3",
        ),
    ],
)
def test_container_args_of_tune_and_task_runs_are_checked(capsys, rest, message):
    assert cli.main([*BASE, "--dry-run", "--", *rest]) == 2
    assert f"vertex-job failed: {message}" in capsys.readouterr().err


def test_container_args_checks_read_no_file_and_see_the_jobs_env(capsys):
    """Paths are the container's (read there, not here); --env reaches the checks as the container's
    environment."""
    ok = [
        "--examples",
        "gs://nowhere/d",
        "--module-file",
        "gs://nowhere/m.py",
        "--hyperparameters",
        "gs://no/hp.txt",
        "--schema",
        "/not/here/schema.pbtxt",
        "--metrics-file",
        "/not/here/m.json",
    ]
    spec = _dry_run(capsys, [*BASE, "--", *ok])
    assert spec["customJob"]["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"] == [
        "train",
        *ok,
    ]
    task = ["--task", "gs://b/t.py:T", "--config-file", "gs://b/missing.yaml"]
    assert _dry_run(capsys, [*BASE, "--", *task])
    assert (
        cli.main(
            [
                *BASE,
                "--env",
                "TF_USE_LEGACY_KERAS=1",
                "--dry-run",
                "--",
                "tune",
                "--examples",
                "gs://b/d",
                "--module-file",
                "m.py",
                "--best-hyperparameters-dir",
                "gs://b/h",
            ]
        )
        == 2
    )
    assert (
        "-- tune: TF_USE_LEGACY_KERAS: keras-tuner searches Keras 3 models only"
        in capsys.readouterr().err
    )


def test_a_missing_image_or_a_local_base_output_dir_is_exit_2_naming_the_flag(capsys):
    assert (
        cli.main(
            [
                "vertex-job",
                "--project",
                "p",
                "--region",
                "r",
                "--base-output-dir",
                "gs://b/x",
                "--dry-run",
                "--",
                *TRAIN_ARGS,
            ]
        )
        == 2
    )
    assert "--image: required" in capsys.readouterr().err
    assert cli.main([*BASE[:-1], "/local/dir", "--dry-run", "--", *TRAIN_ARGS]) == 2
    assert "--base-output-dir: expected a gs:// URI" in capsys.readouterr().err


def test_without_google_cloud_aiplatform_vertex_job_is_exit_2_saying_what_to_install(
    monkeypatch, capsys
):
    for name in [m for m in sys.modules if m.startswith("google.cloud.aiplatform")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(
        sys.modules, "google.cloud.aiplatform", None
    )  # what an image without it gives
    import google.cloud

    monkeypatch.delattr(google.cloud, "aiplatform", raising=False)
    assert cli.main([*BASE, "--dry-run", "--", *TRAIN_ARGS]) == 2
    captured = capsys.readouterr()
    assert "vertex-job: needs google-cloud-aiplatform" in captured.err
    assert "pip install 'generic-trainer[pipelines]'" in captured.err
    assert captured.out == ""


def test_help_does_not_import_aiplatform():
    import subprocess

    code = (
        "import sys; from generic_trainer import cli\n"
        "try:\n    cli.main(['vertex-job', '--help'])\nexcept SystemExit:\n    pass\n"
        "assert 'google.cloud.aiplatform' not in sys.modules, 'imported'"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "--replica-count" in proc.stdout and "--dry-run" in proc.stdout


@pytest.fixture()
def service_account_key(tmp_path, monkeypatch):
    """A real (self-generated) service-account key as Application Default Credentials: google.auth
    resolves it without the network, so everything but the API call itself is real."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from google.cloud.aiplatform import initializer

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    path = tmp_path / "key.json"
    path.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": "my-proj",
                "private_key_id": "1",
                "private_key": pem,
                "client_email": "launcher@my-proj.iam.gserviceaccount.com",
                "client_id": "1",
                "token_uri": "https://oauth2.googleapis.com/token",
            }
        )
    )
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
    monkeypatch.setattr(initializer.global_config, "_credentials", None)
    return path


def test_submit_sends_exactly_the_dry_run_job(capsys, monkeypatch, service_account_key):
    from google.cloud.aiplatform_v1.services.job_service import JobServiceClient
    from google.protobuf import json_format

    argv = [
        *BASE,
        "--replica-count",
        "2",
        "--service-account",
        "trainer@my-proj.iam.gserviceaccount.com",
        "--",
        *TRAIN_ARGS,
    ]
    expected = _dry_run(capsys, argv)
    calls = []

    def create_custom_job(
        self, parent, custom_job, timeout=None, **kwargs
    ):  # the only part not run for real
        calls.append(
            {
                "parent": parent,
                "customJob": json_format.MessageToDict(type(custom_job).pb(custom_job)),
                "credentials": self._transport._credentials,
                "host": self._transport._host,
            }
        )
        created = type(custom_job).deserialize(type(custom_job).serialize(custom_job))
        created.name = f"{parent}/customJobs/5551212"
        return created

    monkeypatch.setattr(JobServiceClient, "create_custom_job", create_custom_job)
    assert cli.main(argv) == 0
    assert len(calls) == 1
    call = calls[0]
    assert {"parent": call["parent"], "customJob": call["customJob"]} == expected
    assert call["credentials"].service_account_email == "launcher@my-proj.iam.gserviceaccount.com"
    assert call["host"].startswith("us-central1-aiplatform.googleapis.com")
    out = json.loads(capsys.readouterr().out)
    assert out["name"] == "projects/my-proj/locations/us-central1/customJobs/5551212"
    assert out["console"].endswith("/locations/us-central1/training/5551212?project=my-proj")


def test_submit_reports_api_errors_clearly(monkeypatch, capsys, service_account_key):
    from google.api_core import exceptions
    from google.cloud.aiplatform_v1.services.job_service import JobServiceClient

    def denied(self, parent, custom_job, timeout=None, **kwargs):
        raise exceptions.PermissionDenied("aiplatform.customJobs.create denied on my-proj")

    monkeypatch.setattr(JobServiceClient, "create_custom_job", denied)
    assert cli.main([*BASE, "--", *TRAIN_ARGS]) == 2
    assert (
        "Vertex AI: creating the custom job failed: PermissionDenied: aiplatform.customJobs.create "
        "denied" in capsys.readouterr().err
    )


# --- inside the container: what Vertex hands each replica
# -------------------------------------------------

TINY_MODULE = '''
"""Test module: records the dirs it was given, fits y = 2x on synthetic numbers, exports a
SavedModel."""
import json, os
import keras, numpy as np

def train_tiny(fn_args):
    seen = {k: getattr(fn_args, k) for k in ("serving_model_dir", "model_run_dir", "checkpoint_dir",
                                            "is_chief", "task_type", "num_workers")}
    seen["train_files"] = list(fn_args.train_files)
    seen["custom_config"] = fn_args.custom_config
    with open(os.path.join(fn_args.model_run_dir, "fn_args_seen.json"), "w") as f:
        json.dump(seen, f)
    x = np.linspace(-1, 1, 32, dtype="float32").reshape(-1, 1)
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    model.fit(x, 2 * x, epochs=fn_args.custom_config.get("epochs", 1), validation_data=(x, 2 * x),
              callbacks=[keras.callbacks.TensorBoard(log_dir=fn_args.model_run_dir)], verbose=0)
    model.export(fn_args.serving_model_dir)
'''


def _gcs_with_examples(tmp_path: Path) -> Path:
    root = tmp_path / "gcs"
    shutil.copytree(PENGUIN / "data", root / "my-bucket" / "data")
    return root


def _chief_cluster_spec() -> str:
    return json.dumps(
        {
            "cluster": {"workerpool0": [f"127.0.0.1:{free_port()}"]},
            "environment": "cloud",
            "task": {"type": "workerpool0", "index": 0, "trial": ""},
        }
    )


@pytest.mark.slow
def test_vertex_job_chief_runs_with_aip_dirs_under_the_gcs_mount(tmp_path, capsys):
    """The container command vertex-job builds, run as Vertex runs its chief: AIP_* from the base
    dir."""
    module = tmp_path / "tiny.py"
    module.write_text(TINY_MODULE)
    gcs = _gcs_with_examples(tmp_path)
    spec = _dry_run(
        capsys,
        [
            *BASE,
            "--",
            "--examples",
            "gs://my-bucket/data",
            "--module-file",
            str(module),
            "--run-fn",
            "train_tiny",
            "--custom-config",
            '{"epochs": 2}',
        ],
    )
    container = spec["customJob"]["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]
    assert container["command"] == ["generic-trainer"]
    base = "gs://my-bucket/runs/7"
    env = {
        "AIP_MODEL_DIR": f"{base}/model/",
        "AIP_CHECKPOINT_DIR": f"{base}/checkpoints/",
        "AIP_TENSORBOARD_LOG_DIR": f"{base}/logs/",
        "CLUSTER_SPEC": _chief_cluster_spec(),
        "GENERIC_TRAINER_GCS_ROOT": str(gcs),
    }
    proc = run_cli(container["args"], env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = gcs / "my-bucket" / "runs" / "7"
    assert (out / "model" / "Format-Serving" / "saved_model.pb").is_file()
    assert list((out / "logs" / "train").glob("events.out.tfevents.*"))
    seen = json.loads((out / "logs" / "fn_args_seen.json").read_text())
    assert seen["checkpoint_dir"] == str(out / "checkpoints") and (out / "checkpoints").is_dir()
    assert seen["model_run_dir"] == str(out / "logs")
    assert seen["is_chief"] is True and seen["task_type"] == "chief" and seen["num_workers"] == 1
    assert all(
        f.startswith(str(gcs / "my-bucket" / "data" / "Split-train")) for f in seen["train_files"]
    )
    summary = json.loads(
        proc.stdout[proc.stdout.rindex("\n{") + 1 :]
    )  # after what Keras' export printed
    assert summary["serving_model_dir"] == str(out / "model" / "Format-Serving")
    assert "cluster_source=CLUSTER_SPEC" in proc.stderr


@pytest.mark.slow
def test_pipeline_custom_job_chief_writes_executor_output_with_gs_uris(tmp_path):
    """The trainer as GCPC's custom job runs it in a Vertex pipeline: the component's command with
    an executor input of gs:// URIs, AIP_* set from the base output dir, a CLUSTER_SPEC naming the
    chief."""
    module = tmp_path / "tiny.py"
    module.write_text(TINY_MODULE)
    gcs = _gcs_with_examples(tmp_path)
    task = "gs://my-bucket/pipeline_root/run-1/generic-trainer"

    def artifact(name: str, title: str, uri: str) -> dict:
        return {
            "artifacts": [
                {
                    "name": f"projects/p/artifacts/{name}",
                    "type": {"schemaTitle": title},
                    "uri": uri,
                    "metadata": {},
                }
            ]
        }

    output_file = (
        gcs / "my-bucket" / "pipeline_root" / "run-1" / "generic-trainer" / "executor_output.json"
    )
    executor_input = {
        "inputs": {
            # GCPC's wrapper hands the container its own inputs too; its `strategy` is the job's
            # scheduling one
            "parameterValues": {
                "module_file": str(module),
                "run_fn": "train_tiny",
                "strategy": "SPOT",
                "worker_pool_specs": [{"replica_count": 1}],
                "timeout": "604800s",
                "module_sha256": "",
                "custom_config": {"epochs": 2.0, "api_key": "zzz-secret"},
            },
            "artifacts": {
                "examples": artifact("examples", "system.Dataset", "gs://my-bucket/data")
            },
        },
        "outputs": {
            "artifacts": {
                "model": artifact("model", "system.Model", f"{task}/model"),
                "model_run": artifact("model_run", "system.Artifact", f"{task}/model_run"),
                "metrics": artifact("metrics", "system.Metrics", f"{task}/metrics"),
                "report": artifact("report", "system.HTML", f"{task}/report"),
            },
            "parameters": {
                name: {"outputFile": f"{task}/{name}"}
                for name in (
                    "serving_model_uri",
                    "serving_container_image",
                    "instance_schema_uri",
                    "prediction_schema_uri",
                )
            },
            "outputFile": str(output_file),
        },
    }
    import yaml

    component = yaml.safe_load((REPO / "components" / "trainer" / "component.yaml").read_text())
    args = next(iter(component["deploymentSpec"]["executors"].values()))["container"]["args"]
    resolved = {
        "{{$}}": json.dumps(executor_input),
        "{{$.outputs.output_file}}": str(output_file),
        "{{$.pipeline_job_uuid}}": "4711",
        "{{$.pipeline_task_name}}": "generic-trainer",
    }
    args = [resolved.get(a, a) for a in args]
    base = "gs://my-bucket/base"
    env = {
        "AIP_MODEL_DIR": f"{base}/model/",
        "AIP_CHECKPOINT_DIR": f"{base}/checkpoints/",
        "AIP_TENSORBOARD_LOG_DIR": f"{base}/logs/",
        "CLUSTER_SPEC": _chief_cluster_spec(),
    }
    proc = run_cli([*args, "--gcs-root", str(gcs)], env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    task_dir = gcs / "my-bucket" / "pipeline_root" / "run-1" / "generic-trainer"
    # The artifacts KFP named win over AIP_MODEL_DIR / AIP_TENSORBOARD_LOG_DIR; the checkpoint dir
    # comes from AIP,
    # namespaced by the pipeline run and task.
    assert (task_dir / "model" / "Format-Serving" / "saved_model.pb").is_file()
    assert not (gcs / "my-bucket" / "base" / "model").exists()
    seen = json.loads((task_dir / "model_run" / "fn_args_seen.json").read_text())
    assert seen["checkpoint_dir"] == str(
        gcs / "my-bucket" / "base" / "checkpoints" / "4711" / "generic-trainer"
    )
    assert seen["custom_config"] == {"epochs": 2, "api_key": "zzz-secret"}
    report = (task_dir / "report").read_text()
    assert "<svg" in report and "zzz-secret" not in report and "zzz-secret" not in proc.stderr
    written = json.loads(output_file.read_text())
    assert set(written["artifacts"]) == {"model", "model_run", "metrics", "report"}
    model = written["artifacts"]["model"]["artifacts"][0]
    assert model["uri"] == f"{task}/model"  # URIs go back to KFP, not the local /gcs paths
    assert (
        "serving_default" in model["metadata"]["signature_names"]
    )  # model.export adds "serve" too
    # What Vertex AI Model Registry needs: the serving container (Vertex has prebuilt images for
    # TensorFlow 2.1 to 2.15; a newer TensorFlow gets the newest older one, said in the log), and
    # for an importer of google.UnmanagedContainerModel the SavedModel's URI.
    tf_minor = int(importlib.metadata.version("tensorflow").split(".")[1])
    image = f"us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-{min(tf_minor, 15)}:latest"
    assert model["metadata"]["containerSpec"] == {"imageUri": image}
    no_prebuilt = f"no prebuilt Vertex AI prediction image for TensorFlow 2.{tf_minor}"
    assert (no_prebuilt in proc.stderr) == (tf_minor > 15)
    schemata = {
        "instanceSchemaUri": f"{task}/model/schemata/instance.yaml",
        "predictionSchemaUri": f"{task}/model/schemata/prediction.yaml",
    }
    assert model["metadata"]["predictSchemata"] == schemata
    assert written["parameterValues"] == {
        "serving_model_uri": f"{task}/model/Format-Serving",
        "serving_container_image": image,
        "instance_schema_uri": schemata["instanceSchemaUri"],
        "prediction_schema_uri": schemata["predictionSchemaUri"],
    }
    # the tiny model: one float input of shape (None, 1) and one output of the same shape
    one_float = {
        "type": "array",
        "items": {"type": "number", "format": "float"},
        "minItems": 1,
        "maxItems": 1,
    }
    instance = yaml.safe_load((task_dir / "model" / "schemata" / "instance.yaml").read_text())
    assert instance["title"] == "Instance" and list(instance["properties"].values()) == [one_float]
    prediction = yaml.safe_load((task_dir / "model" / "schemata" / "prediction.yaml").read_text())
    assert prediction["type"] == "object" and list(prediction["properties"].values()) == [one_float]
    assert {"loss", "train_loss"} <= set(
        written["artifacts"]["metrics"]["artifacts"][0]["metadata"]
    )


def test_non_chief_replica_never_writes_the_executor_output(tmp_path, monkeypatch):
    """A worker (CLUSTER_SPEC workerpool1) finishes without writing the executor output; the chief
    would."""
    from generic_trainer import train
    from generic_trainer.artifacts.results import TrainResult
    from generic_trainer.fit import cluster

    spec = {
        "cluster": {"workerpool0": ["10.0.0.2:2222"], "workerpool1": ["10.0.0.3:2222"]},
        "environment": "cloud",
        "task": {"type": "workerpool1", "index": 0, "trial": ""},
    }
    worker = cluster.resolve({"CLUSTER_SPEC": json.dumps(spec)})
    assert (worker.task_type, worker.is_chief, worker.num_workers) == ("worker", False, 2)
    chief = cluster.resolve(
        {"CLUSTER_SPEC": json.dumps({**spec, "task": {"type": "workerpool0", "index": 0}})}
    )
    assert chief.is_chief

    ran = []

    # train.run as a worker ends it (no collective peers here to train with; only the chief calls
    # before_publish)
    def worker_run(request, before_publish=None):
        ran.append(request)
        return TrainResult(
            is_chief=cluster.resolve().is_chief,
            model_dir=request.model_dir,
            serving_model_dir="",
            metrics={},
            model_info={},
            strategy="MultiWorkerMirrored",
            num_replicas=2,
            train_steps=1,
        )

    monkeypatch.setitem(cli.VERBS, "train", dataclasses.replace(train.VERB, run=worker_run))
    monkeypatch.setenv("CLUSTER_SPEC", json.dumps(spec))
    monkeypatch.setenv("TF_USE_LEGACY_KERAS", "0")  # the CLI sets it; restore it afterwards
    output_file = tmp_path / "executor_output.json"
    executor_input = {
        "inputs": {
            "parameterValues": {"module_file": "m.py"},
            "artifacts": {"examples": {"artifacts": [{"uri": str(PENGUIN / "data")}]}},
        },
        "outputs": {
            "artifacts": {"model": {"artifacts": [{"name": "m", "uri": str(tmp_path / "m")}]}},
            "outputFile": str(output_file),
        },
    }
    assert (
        cli.main(
            [
                "train",
                "--executor-input",
                json.dumps(executor_input),
                "--executor-output-file",
                str(output_file),
            ]
        )
        == 0
    )
    assert len(ran) == 1 and ran[0].kfp is not None
    assert not output_file.exists()


def test_replicas_become_a_chief_pool_and_a_worker_pool_with_the_same_container():
    values = {
        "project": "p",
        "region": "r",
        "image": "i",
        "base_output_dir": "gs://b/x/",
        "replica_count": "4",
        "boot_disk_size_gb": "100",
        "container_args": ["--", "--examples", "e", "--module-file", "m.py"],
    }
    options = vertex.VERB.build(values)
    assert options.base_output_dir == "gs://b/x" and options.staging_bucket == "gs://b"
    pools = vertex.worker_pool_specs(options)
    assert [p["replica_count"] for p in pools] == [1, 3]
    assert pools[0]["container_spec"] == pools[1]["container_spec"]
    assert pools[0]["container_spec"]["args"] == [
        "train",
        "--examples",
        "e",
        "--module-file",
        "m.py",
    ]
    with pytest.raises(UserInputError, match="--"):
        vertex.VERB.build({**values, "container_args": ["--"]})


# --- production options: scheduling, network, encryption, pools
# -------------------------------------------

KMS = "projects/my-proj/locations/us-central1/keyRings/ring/cryptoKeys/key"


def test_dry_run_with_every_production_option(capsys):
    spec = _dry_run(
        capsys,
        [
            *BASE,
            "--replica-count",
            "3",
            "--machine-type",
            "a2-highgpu-1g",
            "--accelerator-type",
            "NVIDIA_TESLA_A100",
            "--chief-machine-type",
            "a2-highgpu-2g",
            "--chief-accelerator-count",
            "2",
            "--reduction-server-count",
            "2",
            "--reduction-server-machine-type",
            "n1-highcpu-32",
            "--scheduling-strategy",
            "spot",
            "--timeout",
            "12h",
            "--max-wait-duration",
            "30m",
            "--restart-job-on-worker-restart",
            "--network",
            "projects/123/global/networks/vpc",
            "--reserved-ip-range",
            "range-a",
            "--reserved-ip-range",
            "range-b",
            "--label",
            "team=ml",
            "--label",
            "run=penguin-7",
            "--encryption-spec-key-name",
            KMS,
            "--",
            *TRAIN_ARGS,
        ],
    )
    args = ["train", *TRAIN_ARGS]
    worker = {
        "machineType": "a2-highgpu-1g",
        "acceleratorType": "NVIDIA_TESLA_A100",
        "acceleratorCount": 1,
    }
    chief = {
        "machineType": "a2-highgpu-2g",
        "acceleratorType": "NVIDIA_TESLA_A100",
        "acceleratorCount": 2,
    }
    reducers = {
        "containerSpec": {"imageUri": vertex.REDUCTION_SERVER_IMAGE},
        "machineSpec": {"machineType": "n1-highcpu-32"},
        "replicaCount": "2",
    }
    assert spec == {
        "parent": "projects/my-proj/locations/us-central1",
        "customJob": {
            "displayName": "generic-trainer-train",
            "labels": {"team": "ml", "run": "penguin-7"},
            "encryptionSpec": {"kmsKeyName": KMS},
            "jobSpec": {
                "workerPoolSpecs": [_pool(1, args, chief), _pool(2, args, worker), reducers],
                "baseOutputDirectory": {"outputUriPrefix": "gs://my-bucket/runs/7"},
                "network": "projects/123/global/networks/vpc",
                "reservedIpRanges": ["range-a", "range-b"],
                "scheduling": {
                    "timeout": "43200s",
                    "restartJobOnWorkerRestart": True,
                    "strategy": "SPOT",
                    "maxWaitDuration": "1800s",
                },
            },
        },
    }


def test_dry_run_flex_start_on_a_persistent_resource_cpu_chief(capsys):
    spec = _dry_run(
        capsys,
        [
            *BASE,
            "--replica-count",
            "2",
            "--machine-type",
            "g2-standard-24",
            "--accelerator-type",
            "NVIDIA_L4",
            "--accelerator-count",
            "2",
            "--chief-machine-type",
            "n2-highmem-16",
            "--chief-accelerator-type",
            "none",
            "--persistent-resource-id",
            "my-pool",
            "--timeout",
            "3600",
            "--",
            *TRAIN_ARGS,
        ],
    )
    job = spec["customJob"]
    assert job["jobSpec"]["persistentResourceId"] == "my-pool"
    assert job["jobSpec"]["scheduling"] == {"timeout": "3600s"}
    assert [p["machineSpec"] for p in job["jobSpec"]["workerPoolSpecs"]] == [
        {"machineType": "n2-highmem-16"},
        {"machineType": "g2-standard-24", "acceleratorType": "NVIDIA_L4", "acceleratorCount": 2},
    ]
    flex = _dry_run(
        capsys,
        [
            *BASE,
            "--scheduling-strategy",
            "FLEX_START",
            "--max-wait-duration",
            "0",
            "--",
            *TRAIN_ARGS,
        ],
    )
    assert flex["customJob"]["jobSpec"]["scheduling"] == {
        "strategy": "FLEX_START",
        "maxWaitDuration": "0s",
    }


@pytest.mark.parametrize(
    "extra, flag, message",
    [
        (
            ["--machine-type", "n2-standard-8", "--accelerator-type", "NVIDIA_TESLA_T4"],
            "--machine-type",
            "n2-standard-8 with 1x NVIDIA_TESLA_T4: n2 machines take no accelerators",
        ),
        (
            ["--machine-type", "n1-standard-8", "--accelerator-type", "NVIDIA_TESLA_A100"],
            "--machine-type",
            "n1-standard-8 with 1x NVIDIA_TESLA_A100: n1 machines take NVIDIA_TESLA_T4",
        ),
        (
            [
                "--machine-type",
                "n1-standard-8",
                "--accelerator-type",
                "NVIDIA_TESLA_T4",
                "--accelerator-count",
                "3",
            ],
            "--machine-type",
            "n1 machines take NVIDIA_TESLA_T4 in counts 1, 2, 4",
        ),
        (
            ["--machine-type", "a2-highgpu-2g", "--accelerator-type", "NVIDIA_TESLA_A100"],
            "--machine-type",
            "a2-highgpu-2g comes with 2x NVIDIA_TESLA_A100; give accelerator type "
            "NVIDIA_TESLA_A100 and count 2",
        ),
        (
            ["--machine-type", "a3-highgpu-8g"],
            "--machine-type",
            "a3-highgpu-8g comes with 8x NVIDIA_H100_80GB",
        ),
        (
            ["--machine-type", "g2-standard-48", "--accelerator-type", "NVIDIA_L4"],
            "--machine-type",
            "g2-standard-48 comes with 4x NVIDIA_L4",
        ),
        (
            ["--machine-type", "zz9-standard-4"],
            "--machine-type",
            "unknown machine type 'zz9-standard-4'; known: n1-",
        ),
        (
            ["--accelerator-type", "NVIDIA_TESLA_T5"],
            "--accelerator-type",
            "unknown accelerator 'NVIDIA_TESLA_T5'",
        ),
        (["--accelerator-type", "TPU_V3"], "--accelerator-type", "TPUs are not supported"),
        (
            ["--chief-machine-type", "n2-standard-8", "--accelerator-type", "NVIDIA_TESLA_T4"],
            "--chief-machine-type",
            "n2-standard-8 with 1x NVIDIA_TESLA_T4: n2 machines take no accelerators",
        ),
        (
            ["--scheduling-strategy", "CHEAP"],
            "--scheduling-strategy",
            "expected one of STANDARD, SPOT, FLEX_START",
        ),
        (["--timeout", "soon"], "--timeout", "expected a duration such as 3600, 90m, 2h or 7d"),
        (["--timeout", "0"], "--timeout", "expected a duration"),
        (
            ["--network", "vpc"],
            "--network",
            "expected projects/PROJECT_NUMBER/global/networks/NAME",
        ),
        (["--reserved-ip-range", "r"], "--reserved-ip-range", "needs --network"),
        (["--label", "Team=ML"], "--label", "expected key=value in lowercase"),
        (
            ["--encryption-spec-key-name", "my-key"],
            "--encryption-spec-key-name",
            "expected projects/P/locations/L",
        ),
        (
            ["--encryption-spec-key-name", KMS.replace("us-central1", "europe-west4")],
            "--encryption-spec-key-name",
            "the key is in europe-west4, the job in us-central1",
        ),
        (
            ["--persistent-resource-id", "projects/p/locations/l/persistentResources/x"],
            "--persistent-resource-id",
            "expected the resource's id",
        ),
        (
            ["--persistent-resource-id", "pool", "--scheduling-strategy", "SPOT"],
            "--persistent-resource-id",
            "--scheduling-strategy SPOT does not apply",
        ),
        (
            ["--reduction-server-count", "1"],
            "--reduction-server-count",
            "needs --replica-count >= 2 and --accelerator",
        ),
        (["--reduction-server-image", "x"], "--reduction-server-count", "required with"),
    ],
)
def test_bad_production_options_name_the_flag(capsys, extra, flag, message):
    assert cli.main([*BASE, *extra, "--dry-run", "--", *TRAIN_ARGS]) == 2
    captured = capsys.readouterr()
    assert f"vertex-job failed: {flag}: " in captured.err and message in captured.err, captured.err
    assert captured.out == ""


def test_unknown_machine_family_passes_when_allowed(capsys):
    spec = _dry_run(
        capsys,
        [
            *BASE,
            "--machine-type",
            "zz9-standard-4",
            "--allow-unknown-machine-type",
            "--",
            *TRAIN_ARGS,
        ],
    )
    assert spec["customJob"]["jobSpec"]["workerPoolSpecs"][0]["machineSpec"] == {
        "machineType": "zz9-standard-4"
    }


# --- the serving container the model artifact names for Vertex AI Model Registry
# --------------------------


def test_serving_image_from_the_tensorflow_version_and_accelerator(caplog):
    from generic_trainer.artifacts import serving_container

    choose = serving_container.choose_image
    assert choose("2.12.1") == "us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-12:latest"
    assert (
        choose("2.15.0", "gpu", "europe")
        == "europe-docker.pkg.dev/vertex-ai/prediction/tf2-gpu.2-15:latest"
    )
    with caplog.at_level("WARNING"):
        assert (
            choose("2.19.0", "gpu", "asia")
            == "asia-docker.pkg.dev/vertex-ai/prediction/tf2-gpu.2-15:latest"
        )
    assert "no prebuilt Vertex AI prediction image for TensorFlow 2.19.0" in caplog.text
    assert serving_container.model_registry_metadata("img:1") == {
        "containerSpec": {"imageUri": "img:1"}
    }
    assert serving_container.kfp_parameters(
        "gs://b/run/model/",
        "Format-Serving",
        "img:1",
        declared=("serving_model_uri", "instance_schema_uri"),
    ) == {"serving_model_uri": "gs://b/run/model/Format-Serving", "instance_schema_uri": ""}
    assert serving_container.model_registry_metadata("img:1", "gs://b/m", ["instance.yaml"]) == {
        "containerSpec": {"imageUri": "img:1"},
        "predictSchemata": {"instanceSchemaUri": "gs://b/m/schemata/instance.yaml"},
    }
    assert serving_container.openapi_schema(
        "Instance", {"examples": "string(None,)", "x": "float32(None, 3)"}
    ) == {
        "title": "Instance",
        "type": "object",
        "required": ["examples", "x"],
        "properties": {
            "examples": {"type": "string"},
            "x": {
                "type": "array",
                "items": {"type": "number", "format": "float"},
                "minItems": 3,
                "maxItems": 3,
            },
        },
    }
    assert (
        serving_container.openapi_schema("Instance", {"x": "float32<unknown>"}) is None
    )  # unknown rank
    assert serving_container.check_options(None, None, None) == (None, "cpu", "us")
    for args, flag in (
        ((None, "tpu", None), "--serving-accelerator"),
        ((None, None, "mars"), "--serving-image-region"),
        (("not an image", None, None), "--serving-image"),
    ):
        with pytest.raises(UserInputError, match=f"^{flag}: "):
            serving_container.check_options(*args)


def test_the_blackwell_note_points_to_a_section_that_exists():
    note = vertex_machines.image_note("NVIDIA_B200")
    page = (REPO / vertex_machines.IMAGE_PAGE).read_text()
    assert vertex_machines.IMAGE_PAGE in note and vertex_machines.IMAGE_SECTION in note
    assert f"\n## {vertex_machines.IMAGE_SECTION}\n" in page
    assert "CUDA_LOCK=cuda-blackwell.lock" in page
