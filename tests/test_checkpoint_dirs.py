"""Where checkpoints go, so that a retried task resumes and a new run never does.

In a pipeline run the components pass KFP's run uuid and task name (`--run-id`, `--task-name`), and
a checkpoint base dir (the `checkpoint_dir` parameter or $AIP_CHECKPOINT_DIR) gets `<run>/<task>`
appended. The end-to-end test runs two pipelines at once with kfp.local (pipelines/host_runner.py:
kfp's own placeholder resolution and retry loop, the container command as a host process) on one
base dir; the first attempt of each trainer is SIGKILLed after a backup, kfp.local retries it, and
the retry resumes its own run's backup.
"""

# No `from __future__ import annotations`: kfp reads the pipeline functions' annotations as types.
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import PENGUIN, REPO, cli_env, run_cli
from generic_trainer.errors import UserInputError
from generic_trainer.intake.fit_request import build_train_request, build_tune_request


def _train(tmp_path: Path, environ: dict, **values) -> str:
    base = {
        "examples": str(PENGUIN / "data"),
        "module_file": "m.py",
        "model_dir": str(tmp_path / "model"),
    }
    return build_train_request({**base, **values}, environ=environ).checkpoint_dir


def test_checkpoint_base_dirs_are_namespaced_by_run_and_task(tmp_path):
    aip = {
        "AIP_CHECKPOINT_DIR": "gs://b/base/checkpoints/",
        "GENERIC_TRAINER_GCS_ROOT": str(tmp_path / "gcs"),
    }
    run = {"run_id": "1234abcd", "task_name": "generic-trainer"}
    gcs = tmp_path / "gcs" / "b" / "base" / "checkpoints"
    assert _train(tmp_path, aip, **run) == str(gcs / "1234abcd" / "generic-trainer")
    assert _train(tmp_path, aip, run_id="5678", task_name="generic-trainer") != _train(
        tmp_path, aip, **run
    )
    assert _train(tmp_path, aip) == str(gcs)  # a custom job without a pipeline: the dir Vertex gave
    assert _train(tmp_path, {}, checkpoint_dir=str(tmp_path / "ck"), **run) == str(
        tmp_path / "ck" / "1234abcd" / "generic-trainer"
    )
    assert _train(tmp_path, {}, checkpoint_dir=str(tmp_path / "ck")) == str(tmp_path / "ck")
    # no base dir: inside this task's own model-run output, which no other run shares
    assert _train(tmp_path, {}, **run) == str(tmp_path / "model" / "logs" / "checkpoints")
    # a placeholder the runner left unresolved is no run id
    assert _train(
        tmp_path, aip, run_id="{{$.pipeline_job_uuid}}", task_name="{{$.pipeline_task_name}}"
    ) == str(gcs)
    tune = build_tune_request(
        {
            "examples": str(PENGUIN / "data"),
            "module_file": "m.py",
            "best_hyperparameters_dir": str(tmp_path / "best"),
            **run,
        },
        environ=aip,
    )
    assert tune.checkpoint_dir == str(gcs / "1234abcd" / "generic-trainer")
    assert tune.working_dir == str(gcs / "1234abcd" / "generic-trainer" / "tuner")


def test_a_bad_run_id_is_named(tmp_path):
    with pytest.raises(UserInputError, match="--run-id: expected a name of letters"):
        _train(tmp_path, {"AIP_CHECKPOINT_DIR": str(tmp_path)}, run_id="../../etc", task_name="t")
    with pytest.raises(UserInputError, match="--task-name"):
        _train(tmp_path, {"AIP_CHECKPOINT_DIR": str(tmp_path)}, run_id="r", task_name="a/b")


