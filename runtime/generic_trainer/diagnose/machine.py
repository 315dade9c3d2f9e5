"""What this machine offers train, found without TensorFlow: Python, the module's tf.keras, the GPUs
it shows, the CUDA libraries TensorFlow would open, memory and disk where the outputs go."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import sys
import tempfile

from generic_trainer.diagnose import dlopen
from generic_trainer.diagnose.report import Check, fail, ok, warn
from generic_trainer.diagnose.request import DoctorRequest, Place
from generic_trainer.fit import accelerator, keras_auto

GIB = 1 << 30
LOW_MEMORY = 2 * GIB  # below: a warning (TensorFlow alone takes about 1 GiB)
LOW_DISK = 1 * GIB
LIBRARY_FIX = (
    "make every CUDA library TensorFlow opens resolvable (the generic-trainer GPU image lists each "
    "nvidia/*/lib directory in /etc/ld.so.conf.d; elsewhere put them on LD_LIBRARY_PATH), or pass "
    "--accelerator cpu to train on the CPU on purpose"
)


def flags_check(request: DoctorRequest) -> Check:
    """Whether train would take the flags' values (one line for every value it would refuse)."""
    if request.flag_problems:
        return fail("flags", "; ".join(request.flag_problems), "correct the flags named")
    return ok("flags", "train takes every value given")


def python_check() -> Check:
    """The Python train would run on (the lock files are for 3.10 to 3.12)."""
    version = ".".join(map(str, sys.version_info[:3]))
    detail = f"{version} ({sys.executable})"
    if (3, 10) <= sys.version_info[:2] <= (3, 12):
        return ok("python", detail)
    return warn("python", detail, "generic-trainer is built and tested on Python 3.10 to 3.12")


def keras_check(request: DoctorRequest) -> Check:
    """The Keras `tf.keras` would be for the module (--keras auto reads the module:
    fit/keras_auto.py)."""
    keras, why = request.keras, request.keras_reason
    if keras == "auto":
        if request.task:
            keras, why = "keras3", "--task: a Task runs on Keras 3"
        elif request.module_file:
            keras, why = keras_auto.decide(
                request.module_file or "", request.gcs_root, request.storage
            )
        else:
            keras, why = "keras3", "--keras auto with no --module-file given: Keras 3"
    distribution = "tf-keras" if keras == "tf_keras" else "keras"
    try:
        version = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return fail(
            "keras",
            f"tf.keras would be {keras} ({why}), but {distribution} is not installed",
            f"pip install {distribution}, or pass --keras "
            + ("keras3" if keras == "tf_keras" else "tf_keras"),
        )
    return ok("keras", f"tf.keras is {keras} {version}: {why}")


def gpus_check(presence: accelerator.GpuPresence) -> Check:
    """The GPUs this machine shows (device files, nvidia-smi), narrowed by CUDA_VISIBLE_DEVICES."""
    if not presence.found:
        return ok("gpus", "none (no /dev/nvidia<N>, no nvidia-smi): train runs on the CPU")
    return ok("gpus", presence.words())


def driver_version(proc_file: str = "/proc/driver/nvidia/version") -> str | None:
    """The NVIDIA kernel driver's version (`NVRM version: ... Kernel Module  550.54.15 ...`), or
    None."""
    try:
        with open(proc_file, encoding="utf-8", errors="replace") as f:
            first = f.read(4096).splitlines()[0]
    except (OSError, IndexError):
        return None
    words = first.split()
    return next((w for w in words if w[:1].isdigit() and "." in w), None)


