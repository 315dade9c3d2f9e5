"""The cluster room without processes: TF_CONFIG / CLUSTER_SPEC -> role, strategy choice, start-up
messages.

Also where checkpoints go (flag, AIP_CHECKPOINT_DIR, KFP model_run artifact), each replica's export
dir, and the start-up error when Keras 3 fit cannot be made multi-worker safe.
"""

from __future__ import annotations

import json
import logging

import pytest
from conftest import PENGUIN
from generic_trainer.errors import UserInputError
from generic_trainer.fit import cluster as cluster_lib
from generic_trainer.fit import keras_multiworker
from generic_trainer.fit.fn_args import FnArgs
from generic_trainer.intake.fit_request import build_train_request


def _tf_config(cluster: dict, task_type: str, index: int) -> dict[str, str]:
    return {
        "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}})
    }


def _cluster_spec(pools: dict, pool: str, index: int) -> dict[str, str]:
    return {
        "CLUSTER_SPEC": json.dumps(
            {
                "cluster": pools,
                "environment": "cloud",
                "task": {"type": pool, "index": index, "trial": ""},
            }
        )
    }


def test_no_cluster_variables_is_a_single_chief():
    for environ in ({}, {"TF_CONFIG": ""}, {"TF_CONFIG": json.dumps({"cluster": {}, "task": {}})}):
        c = cluster_lib.resolve(environ)
        assert c == cluster_lib.SINGLE
        assert (c.is_chief, c.is_multi_worker, c.num_workers, c.source) == (True, False, 0, "none")


def test_tf_config_workers_only_worker_0_is_the_chief():
    cluster = {"worker": ["h0:2222", "h1:2222", "h2:2222"]}
    roles = [cluster_lib.resolve(_tf_config(cluster, "worker", i)) for i in range(3)]
    assert [c.is_chief for c in roles] == [True, False, False]
    assert all(c.num_workers == 3 and c.is_multi_worker and c.source == "TF_CONFIG" for c in roles)
    assert roles[2].tf_config() == {"cluster": cluster, "task": {"type": "worker", "index": 2}}
    assert cluster_lib.leader(roles[1]) == ("worker", 0, "h0:2222")


def test_tf_config_with_a_chief_and_the_old_master_name():
    cluster = {"chief": ["c:1"], "worker": ["w0:1", "w1:1"]}
    chief = cluster_lib.resolve(_tf_config(cluster, "chief", 0))
    worker0 = cluster_lib.resolve(_tf_config(cluster, "worker", 0))
    assert chief.is_chief and not worker0.is_chief and chief.num_workers == 3
    assert cluster_lib.leader(worker0) == ("chief", 0, "c:1")
    master = cluster_lib.resolve(_tf_config({"master": ["m:1"], "worker": ["w:1"]}, "master", 0))
    assert (master.task_type, master.is_chief, dict(master.cluster)) == (
        "chief",
        True,
        {"chief": ("m:1",), "worker": ("w:1",)},
    )


def test_vertex_cluster_spec_pools_become_chief_and_workers():
    pools = {
        "workerpool0": ["a:2222"],
        "workerpool1": ["b:2222", "c:2222"],
        "workerpool2": [],
        "workerpool3": [],
    }
    chief = cluster_lib.resolve(_cluster_spec(pools, "workerpool0", 0))
    second = cluster_lib.resolve(_cluster_spec(pools, "workerpool1", 1))
    assert (chief.task_type, chief.is_chief, chief.source) == ("chief", True, "CLUSTER_SPEC")
    assert (second.task_type, second.task_index, second.is_chief, second.num_workers) == (
        "worker",
        1,
        False,
        3,
    )
    assert second.tf_config() == {
        "cluster": {"chief": ["a:2222"], "worker": ["b:2222", "c:2222"]},
        "task": {"type": "worker", "index": 1},
    }


