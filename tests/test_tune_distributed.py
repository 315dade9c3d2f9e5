"""Distributed tuning: a chief serving the keras-tuner oracle and workers running trials, on
127.0.0.1.

Real processes with CLUSTER_SPEC (Vertex's form) or TF_CONFIG; real gRPC between them. Shows the
trials spread over the replicas, and the chief giving up (not hanging) when a worker is killed.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import PENGUIN, cli_env, free_port
from generic_trainer.errors import ClusterError, UserInputError
from generic_trainer.fit import cluster as cluster_lib
from generic_trainer.tuning import oracle_server, tuner_cluster

ARGS = [
    "tune",
    "--examples",
    PENGUIN / "data",
    "--module-file",
    PENGUIN / "module.py",
    "--schema",
    PENGUIN / "schema.pbtxt",
    "--train-steps",
    "30",
    "--eval-steps",
    "5",
]


def _start(args: list, env: dict[str, str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "generic_trainer", *map(str, args)],
        env=cli_env(env),
        stdout=open(log.with_suffix(".out"), "w"),
        stderr=open(log, "w"),
    )


def _stop_all(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
    for p in procs:
        p.wait(30)


def _summary(stdout: str) -> dict:
    return json.loads(
        stdout[stdout.index("\n{\n") + 1 if "\n{\n" in stdout else stdout.index("{") :]
    )


# --------------------------------------------------------------------------------------------
# Roles (no TensorFlow)
# --------------------------------------------------------------------------------------------


def test_roles_from_cluster_spec_and_tf_config():
    spec = {
        "cluster": {
            "workerpool0": ["10.0.0.2:2222"],
            "workerpool1": ["10.0.0.3:2222", "10.0.0.4:2222"],
        },
        "environment": "cloud",
        "task": {"type": "workerpool0", "index": 0},
    }
    chief = tuner_cluster.resolve_role(cluster_lib.resolve({"CLUSTER_SPEC": json.dumps(spec)}))
    assert chief.distributed and chief.serves_oracle and chief.bind_address == "0.0.0.0:2222"
    assert chief.tuner_id == "tuner-primary" and chief.remote_tuner_ids == (
        "tuner-worker-0",
        "tuner-worker-1",
    )
    spec["task"] = {"type": "workerpool1", "index": 1}
    worker = tuner_cluster.resolve_role(cluster_lib.resolve({"CLUSTER_SPEC": json.dumps(spec)}))
    assert not worker.serves_oracle and (worker.oracle_host, worker.oracle_port) == (
        "10.0.0.2",
        2222,
    )
    assert worker.tuner_id == "tuner-worker-1" and worker.num_replicas == 3
    # keras-tuner: only the oracle's host may have "chief" in its id.
    assert all("chief" not in r.tuner_id for r in (chief, worker))

    # No chief in TF_CONFIG: worker 0 serves, on loopback when the cluster is local.
    tf_config = {
        "cluster": {"worker": ["127.0.0.1:7001", "127.0.0.1:7002"]},
        "task": {"type": "worker", "index": 0},
    }
    first = tuner_cluster.resolve_role(cluster_lib.resolve({"TF_CONFIG": json.dumps(tf_config)}))
    assert (
        first.serves_oracle
        and first.bind_address == "127.0.0.1:7001"
        and first.remote_tuner_ids == ("tuner-worker-1",)
    )
    alone = tuner_cluster.resolve_role(cluster_lib.resolve({}))
    assert not alone.distributed and alone.serves_oracle and alone.tuner_id == "tuner0"

    tf_config = {"cluster": {"chief": ["h:1"], "ps": ["h:2"]}, "task": {"type": "ps", "index": 0}}
    with pytest.raises(UserInputError, match="chief and worker replicas only"):
        tuner_cluster.resolve_role(cluster_lib.resolve({"TF_CONFIG": json.dumps(tf_config)}))


# --------------------------------------------------------------------------------------------
# The worker deadline, in process: a real oracle served over gRPC, a real client and heartbeats
# --------------------------------------------------------------------------------------------


def test_heartbeats_keep_a_long_trial_alive_and_silence_past_the_deadline_fails(
    tmp_path, monkeypatch
):
    import keras_tuner
    from keras_tuner.src.distribute.oracle_client import OracleClient

    hp = keras_tuner.HyperParameters()
    hp.Int("units", 1, 100)
    oracle = keras_tuner.oracles.RandomSearchOracle(
        objective=keras_tuner.Objective("score", "max"), max_trials=5, hyperparameters=hp
    )
    oracle._set_project_dir(str(tmp_path), "p")
    port = free_port()
    role = tuner_cluster.TunerRole(
        distributed=True,
        serves_oracle=True,
        tuner_id="tuner-primary",
        oracle_host="127.0.0.1",
        oracle_port=port,
        remote_tuner_ids=("tuner-worker-0",),
    )
    server = oracle_server.OracleServer(
        oracle, role, worker_timeout=1.0, state_dir=str(tmp_path)
    ).start()
    try:
        monkeypatch.setenv("KERASTUNER_ORACLE_IP", "127.0.0.1")
        monkeypatch.setenv("KERASTUNER_ORACLE_PORT", str(port))
        monkeypatch.setenv("KERASTUNER_TUNER_ID", "tuner-worker-0")
        client = OracleClient(oracle)
        trial = client.create_trial("tuner-worker-0")
        assert trial.status == "RUNNING" and "tuner-worker-0" in oracle.ongoing_trials
        beat = oracle_server.Heartbeat("127.0.0.1", port, interval_s=0.2).start()
        beat.trial_id = trial.trial_id
        time.sleep(3)  # a trial much longer than the deadline, with heartbeats
        server.check()
        assert server.failure is None
        beat.stop()  # the worker is gone
        time.sleep(2)
        with pytest.raises(
            ClusterError,
            match=r"worker tuner-worker-0 has not been heard from for \d+ s while "
            rf"running trial {trial.trial_id} \(--worker-timeout 1 s\)",
        ):
            server.check()
    finally:
        server.stop()


# --------------------------------------------------------------------------------------------
# Chief + two workers as processes
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.e2e
def test_trials_spread_over_the_chief_and_two_workers(tmp_path):
    import keras_tuner

    pools = {
        "workerpool0": [f"127.0.0.1:{free_port()}"],
        "workerpool1": [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"],
    }

    def env(pool: str, index: int) -> dict[str, str]:
        spec = {
            "cluster": pools,
            "environment": "cloud",
            "task": {"type": pool, "index": index, "trial": ""},
        }
        return {"CLUSTER_SPEC": json.dumps(spec)}

    args = [
        *ARGS,
        "--best-hyperparameters-dir",
        tmp_path / "best",
        "--tuner-results-file",
        tmp_path / "results.json",
        "--max-trials",
        "6",
        "--worker-timeout",
        "60",
    ]
    replicas = [
        ("chief", env("workerpool0", 0)),
        ("worker0", env("workerpool1", 0)),
        ("worker1", env("workerpool1", 1)),
    ]
    procs = [_start(args, e, tmp_path / f"{name}.log") for name, e in replicas]
    try:
        for p in procs:
            p.wait(420)
    finally:
        _stop_all(procs)
    logs = {name: (tmp_path / f"{name}.log").read_text() for name, _ in replicas}
    for (name, _), p in zip(replicas, procs, strict=True):
        assert p.returncode == 0, f"{name}:\n{logs[name][-3000:]}"

    summary = _summary((tmp_path / "chief.out").read_text())
    ran_by = {t["trial_id"]: t["tuner_id"] for t in summary["trials"] if t["status"] == "COMPLETED"}
    assert len(ran_by) == 6
    counts = {tuner: list(ran_by.values()).count(tuner) for tuner in set(ran_by.values())}
    assert set(counts) <= {"tuner-primary", "tuner-worker-0", "tuner-worker-1"}
    assert counts.get("tuner-worker-0", 0) >= 1 and counts.get("tuner-worker-1", 0) >= 1, counts
    # The workers say which trials they ran; the chief alone publishes.
    for worker, tuner in (("worker0", "tuner-worker-0"), ("worker1", "tuner-worker-1")):
        assert {t for t, by in ran_by.items() if by == tuner} == {
            line.split("running trial ", 1)[1].split(":")[0]
            for line in logs[worker].splitlines()
            if "running trial " in line
        }
        assert "the chief publishes the outputs" in logs[worker]
        assert (tmp_path / f"{worker}.out").read_text().strip() == ""

    best = keras_tuner.HyperParameters.from_config(
        json.loads((tmp_path / "best" / "best_hyperparameters.txt").read_text())
    )
    results = json.loads((tmp_path / "results.json").read_text())
    assert len(results) == 6 and results[0]["trial_id"] == summary["best_trial_id"]
    assert best.values == {k: v for k, v in results[0].items() if k not in ("trial_id", "score")}


@pytest.mark.slow
def test_chief_gives_up_when_a_worker_is_gone(tmp_path):
    cluster = {"chief": [f"127.0.0.1:{free_port()}"], "worker": [f"127.0.0.1:{free_port()}"]}

    def env(task: str) -> dict[str, str]:
        return {"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": task, "index": 0}})}

    args = [
        *ARGS,
        "--best-hyperparameters-dir",
        tmp_path / "best",
        "--max-trials",
        "20",
        "--worker-timeout",
        "8",
    ]
    chief = _start(args, env("chief"), tmp_path / "chief.log")
    worker = _start(args, env("worker"), tmp_path / "worker.log")
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and chief.poll() is None:
            if " started on tuner-worker-0" in (tmp_path / "chief.log").read_text():
                break
            time.sleep(0.2)
        assert chief.poll() is None, (tmp_path / "chief.log").read_text()[-3000:]
        worker.send_signal(signal.SIGKILL)  # mid-trial, no goodbye
        killed_at = time.monotonic()
        chief.wait(120)
        gave_up_after = time.monotonic() - killed_at
    finally:
        _stop_all([chief, worker])
    log = (tmp_path / "chief.log").read_text()
    assert chief.returncode == 5, log[-3000:]  # ClusterError's exit code
    assert (
        "worker tuner-worker-0 has not been heard from" in log and "(--worker-timeout 8 s)" in log
    )
    assert "run the same job again to resume" in log
    assert 8 <= gave_up_after < 100
    assert not (tmp_path / "best").exists()