# A run_fn that trains 5 epochs with the runtime's backup callback. Its first attempt (per run)
# waits
# until the other run's first attempt is running too, then SIGKILLs itself after epoch 3's backup.
MODULE = textwrap.dedent("""
    import json, os, signal, time
    import keras, numpy as np

    class _KillOnFirstAttempt(keras.callbacks.Callback):
        def __init__(self, marker):
            super().__init__()
            self.marker = marker

        def on_epoch_end(self, epoch, logs=None):  # after the backup callback saved this epoch
            if epoch == 2 and not os.path.exists(self.marker):
                open(self.marker, "w").close()
                os.kill(os.getpid(), signal.SIGKILL)

    def run_fn(fn_args):
        cfg = fn_args.custom_config
        shared = cfg["shared"]
        first = not os.path.exists(os.path.join(shared, cfg["name"] + ".killed"))
        if first:  # both runs train at the same time on one checkpoint base dir
            open(os.path.join(shared, cfg["name"] + ".started"), "w").close()
            deadline = time.time() + 600
            while not os.path.exists(os.path.join(shared, cfg["other"] + ".started")):
                assert time.time() < deadline, "the other run never started"
                time.sleep(0.2)
        x = np.linspace(-1, 1, 64, dtype="float32").reshape(-1, 1)
        model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss="mse")
        backup = fn_args.backup_and_restore
        model.fit(x, 2 * x, epochs=5, batch_size=16, verbose=0,
                  callbacks=[backup,
                             _KillOnFirstAttempt(os.path.join(shared, cfg["name"] + ".killed"))])
        with open(os.path.join(shared, cfg["name"] + ".json"), "w") as f:
            json.dump({"checkpoint_dir": fn_args.checkpoint_dir,
                       "resumed_from": backup.resumed_from, "global_step": backup.global_step}, f)
        model.export(fn_args.serving_model_dir)
""")

# One kfp.local pipeline run: import the examples, train with one retry. argv: root, module, base,
# name, other.
RUN_PIPELINE = textwrap.dedent("""
    import json, os, sys
    sys.path.insert(0, {repo!r})
    from kfp import components, dsl
    from kfp.dsl import Dataset
    from pipelines.host_runner import host_runner

    root, module, base, shared, name, other = sys.argv[1:7]
    trainer = components.load_component_from_file(
        os.path.join({repo!r}, "components", "trainer", "component.yaml"))

    @dsl.pipeline(name="checkpoint-" + name)
    def pipeline(examples_uri: str) -> dsl.Model:
        examples = dsl.importer(artifact_uri=examples_uri, artifact_class=Dataset)
        task = trainer(examples=examples.output, module_file=module, checkpoint_dir=base,
                       custom_config={{"shared": shared, "name": name, "other": other}})
        task.set_retry(num_retries=1, backoff_duration="0s")
        return task.outputs["model"]

    env = {{"PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
           "TF_CPP_MIN_LOG_LEVEL": "2", "TF_CONFIG": "", "CLUSTER_SPEC": ""}}
    with host_runner(root, env=env, timeout_s=600):
        out = pipeline(examples_uri={examples!r})
    print("MODEL " + json.dumps({{"path": out.output.path}}))
""")