def test_tf_config_is_preferred_when_vertex_sets_both():
    environ = {
        **_cluster_spec({"workerpool0": ["a:1"], "workerpool1": ["b:1"]}, "workerpool1", 0),
        **_tf_config({"chief": ["a:1"], "worker": ["b:1"]}, "worker", 0),
    }
    c = cluster_lib.resolve(environ)
    assert (c.source, c.task_type, c.task_index) == ("TF_CONFIG", "worker", 0)


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"TF_CONFIG": "{not json"}, "TF_CONFIG: not valid JSON"),
        (
            {"TF_CONFIG": json.dumps({"cluster": {"worker": ["a:1"]}})},
            'TF_CONFIG: expected {"cluster"',
        ),
        ({"CLUSTER_SPEC": "[]"}, 'CLUSTER_SPEC: expected {"cluster"'),
        (
            _tf_config({"worker": ["a:1", "b:1"]}, "chief", 0),
            "task type 'chief' is not in the cluster",
        ),
        (
            _tf_config({"worker": ["a:1", "b:1"]}, "worker", 2),
            "task index 2 out of range for 'worker'",
        ),
        (
            _cluster_spec({"workerpool0": ["a:1"]}, "workerpool1", 0),
            "task type 'worker' is not in the cluster",
        ),
    ],
)
def test_malformed_cluster_variables_name_the_variable(environ, message):
    with pytest.raises(UserInputError, match=message):
        cluster_lib.resolve(environ)


TWO = cluster_lib.resolve(_tf_config({"worker": ["a:1", "b:1"]}, "worker", 1))


@pytest.mark.parametrize(
    ("requested", "gpus", "cluster", "expected"),
    [
        ("auto", 0, cluster_lib.SINGLE, "default"),
        (
            "auto",
            1,
            cluster_lib.SINGLE,
            "default",
        ),  # no wrapper on one GPU: Keras' auto XLA applies (issue 26)
        ("auto", 4, cluster_lib.SINGLE, "mirrored"),
        ("auto", 0, TWO, "multi_worker_mirrored"),
        ("auto", 8, TWO, "multi_worker_mirrored"),
        ("mirrored", 0, cluster_lib.SINGLE, "mirrored"),
        ("one_device", 2, cluster_lib.SINGLE, "one_device"),
        ("multi_worker_mirrored", 0, cluster_lib.SINGLE, "multi_worker_mirrored"),
        ("multi_worker_mirrored", 2, TWO, "multi_worker_mirrored"),
    ],
)
def test_strategy_choice_from_gpus_and_cluster(requested, gpus, cluster, expected):
    assert cluster_lib.choose_strategy(requested, gpus, cluster) == expected


@pytest.mark.parametrize(
    ("requested", "gpus", "cluster", "expected"),
    [
        (
            "auto",
            1,
            cluster_lib.SINGLE,
            "/device:GPU:0",
        ),  # one GPU, no strategy wrapper: batches go to the GPU
        ("auto", 0, cluster_lib.SINGLE, None),  # CPU: nothing to copy
        (
            "auto",
            4,
            cluster_lib.SINGLE,
            None,
        ),  # mirrored: its distributed dataset prefetches to the devices itself
        ("auto", 1, TWO, None),  # multi-worker mirrored: the same
        (
            "one_device",
            1,
            cluster_lib.SINGLE,
            None,
        ),  # OneDeviceStrategy distributes (and prefetches) its dataset
    ],
)
def test_batches_are_prefetched_to_the_device_only_on_one_gpu_without_a_strategy(
    requested, gpus, cluster, expected
):
    name = cluster_lib.choose_strategy(requested, gpus, cluster)
    assert cluster_lib.prefetch_device(name, gpus) == expected
    assert cluster_lib.prefetch_device(name, gpus, enabled=False) is None


