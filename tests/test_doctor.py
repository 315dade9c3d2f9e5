"""`generic-trainer doctor`: what train would find here, checked without training
(generic_trainer.doctor, generic_trainer.diagnose).

Without a GPU, the way the GPU stop is tested (tests/test_accelerator.py): a stand-in `nvidia-smi`
on PATH, a site-packages whose CUDA library tree lacks cuSOLVER (TensorFlow's real
libtensorflow_framework.so.2, its real RUNPATH); a real two-worker TF_CONFIG on 127.0.0.1; gs://
inputs against the real GCS emulator.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PENGUIN, REPO, free_port, gcs_upload, run_cli
from generic_trainer.artifacts.storage_settings import StorageSettings
from generic_trainer.diagnose import cluster_checks, dlopen, machine, remote_inputs, report
from generic_trainer.diagnose.request import Place
from generic_trainer.fit import accelerator
from generic_trainer.intake.doctor_request import build_doctor_request
from test_accelerator import fake_nvidia_smi

HAVE_LDCONFIG = bool(shutil.which("ldconfig") or os.path.exists("/sbin/ldconfig"))
ONE_GPU = accelerator.GpuPresence(found=1, visible=1, evidence="nvidia-smi: NVIDIA H100 80GB HBM3")
NO_GPU = accelerator.GpuPresence(found=0, visible=0, evidence="")


def fake_site(root: Path, without: str = "") -> tuple[Path, str]:
    """A site-packages laid out like a GPU install: TensorFlow's real framework library (a link) and
    an empty file per CUDA soname but `without`; returns it and an LD_LIBRARY_PATH of its
    nvidia/*/lib."""
    top = importlib.util.find_spec("tensorflow").submodule_search_locations[0]
    (root / "tensorflow").mkdir(parents=True)
    (root / "tensorflow" / "libtensorflow_framework.so.2").symlink_to(
        Path(top) / "libtensorflow_framework.so.2"
    )
    for rel in dlopen.CUDA_LOADED:
        path = root / rel.replace("*", "5")
        path.parent.mkdir(parents=True, exist_ok=True)
        if not without or without not in rel:
            path.touch()
    return root, ":".join(str(p) for p in sorted(root.glob("nvidia/*/lib")))


def two_workers(task_type: str = "chief", host: str = "127.0.0.1") -> str:
    cluster = {"chief": [f"{host}:{free_port()}"], "worker": [f"127.0.0.1:{free_port()}"]}
    return json.dumps({"cluster": cluster, "task": {"type": task_type, "index": 0}})


def request(tmp_path: Path, values: dict | None = None, **environ: str):
    return build_doctor_request(values or {}, {"PATH": "", **environ})


# --- the CUDA libraries: the dlopen check, now the package's ------------------------------------


@pytest.mark.skipif(not HAVE_LDCONFIG, reason="needs ldconfig (Linux)")
def test_a_library_tree_without_cusolver_fails_on_a_gpu_machine_and_warns_on_a_cpu_one(tmp_path):
    site, libs = fake_site(tmp_path / "site", without="cusolver")
    req = request(tmp_path, {"site_packages": str(site)}, LD_LIBRARY_PATH=libs)
    found = machine.cuda_libraries_check(req, ONE_GPU)
    assert found.status == "fail"
    assert "TensorFlow could not load libcusolver.so.11: it would train on the CPU" in found.detail
    assert "libcublas" not in found.detail and "LD_LIBRARY_PATH" in found.fix
    assert machine.cuda_libraries_check(req, NO_GPU).status == "warn"
    # The framework's RUNPATH alone misses cuSOLVER, nvJitLink and NVRTC (the image's ld.so.conf.d
    # adds them)
    bare = machine.cuda_libraries_check(request(tmp_path, {"site_packages": str(site)}), ONE_GPU)
    assert {"libcusolver.so.11", "libnvJitLink.so.12", "libnvrtc.so.12"} <= set(
        bare.detail.split(" could not load ")[1].split(":")[0].split(", ")
    )


@pytest.mark.skipif(not HAVE_LDCONFIG, reason="needs ldconfig (Linux)")
def test_a_whole_library_tree_resolves_and_a_cpu_install_needs_none(tmp_path):
    site, libs = fake_site(tmp_path / "site")
    found = machine.cuda_libraries_check(
        request(tmp_path, {"site_packages": str(site)}, LD_LIBRARY_PATH=libs), ONE_GPU
    )
    assert (
        found.status == "ok"
        and "resolve from tensorflow/libtensorflow_framework.so.2" in found.detail
    )
    cpu = tmp_path / "cpu-site"
    cpu.mkdir()
    req = request(tmp_path, {"site_packages": str(cpu)})
    assert machine.cuda_libraries_check(req, NO_GPU).status == "ok"
    assert machine.cuda_libraries_check(req, ONE_GPU).status == "fail"


