"""What TensorFlow makes of this machine: its version and CUDA build, the GPUs it registers (the
same check train stops on: fit/accelerator.py), and XLA on each GPU (a tiny jit-compiled op).
Imports TensorFlow."""

from __future__ import annotations

import os

from generic_trainer.diagnose.report import Check, fail, ok, warn
from generic_trainer.errors import UserInputError
from generic_trainer.fit import accelerator


def versions_checks(driver: str | None) -> list[Check]:
    """TensorFlow's version and build; the CUDA and cuDNN it was built with, and the driver's
    version."""
    import tensorflow as tf

    info = tf.sysconfig.get_build_info()
    cuda_build = bool(info.get("is_cuda_build"))
    checks = [
        ok(
            "tensorflow",
            f"{tf.__version__} ({'CUDA' if cuda_build else 'CPU-only'} build, "
            f"in {os.path.dirname(os.path.dirname(tf.__file__))})",
        )
    ]
    if not cuda_build:
        checks.append(ok("cuda", "none: a CPU-only TensorFlow"))
        return checks
    built = f"built with CUDA {info.get('cuda_version')}, cuDNN {info.get('cudnn_version')}"
    if driver is None:
        checks.append(ok("cuda", f"{built}; no NVIDIA driver loaded here"))
    else:
        checks.append(ok("cuda", f"{built}; NVIDIA driver {driver}"))
    return checks


def registered_check(
    request_accelerator: str, presence: accelerator.GpuPresence
) -> tuple[Check, int]:
    """(the check, GPUs TensorFlow registered): fewer than this machine shows is train's stop.

    Imports TensorFlow the way train does (accelerator.registered_gpus reads its C++ log for the
    libraries it could not load), so call it before anything else imports TensorFlow."""
    registered, not_loaded, cuda_build = accelerator.registered_gpus()
    detail = f"TensorFlow registered {registered} of the {presence.visible} GPU(s) visible here"
    try:
        accelerator.check(request_accelerator, presence, registered, not_loaded, cuda_build)
    except UserInputError as e:
        return fail("gpus_registered", detail, str(e).split(": ", 1)[1]), registered
    if request_accelerator == "cpu" and registered:
        return warn("gpus_registered", detail, "--accelerator cpu leaves them unused"), 0
    return ok("gpus_registered", detail), registered


def xla_checks(num_gpus: int) -> list[Check]:
    """A tiny jit-compiled op on each GPU (on the CPU when there is none): XLA compiles and runs
    there."""
    import tensorflow as tf

    devices = [f"/GPU:{i}" for i in range(num_gpus)] or ["/CPU:0"]

    @tf.function(jit_compile=True)
    def step(x):
        return tf.reduce_sum(tf.matmul(x, x) * 0.5 + 1.0)

    checks = []
    for device in devices:
        name = f"xla {device.lstrip('/')}"
        try:
            with tf.device(device):
                value = float(step(tf.ones((8, 8))))
        except Exception as e:  # noqa: BLE001 - whatever XLA raises is the finding
            first = (str(e).strip().splitlines() or [""])[0][:300]
            checks.append(
                fail(
                    name,
                    f"a jit-compiled op failed: {type(e).__name__}: {first}",
                    "pass --no-jit-compile; on a GPU, check that ptxas and libdevice "
                    "(nvidia/cuda_nvcc) are installed",
                )
            )
            continue
        expected = 8 * 8 * (8 * 0.5 + 1.0)
        if abs(value - expected) > 1e-3:
            checks.append(fail(name, f"computed {value}, expected {expected}", "report it"))
        else:
            checks.append(ok(name, "a jit-compiled op compiles and runs"))
    return checks