@pytest.mark.parametrize(
    ("flag", "environ", "expected"),
    [
        (None, {}, True),
        ("off", {}, False),
        (None, {"GENERIC_TRAINER_PREFETCH_TO_DEVICE": "off"}, False),
        ("auto", {"GENERIC_TRAINER_PREFETCH_TO_DEVICE": "off"}, True),  # the flag wins
    ],
)
def test_the_prefetch_switch_is_read_into_the_request_flag_first_then_the_environment(
    tmp_path, flag, environ, expected
):
    from generic_trainer.intake.fit_request import build_train_request

    (tmp_path / "m.py").write_text("def run_fn(fn_args):\n    pass\n")
    values = {
        "examples": str(PENGUIN / "data"),
        "module_file": str(tmp_path / "m.py"),
        "model_dir": str(tmp_path / "model"),
        **({"prefetch_to_device": flag} if flag else {}),
    }
    assert build_train_request(values, environ=environ).prefetch_to_device is expected


def test_the_cluster_is_read_into_the_request_from_the_environment_given(tmp_path):
    from generic_trainer.intake.fit_request import build_train_request

    (tmp_path / "m.py").write_text("def run_fn(fn_args):\n    pass\n")
    values = {
        "examples": str(PENGUIN / "data"),
        "module_file": str(tmp_path / "m.py"),
        "model_dir": str(tmp_path / "model"),
    }
    tf_config = {"cluster": {"chief": ["a:1"], "worker": ["b:1"]}, "task": {"type": "worker"}}
    tf_config["task"]["index"] = 0
    request = build_train_request(values, environ={"TF_CONFIG": json.dumps(tf_config)})
    assert (request.cluster.task_type, request.cluster.num_workers) == ("worker", 2)
    assert build_train_request(values, environ={}).cluster == cluster_lib.SINGLE


def test_strategy_choices_that_cannot_work_are_refused():
    with pytest.raises(
        UserInputError,
        match="--strategy: TF_CONFIG names 2 replicas but strategy 'mirrored' trains on one",
    ):
        cluster_lib.choose_strategy("mirrored", 2, TWO)
    with pytest.raises(UserInputError, match="--strategy: 'tpu' is not one of"):
        cluster_lib.choose_strategy("tpu", 0, cluster_lib.SINGLE)
    for task_type in ("ps", "evaluator"):
        c = cluster_lib.resolve(_tf_config({"worker": ["a:1"], task_type: ["p:1"]}, task_type, 0))
        with pytest.raises(UserInputError, match=f"this replica is a '{task_type}'"):
            cluster_lib.choose_strategy("auto", 0, c)


def test_start_up_failure_messages_say_who_is_missing():
    leader = cluster_lib.resolve(
        _tf_config({"chief": ["c:1"], "worker": ["w0:1", "w1:1"]}, "chief", 0)
    )
    detail = (
        "Barrier timed out. Id: [Init]Wait_for_all_tasks_to_register::0.\n# of tasks that reached "
        "the "
        "barrier: 1/3.\nThe first task at the barrier: /job:chief/replica:0/task:0. Some timed out "
        "task names:\n/job:worker/replica:0/task:1\n/job:worker/replica:0/task:0\n\n\nRPC: "
        "/job:chief/replica:0/task:0"
    )
    message = cluster_lib.startup_failure_message(leader, 30, detail)
    assert message.startswith(
        "the cluster from TF_CONFIG did not form within 30 s (--cluster-timeout): "
        "replica(s) worker:1 (w1:1), worker:0 (w0:1) never connected to chief:0."
    )
    assert "TensorFlow said: Barrier timed out." in message
    follower = cluster_lib.resolve(_tf_config({"chief": ["c:1"], "worker": ["w0:1"]}, "worker", 0))
    message = cluster_lib.startup_failure_message(follower, 7.5, "Deadline Exceeded\nmore")
    assert (
        "within 7.5 s" in message
        and "worker:0 could not register with the leader chief:0 at c:1" in message
    )