# --- the cluster and the strategy: fit/cluster.py's own functions -----------------------------


def test_a_two_worker_tf_config_on_localhost_is_read_and_its_chief_resolved():
    environ = {"TF_CONFIG": two_workers("worker")}
    check, cluster = cluster_checks.cluster_check(environ)
    assert check.status == "ok", check
    assert "TF_CONFIG: 2 replica(s) (chief:0=127.0.0.1:" in check.detail
    assert "this one is worker:0" in check.detail and "which resolves to 127.0.0.1" in check.detail
    found = cluster_checks.strategy_check("auto", 0, cluster, environ)
    assert found.status == "ok" and found.detail.startswith("multi_worker_mirrored")
    mirrored = cluster_checks.strategy_check("mirrored", 0, cluster, environ)
    assert mirrored.status == "fail" and "names 2 replicas" in mirrored.detail


def test_a_cluster_that_cannot_form_is_a_failure_naming_why():
    check, _ = cluster_checks.cluster_check({"TF_CONFIG": two_workers(host="no-such-host.invalid")})
    assert check.status == "fail" and "'no-such-host.invalid' does not resolve" in check.detail
    check, cluster = cluster_checks.cluster_check({"TF_CONFIG": '{"cluster": {"chief": ["a:1"]}}'})
    assert check.status == "fail" and check.detail.startswith("TF_CONFIG: expected")
    assert cluster_checks.strategy_check("auto", 0, cluster, {}).status == "fail"
    spec = {"cluster": {"workerpool0": ["127.0.0.1:1"], "workerpool2": ["127.0.0.1:2"]}}
    spec["task"] = {"type": "workerpool2", "index": 0}
    check, cluster = cluster_checks.cluster_check({"CLUSTER_SPEC": json.dumps(spec)})
    assert check.status == "ok" and check.detail.startswith("CLUSTER_SPEC: 1 replica(s)")
    ps = cluster_checks.strategy_check("auto", 0, cluster, {})
    assert ps.status == "fail" and "'ps'" in ps.detail


def test_no_cluster_one_gpu_is_the_default_strategy_prefetching_to_the_gpu():
    check, cluster = cluster_checks.cluster_check({})
    assert check.detail.startswith("none (no TF_CONFIG or CLUSTER_SPEC)")
    one = cluster_checks.strategy_check("auto", 1, cluster, {})
    assert "default" in one.detail and "XLA" in one.detail and "/device:GPU:0" in one.detail
    # seen on an H200: the penguin-like model (StringLookup) trained with no XLA, on both sides
    assert "if every layer supports it" in one.detail
    off = {"GENERIC_TRAINER_PREFETCH_TO_DEVICE": "off"}
    assert "prefetched" not in cluster_checks.strategy_check("auto", 1, cluster, off).detail


# --- inputs: local paths, gs:// against the real emulator -------------------------------------


def test_gs_inputs_are_listed_through_the_mount_or_the_api(tmp_path, gcs_emulator, monkeypatch):
    host, bucket = gcs_emulator
    gcs_upload(host, bucket, "data/Split-train/a.gz", b"x")
    gcs_upload(host, bucket, "code/module.py", b"def run_fn(fn_args): ...\n")
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", host)
    settings = StorageSettings(gcs_timeout=5, emulator_host=host)
    root = str(tmp_path / "gcs")

    def check(flag: str, uri: str):
        local = os.path.join(root, uri[len("gs://") :])
        return remote_inputs.input_check(Place(flag, uri, local), root, settings)

    examples = check("--examples", f"gs://{bucket}/data")
    assert examples.status == "fail" and "data/Split-train/a.gz" in examples.detail
    assert "not mounted at" in examples.detail and "Cloud Storage FUSE" in examples.fix
    module = check("--module-file", f"gs://{bucket}/code/module.py")
    assert module.status == "ok" and "train downloads it" in module.detail
    missing = check("--schema", f"gs://{bucket}/no-such-schema")
    assert missing.status == "fail" and missing.detail.startswith("nothing at")
    (tmp_path / "gcs" / bucket / "data" / "Split-train").mkdir(parents=True)
    mounted = check("--examples", f"gs://{bucket}/data")
    assert (
        mounted.status == "ok"
        and "mounted at" in mounted.detail
        and "Split-train" in mounted.detail
    )
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{free_port()}")
    down = StorageSettings(gcs_timeout=1, emulator_host=f"http://127.0.0.1:{free_port()}")
    place = Place("--schema", f"gs://{bucket}/x", str(tmp_path / "none"))
    unreachable = remote_inputs.input_check(place, root, down)
    assert unreachable.status == "fail" and "cannot be listed" in unreachable.detail


