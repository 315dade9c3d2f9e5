"""GPUs on this machine against GPUs TensorFlow registered: a GPU the runtime cannot use is an
error.

TensorFlow silently trains on the CPU when it cannot load a CUDA library (it logs `Could not load
dynamic library 'libcusolver.so.11'` and `Skipping registering GPU devices`, then goes on).
`usable_gpus` looks for GPUs without TensorFlow (`/dev/nvidia<N>` device files, `nvidia-smi -L`,
narrowed by CUDA_VISIBLE_DEVICES), compares them with what TensorFlow registers, and stops the run
before training when it registered fewer, naming the libraries TensorFlow logged it could not load,
unless `--accelerator cpu` says the CPU is meant. Everything but `usable_gpus` and `registered_gpus`
runs without TensorFlow.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import logging
import os
import re
import shutil
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping

from generic_trainer.artifacts import bounded_parse
from generic_trainer.errors import UserInputError

log = logging.getLogger(__name__)

ACCELERATORS = ("auto", "gpu", "cpu")
_NOT_LOADED = re.compile(r"Could not load dynamic library '([^']+)'")


@dataclasses.dataclass(frozen=True)
class GpuPresence:
    """GPUs this machine has (`found`), those CUDA_VISIBLE_DEVICES leaves to this process
    (`visible`), and
    what showed them (`evidence`: device files, nvidia-smi)."""

    found: int
    visible: int
    evidence: str

    def words(self) -> str:
        """For the log line: `gpus_found=2 (/dev/nvidia0, /dev/nvidia1) visible=2`."""
        return (
            f"gpus_found={self.found}"
            + (f" ({self.evidence})" if self.evidence else "")
            + (f" visible={self.visible}" if self.visible != self.found else "")
        )


def detect(environ: Mapping[str, str] | None = None, dev_dir: str = "/dev") -> GpuPresence:
    """The GPUs of this machine, found without TensorFlow: `/dev/nvidia<N>` (what the container
    runtime mounts for each GPU it gives the container: character devices only) and `nvidia-smi -L`
    when it is
    on PATH."""
    environ = os.environ if environ is None else environ
    devices = sorted(
        p
        for p in glob.glob(os.path.join(dev_dir, "nvidia*"))
        if re.fullmatch(r"nvidia\d+", os.path.basename(p)) and _is_char_device(p)
    )
    smi = _nvidia_smi(environ.get("PATH", os.defpath))
    found = max(len(devices), len(smi))
    evidence = ", ".join(devices[:4] + (["..."] if len(devices) > 4 else []))
    if smi:
        evidence += ("; " if evidence else "") + "nvidia-smi: " + ", ".join(sorted(set(smi)))
    visible = found
    cvd = environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        entries = [e.strip() for e in cvd.split(",") if e.strip()]
        # CUDA stops at the first entry that is not a GPU: "" and "-1" hide them all
        usable = len(
            entries[: next((i for i, e in enumerate(entries) if e.startswith("-")), len(entries))]
        )
        visible = min(found, usable)
        evidence += f"; CUDA_VISIBLE_DEVICES={cvd!r}"
    return GpuPresence(found=found, visible=visible, evidence=evidence.strip("; "))


def _is_char_device(path: str) -> bool:
    """Whether `path` is a character device (what a GPU's /dev/nvidia<N> is; a regular file of
    that name is not a GPU)."""
    try:
        return stat.S_ISCHR(os.stat(path).st_mode)
    except OSError:
        return False


def _nvidia_smi(path: str) -> list[str]:
    """GPU names `nvidia-smi -L` lists ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: ...)"); [] without
    it."""
    exe = shutil.which("nvidia-smi", path=path)
    if not exe:
        return []
    try:
        raw = subprocess.run([exe, "-L"], capture_output=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    out = bounded_parse.tool_text(raw)  # any bytes: not UTF-8, control characters
    return [m.group(1).strip() for m in re.finditer(r"^GPU \d+: ([^(\n]+)", out, re.M)]


def libraries_not_loaded(log_text: str) -> list[str]:
    """The libraries TensorFlow's log says it could not load, in order, once each."""
    return list(dict.fromkeys(_NOT_LOADED.findall(log_text)))