def test_checkpoint_dir_flag_then_aip_checkpoint_dir_then_the_model_run(tmp_path):
    examples = str(PENGUIN / "data")
    base = {"examples": examples, "module_file": "m.py", "model_dir": str(tmp_path / "model")}
    assert build_train_request(base, environ={}).checkpoint_dir == str(
        tmp_path / "model" / "logs" / "checkpoints"
    )
    run_dir = {
        **base,
        "model_run_dir": str(tmp_path / "run"),
    }  # the KFP model_run artifact fills this
    assert build_train_request(run_dir, environ={}).checkpoint_dir == str(
        tmp_path / "run" / "checkpoints"
    )
    aip = {
        "AIP_CHECKPOINT_DIR": "gs://bucket/job/checkpoints/",
        "GENERIC_TRAINER_GCS_ROOT": str(tmp_path / "gcs"),
    }
    assert build_train_request(run_dir, environ=aip).checkpoint_dir == str(
        tmp_path / "gcs" / "bucket" / "job" / "checkpoints"
    )
    flag = {**run_dir, "checkpoint_dir": str(tmp_path / "mine")}
    assert build_train_request(flag, environ=aip).checkpoint_dir == str(tmp_path / "mine")


def test_each_replica_gets_its_own_export_dir(tmp_path):
    common = {
        "serving_model_dir": "/out/model/Format-Serving",
        "eval_model_dir": "/out/model/Format-TFMA",
        "model_run_dir": "/out/run",
    }
    chief = FnArgs(working_dir="/out/run", **common)
    assert chief.export_dir() == "/out/model/Format-Serving"
    assert chief.export_dir("eval") == "/out/model/Format-TFMA"
    assert chief.export_dir("extra") == "/out/run/extra"
    worker = FnArgs(
        working_dir=str(tmp_path / "private"),
        is_chief=False,
        task_type="worker",
        task_index=2,
        **common,
    )
    for name in ("serving", "eval", "extra"):
        assert worker.export_dir(name) == str(tmp_path / "private" / "worker-worker-2" / name)


def test_keras_3_that_cannot_be_fixed_fails_at_start_with_what_to_do(monkeypatch, caplog):
    request = build_train_request(
        {"examples": str(PENGUIN / "data"), "module_file": "m.py", "model_dir": "/tmp/m"},
        environ={},
    )

    def unsupported():
        raise keras_multiworker.Unsupported("its TensorFlow trainer lacks reduce_per_replica")

    monkeypatch.setattr(keras_multiworker, "check", unsupported)
    with pytest.raises(UserInputError) as raised:
        keras_multiworker.prepare(request, "multi_worker_mirrored", TWO)
    message = str(raised.value)
    assert message.startswith(
        "--keras: Keras 3 Model.fit cannot run under MultiWorkerMirroredStrategy with this "
        "Keras (its TensorFlow trainer lacks reduce_per_replica)"
    )
    assert "--keras tf_keras" in message and "Task API (--task)" in message
    keras_multiworker.prepare(request, "default", cluster_lib.SINGLE)  # one worker: nothing to fix
    legacy = build_train_request(
        {
            "examples": str(PENGUIN / "data"),
            "module_file": "m.py",
            "model_dir": "/tmp/m",
            "keras": "tf_keras",
        },
        environ={},
    )
    with caplog.at_level(logging.WARNING):
        keras_multiworker.prepare(
            legacy, "multi_worker_mirrored", TWO
        )  # a tf_keras module does not need it
    assert "a Keras 3 model would not train here" in caplog.text


def test_speed_flags_keras_3_cannot_use_on_several_workers_fail_at_start():
    values = {
        "examples": str(PENGUIN / "data"),
        "module_file": "m.py",
        "model_dir": "/tmp/m",
        "steps_per_execution": "8",
    }
    with pytest.raises(
        UserInputError,
        match="--steps-per-execution: Keras 3 fit/evaluate with "
        "steps_per_execution=8 cannot run under MultiWorkerMirroredStrategy",
    ):
        keras_multiworker.prepare(
            build_train_request(values, environ={}), "multi_worker_mirrored", TWO
        )
    keras_multiworker.prepare(
        build_train_request(values, environ={}), "default", cluster_lib.SINGLE
    )
    jit = {**values, "steps_per_execution": None, "jit_compile": "true"}
    with pytest.raises(
        UserInputError,
        match="--jit-compile: Keras 3 fit/evaluate with jit_compile=True cannot run on CPU workers",
    ):
        keras_multiworker.prepare(
            build_train_request(jit, environ={}), "multi_worker_mirrored", TWO, num_gpus=0
        )
    keras_multiworker.prepare(
        build_train_request(jit, environ={}), "multi_worker_mirrored", TWO, num_gpus=1
    )


