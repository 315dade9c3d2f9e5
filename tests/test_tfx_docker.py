"""`tfx-pipeline run --docker`: LocalDagRunner and BeamDagRunner run each step in this project's
image with kfp.local's DockerRunner. CI has no docker engine, so these check the wiring with real
kfp objects: the runner kfp.local is given, the host folders it mounts beside the ones kfp.local
mounts itself (DockerTaskHandler's own), the user the containers run as, what is refused by name
before anything is written, and the verb's flags reaching it. The real run of a TFX pipeline file
in the image is images/trainer/smoke.sh's (docs/running/docker.md)."""

import json
import os
from pathlib import Path

import pytest
from conftest import run_cli
from generic_trainer.errors import UserInputError
from generic_trainer.tfx_dsl.steps import OutputRef, ParameterRef, PipelineParameter, Plan, Step


def _plan(tmp_path: Path, module: str, serving: str, trainer_module: str | None = None) -> Plan:
    """Examples from a data folder, a schema imported from inside it, a module file named twice
    (once by a RuntimeParameter), a push destination by its JSON proto, paths inside the root and
    missing ones, a folder dotted module names are imported from."""
    root = tmp_path / "root"
    return Plan(
        name="docker_wiring",
        root=str(root),
        steps=(
            Step(
                "CsvExampleGen",
                "import_examples",
                parameters={"input_pattern": str(tmp_path / "data" / "*.csv"), "format": "csv"},
            ),
            Step(
                "ImportSchemaGen",
                "importer",
                parameters={
                    "artifact_uri": str(tmp_path / "data" / "schema"),
                    "artifact_type": "x",
                },
            ),
            Step(
                "Transform",
                "transform",
                inputs={"examples": OutputRef("CsvExampleGen", "examples")},
                parameters={"module_file": ParameterRef("module_file")},
            ),
            Step(
                "Trainer",
                "trainer",
                inputs={"examples": OutputRef("Transform", "transformed_examples")},
                parameters={
                    "module_file": trainer_module or module,
                    "custom_config": {"vocab": str(root / "vocab"), "gone": "/no-such-dir-d34/x"},
                },
            ),
            Step(
                "Pusher",
                "pusher",
                inputs={"model": OutputRef("Trainer", "model")},
                parameters={
                    "push_destination": json.dumps({"filesystem": {"base_directory": serving}})
                },
            ),
        ),
        parameters=(PipelineParameter("module_file", "str", module),),
        python_path=(str(tmp_path / "pkgs"),),
    )


def _layout(tmp_path: Path) -> tuple[str, str]:
    (tmp_path / "data" / "schema").mkdir(parents=True)
    (tmp_path / "modules").mkdir()
    (tmp_path / "pkgs").mkdir()
    module = tmp_path / "modules" / "utils.py"
    module.write_text("")
    return str(module), str(tmp_path / "serving" / "model")


def test_docker_mode_mounts_what_the_steps_read_and_runs_as_this_user(tmp_path, monkeypatch):
    from docker.types import Mount
    from generic_trainer.tfx_kfp import docker_tasks
    from kfp import local
    from kfp.local import config, docker_task_handler

    module, serving = _layout(tmp_path)
    monkeypatch.chdir(tmp_path)  # the Trainer names its module file relative to it
    plan = _plan(tmp_path, module, serving, trainer_module="modules/utils.py")
    with docker_tasks.docker_run(plan) as mounts:
        runner = config.LocalExecutionConfig.instance.runner
        assert isinstance(runner, local.DockerRunner)
        workspace = config.LocalExecutionConfig.instance.workspace_root
        # what kfp.local mounts itself for every task: the root (same path) and the workspace
        handler = docker_task_handler.DockerTaskHandler(
            "example.com/gt:1", ["generic-trainer", "--help"], plan.root, runner
        )
        kfp_volumes = handler.get_volumes_to_mount()
    assert kfp_volumes == {
        plan.root: {"bind": plan.root, "mode": "rw"},
        workspace: {"bind": "/kfp-workspace", "mode": "rw"},
    }
    assert [(m.path, m.writable, m.why) for m in mounts] == [
        (str(tmp_path / "data"), False, "CsvExampleGen.input_pattern"),
        (str(tmp_path / "modules"), False, "Transform.module_file"),
        (str(tmp_path / "pkgs"), False, "python_path"),
        (str(tmp_path / "serving"), True, "Pusher.push_destination"),
    ]
    args = runner.container_run_args
    assert args["mounts"] == [
        Mount(str(tmp_path / "data"), str(tmp_path / "data"), type="bind", read_only=True),
        Mount(str(tmp_path / "modules"), str(tmp_path / "modules"), type="bind", read_only=True),
        Mount(str(tmp_path / "pkgs"), str(tmp_path / "pkgs"), type="bind", read_only=True),
        Mount(str(tmp_path / "serving"), str(tmp_path / "serving"), type="bind", read_only=False),
    ]
    assert not {m["Target"] for m in args["mounts"]} & {v["bind"] for v in kfp_volumes.values()}
    assert args["user"] == f"{os.getuid()}:{os.getgid()}"
    assert args["environment"] == {"HOME": "/tmp", "PYTHONPATH": str(tmp_path / "pkgs")}
    assert args["working_dir"] == str(tmp_path)  # relative paths read as on the host
    assert os.path.isdir(serving) and not os.listdir(serving)  # the destination, made for it