def test_the_keras_of_a_gs_module_is_decided_once_fetched(gcs_emulator, monkeypatch, tmp_path):
    host, bucket = gcs_emulator
    uri = gcs_upload(host, bucket, "code/module.py", b"import helper\n")
    gcs_upload(host, bucket, "code/helper.py", b"from tfx_bsl.public import tfxio\n")
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", host)
    values = {"module_file": uri, "gcs_root": str(tmp_path / "gcs")}
    check = machine.keras_check(build_doctor_request(values, {"STORAGE_EMULATOR_HOST": host}))
    assert check.detail.startswith("tf.keras is tf_keras "), check
    assert "decided once fetched): module.py imports helper.py" in check.detail


def test_local_inputs_are_checked_and_each_output_disk_is_named_by_its_flag(tmp_path):
    req = build_doctor_request(
        {"examples": str(tmp_path / "none"), "module_file": "my_pkg.module"},
        {"AIP_MODEL_DIR": str(tmp_path / "out" / "model"), "SECRET": "x"},
    )
    assert [p.flag for p in req.outputs] == ["--model-dir"] and "SECRET" not in req.environ
    checks = [remote_inputs.input_check(p, req.gcs_root, req.storage) for p in req.inputs]
    assert [c.status for c in checks] == ["fail", "ok"]
    disks = machine.disk_checks(req)
    assert disks[0].name == "disk --model-dir" and f"free at {tmp_path}" in disks[0].detail
    gs = build_doctor_request({"model_dir": "gs://b/m", "gcs_root": str(tmp_path / "no-mount")}, {})
    assert machine.disk_checks(gs)[0].status == "fail"
    assert machine.disk_checks(build_doctor_request({}, {}))[0].name == "outputs"


# --- Keras, versions, memory, the report -------------------------------------------------------


def test_the_keras_tf_keras_would_be_for_the_module_and_why(tmp_path):
    tfx_module = tmp_path / "tfx_module.py"
    tfx_module.write_text("import tensorflow_transform as tft\n")
    plain = tmp_path / "plain.py"
    plain.write_text("import keras\n")
    check = machine.keras_check(build_doctor_request({"module_file": str(tfx_module)}, {}))
    assert (
        check.detail.startswith("tf.keras is tf_keras ")
        and "tensorflow_transform (line 1)" in check.detail
    )
    check = machine.keras_check(build_doctor_request({"module_file": str(plain)}, {}))
    assert check.detail.startswith("tf.keras is keras3 ")
    env = {"TF_USE_LEGACY_KERAS": "1"}
    check = machine.keras_check(build_doctor_request({"module_file": str(plain)}, env))
    assert "tf_keras" in check.detail and "TF_USE_LEGACY_KERAS=1 is set" in check.detail


def test_little_available_memory_is_a_warning_naming_the_gib_left(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 9000000 kB\nMemAvailable:  1000000 kB\n")
    low = machine.memory_check(str(meminfo), str(tmp_path))
    assert low.status == "warn" and low.detail == "1.0 GiB available"


def test_the_nvidia_driver_version_is_read_from_its_proc_file_or_is_none(tmp_path):
    version = tmp_path / "version"
    version.write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar 5 2024\n"
    )
    assert machine.driver_version(str(version)) == "550.54.15"
    assert machine.driver_version(str(tmp_path / "none")) is None


def test_a_failed_check_prints_its_fix_and_makes_the_json_report_not_ok():
    checks = [report.ok("a", "fine"), report.fail("b", "broken", "mend it")]
    assert checks[1].line() == "fail  b                    broken  -> fix: mend it"
    body = json.loads(report.as_json(checks, 1.234, 0.5))
    assert body["ok"] is False and body["checks"][1] == {
        "name": "b",
        "status": "fail",
        "detail": "broken",
        "fix": "mend it",
    }