def test_the_installed_keras_gets_the_multi_worker_fix():
    keras_multiworker.check()  # raises Unsupported when the trainer functions it replaces are gone


def test_the_example_tfjob_manifest_runs_the_same_valid_train_command_on_every_replica():
    import yaml
    from conftest import REPO
    from generic_trainer import cli

    job = yaml.safe_load((REPO / "examples" / "kubernetes" / "tfjob.yaml").read_text())
    assert (job["apiVersion"], job["kind"]) == ("kubeflow.org/v1", "TFJob")
    specs = job["spec"]["tfReplicaSpecs"]
    assert (
        set(specs) == {"Chief", "Worker"}
        and specs["Chief"]["replicas"] == 1
        and specs["Worker"]["replicas"] >= 1
    )
    assert job["spec"]["runPolicy"]["backoffLimit"] > 0
    pods = [spec["template"] for spec in specs.values()]
    assert all(
        spec["restartPolicy"] == "OnFailure" for spec in specs.values()
    )  # 143 and 5 must restart
    containers = [pod["spec"]["containers"][0] for pod in pods]
    assert all(
        c["name"] == "tensorflow" for c in containers
    )  # the container the operator gives TF_CONFIG
    assert all(c["ports"][0] == {"name": "tfjob-port", "containerPort": 2222} for c in containers)
    assert (
        containers[0]["image"] == containers[1]["image"]
        and containers[0]["args"] == containers[1]["args"]
    )
    assert all(
        p["spec"]["terminationGracePeriodSeconds"] >= 30 for p in pods
    )  # time to save after SIGTERM

    args = containers[0]["args"]
    parsed = cli.build_parser().parse_args(args)  # the image's entrypoint is `generic-trainer`
    assert (
        parsed.verb == "train" and float(parsed.cluster_timeout) > 0
    )  # validated when the request is built
    # every gs:// and /gcs path lies in the bucket each pod mounts at /gcs/<bucket>
    for pod in pods:
        volume = pod["spec"]["volumes"][0]
        bucket = volume["csi"]["volumeAttributes"]["bucketName"]
        assert volume["csi"]["driver"] == "gcsfuse.csi.storage.gke.io"
        assert "uid=1000" in volume["csi"]["volumeAttributes"]["mountOptions"]
        mount = pod["spec"]["containers"][0]["volumeMounts"][0]
        assert (mount["name"], mount["mountPath"]) == (volume["name"], f"/gcs/{bucket}")
        assert pod["metadata"]["annotations"]["gke-gcsfuse/volumes"] == "true"
        for value in (a.split("=", 1)[1] for a in args if "=" in a):
            if value.startswith(("gs://", "/gcs/")):
                assert value.startswith((f"gs://{bucket}/", f"/gcs/{bucket}/")), value
    assert parsed.checkpoint_dir.startswith(f"gs://{bucket}/") and parsed.model_dir.startswith(
        f"gs://{bucket}/"
    )


@pytest.mark.parametrize("value", ["soon", "0", "-5", "inf", True])
def test_cluster_timeout_must_be_a_positive_number_of_seconds(value):
    values = {
        "examples": str(PENGUIN / "data"),
        "module_file": "m.py",
        "model_dir": "/tmp/m",
        "cluster_timeout": value,
    }
    with pytest.raises(UserInputError, match="--cluster-timeout: expected a number of seconds > 0"):
        build_train_request(values, environ={})
    assert (
        build_train_request({**values, "cluster_timeout": "90"}, environ={}).cluster_timeout == 90.0
    )