def test_docker_mode_refuses_a_path_the_container_cannot_see_before_writing(tmp_path):
    from generic_trainer.tfx_kfp import docker_tasks

    _, serving = _layout(tmp_path)
    plan = _plan(tmp_path, "/etc/passwd", serving)
    with pytest.raises(UserInputError) as raised, docker_tasks.docker_run(plan):
        pass
    assert raised.value.input_name == "Transform.module_file"
    assert "/etc/passwd" in str(raised.value) and "hide the image's /etc" in str(raised.value)
    assert not os.path.exists(serving) and not os.path.exists(plan.root)


PIPELINE_FILE = """
import os
from tfx import v1 as tfx

home = os.environ["HOME"]
example_gen = tfx.components.CsvExampleGen(input_base=os.path.join(home, "data"))
trainer = tfx.components.Trainer(
    module_file=os.path.join(home, "utils.py"),
    examples=example_gen.outputs["examples"],
    train_args=tfx.proto.TrainArgs(num_steps=10),
)
pipeline = tfx.dsl.Pipeline(
    pipeline_name="small", pipeline_root=os.path.join(home, "root"),
    components=[example_gen, trainer],
)
tfx.orchestration.LocalDagRunner().run(pipeline)
"""


def test_tfx_pipeline_run_docker_runs_the_image_flags_name_or_says_no_engine(tmp_path):
    """--docker-image names the image, --docker alone takes $GENERIC_TRAINER_IMAGE; with no
    engine at DOCKER_HOST the run stops naming both, exit 2, nothing written."""
    file = tmp_path / "small_pipeline.py"
    file.write_text(PIPELINE_FILE)
    env = {
        "HOME": str(tmp_path),
        "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock",
        "GENERIC_TRAINER_IMAGE": "example.com/env:2",
    }
    for flags, image in (
        (["--docker-image", "example.com/gt:9"], "example.com/gt:9"),
        (["--docker"], "example.com/env:2"),
    ):
        proc = run_cli(["tfx-pipeline", "run", *flags, str(file)], env=env, cwd=str(tmp_path))
        assert proc.returncode == 2, proc.stderr[-3000:]
        assert f"--docker: the steps would run in {image}, but no docker engine answers at" in (
            proc.stderr
        )
        assert f"unix://{tmp_path}/no-engine.sock" in proc.stderr
    assert not (tmp_path / "root").exists()


def test_tfx_pipeline_run_without_kfp_is_exit_2_saying_what_to_install(tmp_path):
    """The image leaves kfp out: a run there (or in a venv without the extra) stops before the
    file runs, naming kfp and the extra to install; nothing is written."""
    import subprocess
    import sys

    from conftest import cli_env

    file = tmp_path / "small_pipeline.py"
    file.write_text(PIPELINE_FILE)
    blocked = (
        "import sys; sys.modules['kfp'] = None; from generic_trainer.cli import main; "
        f"sys.exit(main(['tfx-pipeline', 'run', {str(file)!r}]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", blocked],
        env=cli_env({"HOME": str(tmp_path)}),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "tfx-pipeline run: needs kfp" in proc.stderr
    assert "pip install 'generic-trainer[pipelines]'" in proc.stderr
    assert not (tmp_path / "root").exists()