# --- the verb, end to end ----------------------------------------------------------------------


@pytest.mark.slow
def test_doctor_on_a_gpu_machine_tensorflow_cannot_use(tmp_path, gcs_emulator):
    """The stand-in nvidia-smi shows a GPU, the library tree lacks cuSOLVER, TF_CONFIG names two
    replicas on 127.0.0.1, the module is a gs:// object on the emulator: --json, exit 2, each
    finding on its line."""
    host, bucket = gcs_emulator
    uri = gcs_upload(host, bucket, "code/module.py", (PENGUIN / "module.py").read_bytes())
    site, libs = fake_site(tmp_path / "site", without="cusolver")
    env = {
        "PATH": fake_nvidia_smi(tmp_path / "bin", 1),
        "LD_LIBRARY_PATH": libs,
        "TF_CONFIG": two_workers(),
        "STORAGE_EMULATOR_HOST": host,
        "GENERIC_TRAINER_GCS_ROOT": str(tmp_path / "gcs"),
    }
    args = ["doctor", "--json", "--site-packages", site, "--module-file", uri]
    proc = run_cli([*args, "--examples", PENGUIN / "data", "--model-dir", tmp_path / "m"], env=env)
    assert proc.returncode == 2, proc.stderr[-3000:]
    body = json.loads(proc.stdout)
    checks = {c["name"]: c for c in body["checks"]}
    status = {name: c["status"] for name, c in checks.items()}
    assert (
        status["gpus"] == "ok"
        and "gpus_found=1 (nvidia-smi: NVIDIA H100" in checks["gpus"]["detail"]
    )
    if HAVE_LDCONFIG:
        assert status["cuda_libraries"] == "fail"
        assert "could not load libcusolver.so.11" in checks["cuda_libraries"]["detail"]
    assert (
        status["gpus_registered"] == "fail"
        and "--accelerator cpu" in checks["gpus_registered"]["fix"]
    )
    assert status["cluster"] == "ok" and "2 replica(s)" in checks["cluster"]["detail"]
    assert checks["strategy"]["detail"].startswith("multi_worker_mirrored")
    assert status["input --module-file"] == "ok" and status["input --examples"] == "ok"
    assert (
        "(decided once fetched): module.py imports tensorflow_transform"
        in (checks["keras"]["detail"])
    )
    assert status["xla CPU:0"] == "ok" and status["disk --model-dir"] == "ok"
    assert body["ok"] is False and "doctor failed: " in proc.stderr
    assert body["seconds"] - body["tensorflow_import_seconds"] < 15
    assert not (tmp_path / "m").exists()


@pytest.mark.slow
def test_doctor_on_this_machine_passes_and_prints_one_line_each(tmp_path, capsys):
    from generic_trainer import cli

    args = [
        "doctor",
        "--examples",
        str(PENGUIN / "data"),
        "--module-file",
        str(PENGUIN / "module.py"),
    ]
    code = cli.main([*args, "--model-dir", str(tmp_path / "m")], end_process=False)
    out = capsys.readouterr().out.splitlines()
    assert code == 0, out
    names = [line.split()[1] for line in out]
    assert names[:6] == ["flags", "python", "keras", "gpus", "cuda_libraries", "cluster"]
    assert {"tensorflow", "cuda", "gpus_registered", "strategy", "xla"} <= set(names)
    assert all(line.split()[0] in ("ok", "warn") for line in out)
    assert not (tmp_path / "m").exists()


@pytest.mark.slow
def test_the_gpu_bench_without_a_gpu_says_so_after_doctors_checks():
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "gpu.py")],
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "CLUSTER_SPEC")},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "doctor: ok    gpus_registered      TensorFlow registered 0" in proc.stdout
    assert proc.stdout.rstrip().endswith(
        "no GPU: TensorFlow registers none on this machine "
        "(doctor's lines above); nothing to measure"
    )


def test_doctor_names_each_flag_value_train_would_refuse():
    from generic_trainer.diagnose import machine
    from generic_trainer.intake.doctor_request import build_doctor_request

    values = {"train_steps": "-3", "steps_per_execution": "inf", "strategy": "auto"}
    check = machine.flags_check(build_doctor_request(values, environ={}))
    assert check.status == "fail"
    assert "--train-steps" in check.detail and "--steps-per-execution" in check.detail
    assert machine.flags_check(build_doctor_request({}, environ={})).status == "ok"