@pytest.mark.slow
@pytest.mark.e2e
def test_two_concurrent_runs_on_one_base_dir_and_a_sigkilled_task_retried_by_kfp_local(tmp_path):
    module = tmp_path / "module.py"
    module.write_text(MODULE)
    script = tmp_path / "run_pipeline.py"
    script.write_text(RUN_PIPELINE.format(repo=str(REPO), examples=str(PENGUIN / "data")))
    base, shared = tmp_path / "checkpoints", tmp_path / "shared"
    shared.mkdir()
    procs = {}
    for name, other in (("a", "b"), ("b", "a")):
        args = [
            sys.executable,
            str(script),
            str(tmp_path / f"root-{name}"),
            str(module),
            str(base),
            str(shared),
            name,
            other,
        ]
        log = open(tmp_path / f"{name}.log", "w")
        procs[name] = (
            subprocess.Popen(args, cwd=REPO, env=cli_env(), stdout=log, stderr=subprocess.STDOUT),
            log,
        )
    deadline = time.monotonic() + 1200
    for name, (proc, log) in procs.items():
        proc.wait(timeout=max(deadline - time.monotonic(), 1))
        log.close()
        text = (tmp_path / f"{name}.log").read_text()
        assert proc.returncode == 0, text[-6000:]
    seen = {name: json.loads((shared / f"{name}.json").read_text()) for name in procs}
    dirs = {name: Path(s["checkpoint_dir"]) for name, s in seen.items()}
    assert dirs["a"] != dirs["b"]
    for name, directory in dirs.items():
        # <base>/<run uuid>/<task name>: kfp.local's run id, the same for both attempts of the task
        assert directory.parent.parent == base and directory.name == "generic-trainer", directory
        assert directory.parent.name.isdigit()
        text = (tmp_path / f"{name}.log").read_text()
        assert text.count("[host-runner]") == 2, text[-4000:]  # killed, then retried by kfp.local
        # the retry resumed its own run's backup: 3 epochs of 4 steps, then 2 more
        assert seen[name]["resumed_from"] == 12 and seen[name]["global_step"] == 20, seen[name]
        assert f"backup: resuming from {directory}" in text
        model = json.loads(text[text.rindex("MODEL ") + len("MODEL ") :].splitlines()[0])
        assert (Path(model["path"]) / "Format-Serving" / "saved_model.pb").is_file()


TASK_FILE = Path(__file__).parent / "task_modules" / "linear_task.py"


@pytest.mark.slow
@pytest.mark.e2e
def test_a_task_run_over_its_own_finished_checkpoint_trains_and_exports_nothing_and_says_so(
    tmp_path,
):
    from datagen import write_schema, write_split

    rows = [{"x1": [i / 64], "x2": [1 - i / 64], "target": [2 * i / 64]} for i in range(64)]
    write_split(str(tmp_path / "examples"), "train", rows)
    write_split(str(tmp_path / "examples"), "eval", rows[:16])
    schema = write_schema(
        str(tmp_path / "schema.pbtxt"), {"x1": "FLOAT", "x2": "FLOAT", "target": "FLOAT"}
    )
    args = [
        "train",
        "--task",
        f"{TASK_FILE}:LinearTask",
        "--examples",
        str(tmp_path / "examples"),
        "--schema",
        schema,
        "--model-dir",
        str(tmp_path / "model"),
        "--checkpoint-dir",
        str(tmp_path / "ck"),
        "--run-id",
        "run1",
        "--task-name",
        "trainer",
        "--params-override",
        "trainer.train_steps=8",
    ]
    first = run_cli(args, timeout=600)
    assert first.returncode == 0, first.stderr[-4000:]
    saved = tmp_path / "model" / "Format-Serving" / "saved_model.pb"
    stamp = saved.stat().st_mtime_ns
    assert (tmp_path / "ck" / "run1" / "trainer").is_dir()
    again = run_cli(args, timeout=600)  # e.g. the task retried after it had published
    assert again.returncode == 0, again.stderr[-4000:]
    assert "already holds a finished run" in again.stderr and "exporting nothing" in again.stderr
    assert "training from step" not in again.stderr
    assert saved.stat().st_mtime_ns == stamp  # not exported again
    summary = json.loads(again.stdout[again.stdout.rindex('{\n  "serving_model_dir"') :])
    assert summary["serving_model_dir"] == str(saved.parent)
    # a new run on the same base dir starts from step 0
    fresh = run_cli(
        [*args[:-6], "--run-id", "run2", "--task-name", "trainer", *args[-2:]], timeout=600
    )
    assert fresh.returncode == 0, fresh.stderr[-4000:]
    assert (
        "training from step 0 to 8" in fresh.stderr
        and "already holds a finished run" not in fresh.stderr
    )
    assert saved.stat().st_mtime_ns != stamp
    os.remove(saved)  # and with no published model, a finished checkpoint is exported, saying so
    third = run_cli(args, timeout=600)
    assert third.returncode == 0, third.stderr[-4000:]
    assert "exporting the serving model from that checkpoint" in third.stderr and saved.is_file()