def cuda_libraries_check(request: DoctorRequest, presence: accelerator.GpuPresence) -> Check:
    """Every CUDA library TensorFlow opens, resolved as dlopen from its loader finds it
    (diagnose/dlopen)."""
    site = request.site_packages or dlopen.tensorflow_site()
    name = "cuda_libraries"
    if site is None:
        return fail(name, "TensorFlow is not installed", "pip install generic-trainer's lock files")
    if not os.path.isdir(os.path.join(site, "nvidia")):
        if presence.visible:
            return fail(
                name,
                f"no CUDA libraries under {site} (nvidia/*/lib) but {presence.visible} GPU(s) here",
                "use the GPU image, or install tensorflow[and-cuda] (the pip CUDA libraries)",
            )
        return ok(name, f"none under {site}: a CPU install (no GPU here)")
    try:
        cache = dlopen.read_cache()
    except dlopen.CacheUnreadable as e:
        return warn(name, f"not checked: {e}", "run doctor where ldconfig is on PATH or in /sbin")
    found, problems = dlopen.unresolved(site, request.environ.get("LD_LIBRARY_PATH", ""), cache)
    if not problems:
        return ok(name, f"all {len(found)} resolve from {dlopen.LOADER} under {site}")
    missing = ", ".join(dict.fromkeys(p.split(":")[0] for p in problems))
    if presence.visible:
        return fail(
            name, f"TensorFlow could not load {missing}: it would train on the CPU", LIBRARY_FIX
        )
    return warn(name, f"{missing} would not load on a GPU (no GPU here)", LIBRARY_FIX)


def memory_check(meminfo: str = "/proc/meminfo", cgroup: str = "/sys/fs/cgroup") -> Check:
    """Memory available to train: /proc/meminfo's MemAvailable, and the cgroup's limit when
    lower."""
    available = _meminfo_available(meminfo)
    limit = _cgroup_left(cgroup)
    if available is None and limit is None:
        return warn("memory", "unknown (no /proc/meminfo)", "")
    left = min(x for x in (available, limit) if x is not None)
    detail = f"{left / GIB:.1f} GiB available" + (
        " (the container's memory limit)" if limit is not None and limit == left else ""
    )
    if left < LOW_MEMORY:
        return warn(
            "memory", detail, "give the job more memory: TensorFlow alone takes about 1 GiB"
        )
    return ok("memory", detail)


def _meminfo_available(path: str) -> int | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_left(root: str) -> int | None:
    """cgroup v2's memory.max minus memory.current, or None without a limit."""
    try:
        with open(os.path.join(root, "memory.max")) as f:
            limit = f.read().strip()
        with open(os.path.join(root, "memory.current")) as f:
            used = int(f.read().strip())
    except (OSError, ValueError):
        return None
    return None if limit == "max" or not limit.isdigit() else max(0, int(limit) - used)


def disk_checks(request: DoctorRequest) -> list[Check]:
    """Disk free, and writable, where each output would go (and the temporary directory)."""
    places = list(request.outputs) or []
    tmp = tempfile.gettempdir()
    checks = [_disk(p, request.gcs_root) for p in places]
    checks.append(_disk(Place("temporary files", tmp, tmp), request.gcs_root))
    if not request.outputs:
        checks.insert(
            0,
            warn(
                "outputs",
                "no --model-dir (nor $AIP_MODEL_DIR): train would stop, it needs one",
                "pass --model-dir DIR (a directory or gs:// URI)",
            ),
        )
    return checks


def _disk(place: Place, gcs_root: str) -> Check:
    name = f"disk {place.flag}"
    if place.value.startswith("gs://") and not os.path.isdir(gcs_root):
        return fail(
            name,
            f"{place.value}: {gcs_root} is not mounted (train writes gs:// through the mount)",
            "mount the bucket with Cloud Storage FUSE (Vertex AI and KFP on GKE mount /gcs), "
            "or pass --gcs-root where it is mounted",
        )
    existing = place.local
    while not os.path.exists(existing) and os.path.dirname(existing) != existing:
        existing = os.path.dirname(existing)
    free = shutil.disk_usage(existing).free
    detail = f"{free / GIB:.1f} GiB free at {existing}" + (
        f" ({place.value})" if place.value != existing else ""
    )
    if not os.access(existing, os.W_OK | os.X_OK):
        return fail(name, detail + ", not writable by this user", "choose a directory it can write")
    if free < LOW_DISK:
        return warn(name, detail, "free some space, or write the outputs elsewhere")
    return ok(name, detail)
