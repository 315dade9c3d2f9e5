"""A GPU the runtime cannot use is an error, never a silent CPU run
(generic_trainer.fit.accelerator).

GPUs are simulated the way the runtime looks for them: a directory of `nvidia<N>` device files, a
fake `nvidia-smi` on PATH, CUDA_VISIBLE_DEVICES. The CLI tests run the real TensorFlow of this
machine, which registers no GPU, with a fake nvidia-smi saying there is one.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from conftest import PENGUIN, run_cli
from generic_trainer.errors import UserInputError
from generic_trainer.fit import accelerator

# What TensorFlow 2.21 logged on an H100 whose image lacked nvidia/cusolver/lib on the library path
# (issue 26).
H100_LOG = """\
I0000 00:00:1764000000.1 12 cuda_executor.cc:1015] successful NUMA node read from SysFS had \
negative value (-1)
W0000 00:00:1764000000.2 12 dso_loader.cc:69] Could not load dynamic library 'libcusolver.so.11'; \
dlerror: libcusolver.so.11: cannot open shared object file: No such file or directory
W0000 00:00:1764000000.3 12 gpu_device.cc:2344] Cannot dlopen some GPU libraries. Please make sure \
the missing libraries mentioned above are installed properly if you would like to use GPU. \
Skipping registering GPU devices...
"""


def fake_nvidia_smi(bin_dir: Path, gpus: int) -> str:
    """A `nvidia-smi` printing `gpus` lines as `nvidia-smi -L` does; returns a PATH with it
    first."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    lines = "\n".join(
        f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-0000000{i}-aaaa-bbbb-cccc-000000000000)"
        for i in range(gpus)
    )
    exe = bin_dir / "nvidia-smi"
    exe.write_text(f"#!/bin/sh\n[ \"$1\" = -L ] || exit 9\ncat <<'EOF'\n{lines}\nEOF\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"


def test_device_files_count_gpus_but_not_the_control_devices(tmp_path):
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-modeset"):
        os.symlink("/dev/null", tmp_path / name)  # character devices, as the runtime mounts them
    presence = accelerator.detect({"PATH": ""}, dev_dir=str(tmp_path))
    assert (presence.found, presence.visible) == (2, 2)
    assert str(tmp_path / "nvidia0") in presence.evidence and "nvidiactl" not in presence.evidence
    assert accelerator.detect({"PATH": ""}, dev_dir=str(tmp_path / "none")).found == 0


def test_nvidia_smi_on_path_is_read(tmp_path):
    path = fake_nvidia_smi(tmp_path / "bin", 3)
    presence = accelerator.detect({"PATH": path}, dev_dir=str(tmp_path / "no-dev"))
    assert presence.found == 3
    assert "nvidia-smi: NVIDIA H100 80GB HBM3" in presence.evidence


@pytest.mark.parametrize(
    ("cvd", "visible"),
    [
        ("", 0),
        ("-1", 0),
        ("0", 1),
        ("1,0", 2),
        ("0,1,2,3", 2),
        ("0,-1,1", 1),
        ("GPU-00000000-aaaa", 1),
    ],
)
def test_cuda_visible_devices_narrows_what_this_process_gets(tmp_path, cvd, visible):
    path = fake_nvidia_smi(tmp_path / "bin", 2)
    presence = accelerator.detect(
        {"PATH": path, "CUDA_VISIBLE_DEVICES": cvd}, dev_dir=str(tmp_path)
    )
    assert (presence.found, presence.visible) == (2, visible)
    assert f"CUDA_VISIBLE_DEVICES={cvd!r}" in presence.evidence


def test_the_libraries_tensorflow_could_not_load_are_named():
    assert accelerator.libraries_not_loaded(H100_LOG + H100_LOG) == ["libcusolver.so.11"]
    assert accelerator.libraries_not_loaded("I0000 all fine\n") == []


def test_fewer_gpus_registered_than_present_is_an_error_naming_the_libraries():
    one = accelerator.GpuPresence(found=1, visible=1, evidence="/dev/nvidia0")
    with pytest.raises(UserInputError) as e:
        accelerator.check("auto", one, 0, accelerator.libraries_not_loaded(H100_LOG))
    text = str(e.value)
    assert e.value.exit_code == 2 and text.startswith(
        "--accelerator: this machine has 1 GPU(s) (/dev/nvidia0)"
    )
    assert "TensorFlow registered 0: it could not load libcusolver.so.11" in text
    assert "--accelerator cpu" in text and "LD_LIBRARY_PATH" in text
    with pytest.raises(UserInputError, match="CPU-only build"):
        accelerator.check("auto", one, 0, [], cuda_build=False)
    with pytest.raises(UserInputError, match="unset TF_CPP_MIN_LOG_LEVEL"):
        accelerator.check("gpu", one, 0, [])
    accelerator.check("cpu", one, 0, ["libcusolver.so.11"])  # the CPU is meant
    accelerator.check("auto", one, 1, [])
    eight = accelerator.GpuPresence(found=8, visible=8, evidence="nvidia-smi: 8 x H100")
    with pytest.raises(UserInputError, match="has 8 GPU"):
        accelerator.check("auto", eight, 4, [])


def test_no_gpu_anywhere_is_fine_unless_one_is_asked_for():
    none = accelerator.GpuPresence(found=0, visible=0, evidence="")
    accelerator.check("auto", none, 0, [])
    accelerator.check("cpu", none, 0, [])
    with pytest.raises(
        UserInputError,
        match="--accelerator: --accelerator gpu asks for a GPU but TensorFlow registered 0",
    ):
        accelerator.check("gpu", none, 0, [])
    hidden = accelerator.GpuPresence(
        found=2, visible=0, evidence="nvidia-smi: ...; CUDA_VISIBLE_DEVICES=''"
    )
    accelerator.check("auto", hidden, 0, [])  # GPUs hidden on purpose: the CPU is meant


def _train_args(tmp_path: Path, *extra: str) -> list:
    return [
        "train",
        "--examples",
        PENGUIN / "data",
        "--module-file",
        PENGUIN / "module.py",
        "--schema",
        PENGUIN / "schema.pbtxt",
        "--model-dir",
        tmp_path / "model",
        "--train-steps",
        "3",
        "--eval-steps",
        "2",
        *extra,
    ]


@pytest.mark.slow
def test_train_with_a_gpu_tensorflow_cannot_use_stops_before_training_unless_cpu_is_meant(tmp_path):
    """A fake nvidia-smi says this machine has a GPU; TensorFlow here registers none: train exits 2
    before
    training and writes no model; with --accelerator cpu the same run trains and says what it
    found and used."""
    env = {"PATH": fake_nvidia_smi(tmp_path / "bin", 1)}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    proc = run_cli(_train_args(tmp_path), env=env | {"CUDA_VISIBLE_DEVICES": "0"}, timeout=300)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert (
        "--accelerator: this machine has 1 GPU(s) (nvidia-smi: NVIDIA H100 80GB HBM3" in proc.stderr
    )
    assert "TensorFlow registered 0" in proc.stderr
    assert "Epoch 1/" not in proc.stdout + proc.stderr and not (tmp_path / "model").exists()

    proc = run_cli(
        _train_args(tmp_path, "--accelerator", "cpu"),
        env=env | {"CUDA_VISIBLE_DEVICES": "0"},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "model" / "Format-Serving" / "saved_model.pb").is_file()
    line = next(x for x in proc.stderr.splitlines() if "resolved strategy=" in x)
    import tensorflow as tf

    assert f"strategy={type(tf.distribute.get_strategy()).__name__} " in line  # the default one
    assert "gpus_found=1 (nvidia-smi: NVIDIA H100 80GB HBM3; CUDA_VISIBLE_DEVICES='0')" in line
    assert "gpus_registered=0" in line and line.endswith("gpus_used=0")


def test_tensorflows_log_is_read_on_its_way_to_stderr(capfd):
    """What C++ code writes to file descriptor 2 inside the block reaches stderr as before, and is
    read."""
    with accelerator.tee_stderr() as text:
        os.write(2, H100_LOG.encode())
    assert accelerator.libraries_not_loaded("".join(text)) == ["libcusolver.so.11"]
    assert "Skipping registering GPU devices" in capfd.readouterr().err