def check(
    accelerator: str,
    presence: GpuPresence,
    registered: int,
    not_loaded: list[str],
    cuda_build: bool = True,
) -> None:
    """Raise UserInputError (--accelerator) when TensorFlow registered fewer GPUs than this process
    can see, or
    none where `--accelerator gpu` asks for one; `--accelerator cpu` accepts anything."""
    if (
        accelerator == "cpu"
        or registered >= presence.visible
        and (accelerator != "gpu" or registered)
    ):
        return
    if not cuda_build:
        why = "this TensorFlow is a CPU-only build (tensorflow-cpu, or the CPU image)"
    elif not_loaded:
        why = f"it could not load {', '.join(not_loaded)} (TensorFlow's log above says why)"
    else:
        why = (
            "see TensorFlow's log above for what it could not load (it logs that at warning level: "
            "unset "
            "TF_CPP_MIN_LOG_LEVEL to see it)"
        )
    have = (
        f"this machine has {presence.visible} GPU(s) ({presence.evidence})"
        if presence.visible
        else "--accelerator gpu asks for a GPU"
    )
    raise UserInputError(
        "--accelerator",
        f"{have} but TensorFlow registered {registered}: {why}. The run stops before training "
        "rather than "
        "train on the CPU unnoticed. Make every CUDA library TensorFlow opens resolvable (the "
        "generic-trainer "
        "GPU image lists each nvidia/*/lib directory in /etc/ld.so.conf.d; elsewhere put them on "
        "LD_LIBRARY_PATH), or pass --accelerator cpu to train on the CPU on purpose.",
    )


@contextlib.contextmanager
def tee_stderr() -> Iterator[list[str]]:
    """Collect what is written to file descriptor 2 (TensorFlow's C++ log) in the block, passing it
    on as it
    comes (a thread copies a pipe to the real stderr: nothing is held back if the process dies)."""
    chunks: list[bytes] = []
    text: list[str] = []
    sys.stderr.flush()
    saved = os.dup(2)
    read_end, write_end = os.pipe()

    def copy() -> None:
        while data := os.read(read_end, 65536):
            os.write(saved, data)
            chunks.append(data)

    thread = threading.Thread(target=copy, name="stderr-tee", daemon=True)
    thread.start()
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield text
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # closes the pipe's last write end: the thread reads to the end and stops
        thread.join(timeout=10)
        os.close(read_end)
        os.close(saved)
        text.append(b"".join(chunks).decode(errors="replace"))


def registered_gpus() -> tuple[int, list[str], bool]:
    """(GPUs TensorFlow registered, libraries its log says it could not load, whether it is a CUDA
    build).

    Imports TensorFlow; its C++ log of the import and device registration is read on the way to
    stderr."""
    with tee_stderr() as text:
        import tensorflow as tf

        count = len(tf.config.list_physical_devices("GPU"))
    return (
        count,
        libraries_not_loaded("".join(text)),
        bool(tf.sysconfig.get_build_info().get("is_cuda_build")),
    )


def usable_gpus(
    accelerator: str = "auto", environ: Mapping[str, str] | None = None
) -> tuple[int, str]:
    """(GPUs to train on, words for the strategy log line: GPUs found and registered; the caller
    adds those used).

    Raises UserInputError when this machine has GPUs TensorFlow did not register (see `check`); with
    `cpu`,
    TensorFlow is told to use none."""
    if accelerator not in ACCELERATORS:
        raise UserInputError(
            "--accelerator", f"{accelerator!r} is not one of {', '.join(ACCELERATORS)}"
        )
    presence = detect(environ)
    registered, not_loaded, cuda_build = registered_gpus()
    check(accelerator, presence, registered, not_loaded, cuda_build)
    if accelerator == "cpu" and registered:
        import tensorflow as tf

        tf.config.set_visible_devices([], "GPU")
        log.info(
            "--accelerator cpu: the %d GPU(s) TensorFlow registered are left unused", registered
        )
        return 0, f"{presence.words()} gpus_registered={registered} (--accelerator cpu)"
    return registered, f"{presence.words()} gpus_registered={registered}"
