"""Multi-worker run_fn training with real processes on 127.0.0.1.

Two workers from a TF_CONFIG and from a Vertex-style CLUSTER_SPEC (under KFP's executor input)
train the bundled example; only the chief writes; both end with the same weights. Two-worker runs
whose chief is SIGKILLed halfway, or whose worker is sent SIGTERM, resume from the chief's backup.
A worker that never comes up makes the other fail within --cluster-timeout. Every process is
bounded in time and killed at the end of its test.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import PENGUIN, REPO, cli_env, free_port

pytestmark = pytest.mark.slow

MW_MODULE = REPO / "tests" / "modules" / "multiworker" / "mw_module.py"
RUN_TIMEOUT = 300  # seconds any one run may take (CI: 2 cores shared by the processes)


class Replicas:
    """Starts `python -m generic_trainer` processes with their own env and log file; kills
    leftovers."""

    def __init__(self, tmp_path: Path):
        self.tmp_path = tmp_path
        self.procs: list[tuple[subprocess.Popen, Path]] = []

    def start(self, name: str, args: list[str], env: dict[str, str]) -> subprocess.Popen:
        tmpdir = (
            self.tmp_path / f"tmp-{name}"
        )  # TMPDIR: the replica's private dirs must be gone afterwards
        tmpdir.mkdir()
        log_path = self.tmp_path / f"{name}.log"
        with open(log_path, "w") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "generic_trainer", *map(str, args)],
                env=cli_env({**env, "TMPDIR": str(tmpdir)}),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.procs.append((proc, log_path))
        return proc

    def wait(
        self, procs: list[subprocess.Popen], timeout: float = RUN_TIMEOUT
    ) -> list[tuple[int, str]]:
        """Exit codes and outputs; a process still running at the deadline is killed and fails the
        test."""
        deadline = time.monotonic() + timeout
        results = []
        for proc in procs:
            try:
                proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.kill_all()
                pytest.fail(f"a replica ran longer than {timeout} s:\n{self.output(proc)[-3000:]}")
            results.append((proc.returncode, self.output(proc)))
        return results

    def output(self, proc: subprocess.Popen) -> str:
        return next(path for p, path in self.procs if p is proc).read_text()

    def kill_all(self) -> None:
        for proc, _ in self.procs:
            if proc.poll() is None:
                proc.kill()  # SIGKILL: TensorFlow's coordination service catches SIGTERM
                proc.wait()


@pytest.fixture
def replicas(tmp_path):
    r = Replicas(tmp_path)
    yield r
    r.kill_all()


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> Path:
    """A data set unlike the penguins: four FLOAT features a..d, label = a + b > 1, two shards per
    split."""
    import numpy as np
    from datagen import write_schema, write_split

    root = tmp_path_factory.mktemp("synthetic")
    rng = np.random.RandomState(0)

    def rows(n):
        for x in rng.rand(n, 4):
            yield {
                **{k: [float(v)] for k, v in zip("abcd", x, strict=True)},
                "label": [int(x[0] + x[1] > 1.0)],
            }

    write_split(str(root / "data"), "train", rows(512), shards=2)
    write_split(str(root / "data"), "eval", rows(128), shards=2)
    write_schema(
        str(root / "schema.pbtxt"),
        {"a": "FLOAT", "b": "FLOAT", "c": "FLOAT", "d": "FLOAT", "label": "INT"},
    )
    return root


def _tf_config(cluster: dict, task_type: str, index: int) -> dict[str, str]:
    return {
        "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}})
    }


def _fingerprint(output: str) -> str:
    found = re.findall(r"final weights fingerprint (\w+)", output)
    assert found, output[-3000:]
    return found[-1]


def _penguin_eval_examples() -> list[bytes]:
    import tensorflow as tf

    files = sorted((PENGUIN / "data" / "Split-eval").glob("*.gz"))
    return [
        r.numpy() for r in tf.data.TFRecordDataset([str(f) for f in files], compression_type="GZIP")
    ]


def _assert_serves_penguins(model_dir: Path) -> None:
    import numpy as np
    import tensorflow as tf

    serve = tf.saved_model.load(str(model_dir / "Format-Serving")).signatures["serving_default"]
    examples = _penguin_eval_examples()
    probabilities = serve(examples=tf.constant(examples))["outputs"].numpy()
    assert probabilities.shape == (len(examples), 3)
    assert np.allclose(probabilities.sum(axis=1), 1.0, atol=1e-4)


PENGUIN_ARGS = [
    "--examples",
    PENGUIN / "data",
    "--module-file",
    PENGUIN / "module.py",
    "--schema",
    PENGUIN / "schema.pbtxt",
    "--cluster-timeout",
    "180",
]


def test_two_workers_from_tf_config_train_the_bundled_example(tmp_path, replicas):
    """The same command on both replicas (as TFJob and Vertex run it); only worker 0, the chief,
    writes."""
    cluster = {"worker": [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]}
    out = tmp_path / "out"
    args = [
        "train",
        *PENGUIN_ARGS,
        "--model-dir",
        out / "model",
        "--metrics-file",
        out / "metrics.json",
        "--train-steps",
        "40",
        "--eval-steps",
        "4",
        "--custom-config",
        '{"epochs": 2}',
    ]
    procs = [replicas.start(f"worker{i}", args, _tf_config(cluster, "worker", i)) for i in range(2)]
    (rc0, chief), (rc1, worker) = replicas.wait(procs)
    assert rc0 == 0, chief[-4000:]
    assert rc1 == 0, worker[-4000:]

    assert "strategy=CollectiveAllReduceStrategy replicas_in_sync=2" in chief, chief[-3000:]
    assert "role=worker:0 (chief)" in chief and "role=worker:1 cluster_source=TF_CONFIG" in worker
    assert re.search(r"Keras 3\.\d+\.\d+: Model.fit/evaluate made multi-worker safe", chief)
    assert _fingerprint(chief) == _fingerprint(worker)  # both workers end with the same weights
    # backups went to the default checkpoint dir, each epoch, and were removed once the model was
    # published
    assert (
        "backup: saved global step 20 (after epoch 1)" in chief
        and "backup: saved global step 40" in chief
    )
    assert not (out / "model" / "logs" / "checkpoints" / "backup").exists()
    assert "worker worker:1 done; the chief publishes the outputs" in worker
    assert "published" not in worker and "saved global step" not in worker

    _assert_serves_penguins(out / "model")
    metrics = json.loads((out / "metrics.json").read_text())
    assert 0.0 <= metrics["accuracy"] <= 1.0 and metrics["loss"] > 0
    for i in range(2):  # private dirs of both replicas are gone
        assert os.listdir(tmp_path / f"tmp-worker{i}") == []


def _executor_input(root: Path, name: str) -> dict:
    def artifact(uri: str, title: str) -> dict:
        return {
            "artifacts": [
                {"name": title, "type": {"schemaTitle": title}, "uri": uri, "metadata": {}}
            ]
        }

    return {
        "inputs": {
            "parameterValues": {
                "module_file": str(PENGUIN / "module.py"),
                "train_args": {"num_steps": 40.0},
                "eval_args": {"num_steps": 4.0},
                "custom_config": {"epochs": 2.0},
            },
            "artifacts": {
                "examples": artifact(str(PENGUIN / "data"), "system.Dataset"),
                "schema": artifact(str(PENGUIN / "schema.pbtxt"), "system.Artifact"),
            },
        },
        "outputs": {
            "artifacts": {
                "model": artifact(str(root / name / "model"), "system.Model"),
                "model_run": artifact(str(root / name / "model_run"), "system.Artifact"),
                "metrics": artifact(str(root / name / "metrics"), "system.Metrics"),
            },
            "outputFile": str(root / name / "executor_output.json"),
        },
    }


def test_two_workers_from_a_vertex_cluster_spec_under_kfp(tmp_path, replicas):
    """Vertex pools (workerpool0 chief, workerpool1 worker), the KFP executor input,
    AIP_CHECKPOINT_DIR.

    Each replica is given its own output locations so that anything a worker wrote would show.
    """
    cluster = {
        "workerpool0": [f"127.0.0.1:{free_port()}"],
        "workerpool1": [f"127.0.0.1:{free_port()}"],
    }
    checkpoints = tmp_path / "base" / "checkpoints"
    procs = []
    for pool, name in (("workerpool0", "chief"), ("workerpool1", "worker")):
        spec = {
            "cluster": cluster,
            "environment": "cloud",
            "task": {"type": pool, "index": 0, "trial": ""},
        }
        env = {"CLUSTER_SPEC": json.dumps(spec), "AIP_CHECKPOINT_DIR": f"{checkpoints}/"}
        args = [
            "train",
            "--executor-input",
            json.dumps(_executor_input(tmp_path, name)),
            "--cluster-timeout",
            "180",
        ]
        procs.append(replicas.start(name, args, env))
    (rc0, chief), (rc1, worker) = replicas.wait(procs)
    assert rc0 == 0, chief[-4000:]
    assert rc1 == 0, worker[-4000:]

    assert "role=chief:0 (chief) cluster_source=CLUSTER_SPEC workers=2" in chief, chief[-3000:]
    assert "role=worker:0 cluster_source=CLUSTER_SPEC" in worker
    assert _fingerprint(chief) == _fingerprint(worker)
    # AIP_CHECKPOINT_DIR wins over the model_run artifact for checkpoints
    assert f"to {checkpoints}/backup/ckpt-20" in chief, chief[-3000:]
    assert not (tmp_path / "chief" / "model_run" / "checkpoints").exists()

    output = json.loads((tmp_path / "chief" / "executor_output.json").read_text())
    model = output["artifacts"]["model"]["artifacts"][0]
    assert model["metadata"]["num_replicas"] == 2 and model["metadata"]["train_steps"] == 40
    assert "accuracy" in output["artifacts"]["metrics"]["artifacts"][0]["metadata"]
    _assert_serves_penguins(tmp_path / "chief" / "model")
    assert not (tmp_path / "worker").exists()  # no model, model_run, metrics or executor output
    assert os.listdir(tmp_path / "tmp-chief") == [] and os.listdir(tmp_path / "tmp-worker") == []


def _mw_args(
    data: Path, model_dir: Path, checkpoint_dir: Path, result_dir: Path, *extra: str
) -> list:
    config = {"result_dir": str(result_dir), "step_sleep": 0.2, "epochs": 4}
    return [
        "train",
        "--examples",
        data / "data",
        "--schema",
        data / "schema.pbtxt",
        "--module-file",
        MW_MODULE,
        "--model-dir",
        model_dir,
        "--metrics-file",
        model_dir / "metrics.json",
        "--checkpoint-dir",
        checkpoint_dir,
        "--train-steps",
        "40",
        "--eval-steps",
        "8",
        "--custom-config",
        json.dumps(config),
        "--keras",
        "keras3",
        *extra,
        # Keras 3 unless `extra` says --keras tf_keras (the module imports tfx_bsl: auto gives
        # tf_keras)
    ]


def _wait_for_backup(
    state_file: Path, min_step: int, procs: list[subprocess.Popen], replicas: Replicas
) -> int:
    """The global step of the first backup at or past `min_step` (the runs sleep 0.2 s per step)."""
    deadline = time.monotonic() + RUN_TIMEOUT
    while time.monotonic() < deadline:
        if state_file.is_file():
            step = json.loads(state_file.read_text())["global_step"]
            if step >= min_step:
                return step
        for proc in procs:
            assert proc.poll() is None, f"exited early:\n{replicas.output(proc)[-3000:]}"
        time.sleep(0.05)
    pytest.fail(f"no backup at step >= {min_step} in {state_file} within {RUN_TIMEOUT} s")


def _result(result_dir: Path, name: str) -> dict:
    return json.loads((result_dir / f"{name}.json").read_text())


@pytest.mark.e2e
def test_sigkill_halfway_then_the_same_command_resumes(tmp_path, replicas, synthetic):
    """Two workers of a Keras 3 module; the chief is SIGKILLed after 2 of 4 epochs (a lost VM).

    The other worker notices and exits 5 instead of hanging; the same two commands again train only
    the rest, from the chief's backup, and end as good as a run never killed.
    """
    cluster = {"worker": [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]}
    ckpt = tmp_path / "ckpt"
    baseline_results = tmp_path / "baseline-results"
    baseline = replicas.start(
        "baseline",
        _mw_args(synthetic, tmp_path / "baseline", tmp_path / "baseline-ckpt", baseline_results),
        {},
    )

    def start(round_: str) -> list[subprocess.Popen]:
        return [
            replicas.start(
                f"{round_}{i}",
                _mw_args(
                    synthetic,
                    tmp_path / "model",
                    ckpt,
                    tmp_path / round_,
                    "--cluster-timeout",
                    "180",
                ),
                _tf_config(cluster, "worker", i),
            )
            for i in range(2)
        ]

    first = start("first")
    saved = _wait_for_backup(ckpt / "backup" / "state.json", 20, first, replicas)
    first[0].send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    (rc0, _), (rc1, worker) = replicas.wait(first, timeout=120)
    assert rc0 == -signal.SIGKILL and rc1 == 5, worker[-4000:]
    assert (
        time.monotonic() - killed_at < 90
    )  # noticed through the lost connection / missed heartbeats
    assert "train failed: lost contact with another replica while training" in worker, worker[
        -3000:
    ]
    assert f"it resumes from the last backup in {ckpt}" in worker
    assert 20 <= saved < 40 and not (tmp_path / "model" / "Format-Serving").exists()
    saved = json.loads((ckpt / "backup" / "state.json").read_text())["global_step"]

    second = start("second")
    (rc0, chief), (rc1, worker), (rc_base, base_output) = replicas.wait([*second, baseline])
    assert rc0 == 0, chief[-4000:]
    assert rc1 == 0, worker[-4000:]
    assert rc_base == 0, base_output[-4000:]
    assert f"backup: resuming from {ckpt}/backup/ckpt-{saved}: global step {saved}" in chief, chief[
        -3000:
    ]
    assert (
        f"fit done at global step 40 ({40 - saved} steps in this run, resumed from step {saved})"
        in chief
    )
    resumed, other = (
        _result(tmp_path / "second", "worker-0"),
        _result(tmp_path / "second", "worker-1"),
    )
    reference = _result(baseline_results, "chief-0")
    assert resumed["keras"] == "keras" and resumed["iterations"] == other["iterations"] == 40
    assert (resumed["resumed_from"], resumed["steps_this_run"]) == (saved, 40 - saved)
    assert resumed["weights_sha256"] == other["weights_sha256"]
    assert (reference["iterations"], reference["resumed_from"], reference["steps_this_run"]) == (
        40,
        None,
        40,
    )

    # as good as the uninterrupted run, on the same eval data
    accuracy = json.loads((tmp_path / "model" / "metrics.json").read_text())["accuracy"]
    reference_accuracy = json.loads((tmp_path / "baseline" / "metrics.json").read_text())[
        "accuracy"
    ]
    assert reference_accuracy > 0.75
    assert accuracy >= reference_accuracy - 0.08, (accuracy, reference_accuracy)
    assert not (
        ckpt / "backup"
    ).exists()  # published: the backup is gone, the same command would start afresh


@pytest.mark.e2e
def test_sigterm_saves_exits_143_and_the_restart_resumes(tmp_path, replicas, synthetic):
    """tf_keras module, chief + worker from TF_CONFIG: SIGTERM to the worker stops both at one step.

    The chief saves that step; both exit 143; the same commands again resume from it.
    """
    ports = [free_port(), free_port()]
    cluster = {"chief": [f"127.0.0.1:{ports[0]}"], "worker": [f"127.0.0.1:{ports[1]}"]}
    ckpt = tmp_path / "ckpt"
    roles = (("chief", 0), ("worker", 0))

    def start(round_: str) -> list[subprocess.Popen]:
        return [
            replicas.start(
                f"{round_}-{t}",
                _mw_args(
                    synthetic,
                    tmp_path / "model",
                    ckpt,
                    tmp_path / round_,
                    "--keras",
                    "tf_keras",
                    "--cluster-timeout",
                    "180",
                ),
                _tf_config(cluster, t, i),
            )
            for t, i in roles
        ]

    first = start("first")
    _wait_for_backup(ckpt / "backup" / "state.json", 10, first, replicas)
    first[1].send_signal(
        signal.SIGTERM
    )  # the worker is preempted; the chief learns it at the next step
    (rc0, chief), (rc1, worker) = replicas.wait(first, timeout=120)
    assert rc0 == 143, chief[-4000:]
    assert rc1 == 143, worker[-4000:]
    state = json.loads((ckpt / "backup" / "state.json").read_text())
    saved = state["global_step"]
    # 10 when the worker got SIGTERM before its epoch-1 end (saved once); the replicas compare notes
    # about
    # once a second (5 steps here), and at every epoch end, so the stop comes within the epoch
    assert 10 <= saved <= 20, state
    assert f"preempted: SIGTERM received; saved global step {saved} to {ckpt}/backup" in chief
    assert f"preempted: SIGTERM received; the chief saved global step {saved}" in worker
    assert "SIGTERM received: saving a checkpoint after the current step" in worker
    assert not (tmp_path / "model" / "Format-Serving").exists()

    second = start("second")
    (rc0, chief), (rc1, worker) = replicas.wait(second)
    assert rc0 == 0, chief[-4000:]
    assert rc1 == 0, worker[-4000:]
    assert (
        f"backup: resuming from {ckpt}/backup/ckpt-{saved}" in chief and "resuming from" in worker
    )
    lead, other = _result(tmp_path / "second", "chief-0"), _result(tmp_path / "second", "worker-0")
    assert lead["keras"] == "tf_keras" and lead["is_chief"] and not other["is_chief"]
    assert lead["iterations"] == other["iterations"] == 40
    assert lead["resumed_from"] == other["resumed_from"] == saved
    assert lead["steps_this_run"] == 40 - saved
    assert lead["weights_sha256"] == other["weights_sha256"]
    assert (tmp_path / "model" / "Format-Serving" / "saved_model.pb").is_file()


def test_a_worker_that_never_comes_up_fails_the_others_within_the_cluster_timeout(
    tmp_path, replicas, synthetic
):
    """Worker 0 (the leader) alone, and worker 1 alone: each exits 5 with a message naming who is
    missing."""
    procs, ports = [], {}
    for index in (0, 1):
        ports[index] = [free_port(), free_port()]
        cluster = {"worker": [f"127.0.0.1:{p}" for p in ports[index]]}
        args = _mw_args(
            synthetic,
            tmp_path / f"model{index}",
            tmp_path / f"ckpt{index}",
            tmp_path / "r",
            "--cluster-timeout",
            "5",
        )
        procs.append(replicas.start(f"alone{index}", args, _tf_config(cluster, "worker", index)))
    (rc0, leader), (rc1, worker) = replicas.wait(procs, timeout=180)
    for rc, output in ((rc0, leader), (rc1, worker)):
        assert rc == 5, output[-4000:]
        assert "did not form within 5 s (--cluster-timeout)" in output, output[-3000:]
        waited = re.search(
            r"(\d\d:\d\d:\d\d),\d+ INFO generic_trainer.fit.cluster: connecting", output
        )
        failed = re.search(r"(\d\d:\d\d:\d\d),\d+ ERROR generic_trainer: train failed", output)
        assert waited and failed, output[-3000:]
        seconds = [
            int(h) * 3600 + int(m) * 60 + int(s)
            for h, m, s in (t.split(":") for t in (waited.group(1), failed.group(1)))
        ]
        assert seconds[1] - seconds[0] <= 5 + 30  # TensorFlow's deadline, not the 60 s watchdog
    assert f"worker:1 (127.0.0.1:{ports[0][1]}) never connected to worker:0" in leader
    assert (
        f"worker:1 could not register with the leader worker:0 at 127.0.0.1:{ports[1][0]}" in worker
    )
    assert not (tmp_path / "model0").exists() and not (tmp_path / "model1").exists()


def test_keras_3_fit_that_cannot_run_on_two_workers_stops_before_its_first_step(
    tmp_path, replicas, synthetic
):
    """compile(steps_per_execution=4) of a Keras 3 module: both workers exit 3 naming what to do
    instead."""
    cluster = {"worker": [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]}
    config = json.dumps({"steps_per_execution": 4})
    args = [
        "train",
        "--examples",
        synthetic / "data",
        "--schema",
        synthetic / "schema.pbtxt",
        "--module-file",
        MW_MODULE,
        "--model-dir",
        tmp_path / "model",
        "--custom-config",
        config,
        "--cluster-timeout",
        "180",
        "--keras",
        "keras3",
    ]
    procs = [replicas.start(f"worker{i}", args, _tf_config(cluster, "worker", i)) for i in range(2)]
    for rc, output in replicas.wait(procs):
        assert rc == 3, output[-4000:]
        assert (
            "Keras 3 fit/evaluate with steps_per_execution=4 cannot run under "
            "MultiWorkerMirroredStrategy" in output
        ), output[-3000:]
        assert "--keras tf_keras" in output and "training: " not in output  # no step ran
    assert not (tmp_path / "model" / "Format-Serving").exists()
