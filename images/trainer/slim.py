"""What the trainer image installs, and what it leaves out of it (images/trainer/Dockerfile's
builder stage).

Standard library only: it runs with the base image's python3 before the virtual environment exists,
and with the venv's python after. Subcommands:

  requirements ACCELERATOR RUNTIME_LOCK CUDA_LOCK
      the pinned lines to install (stdout): both locks for `cuda`, the runtime lock with
      TensorFlow's CPU-only wheel for `cpu`; never what LEAVE_OUT names
  prune-dists UV      (venv python) uninstall what the runtime no longer needs
  check UV            (venv python) `uv pip check`, allowing only what LEAVE_OUT and the CPU
                      wheel explain
  prune-files SITE_PACKAGES   delete files the runtime never loads (PRUNE_GLOBS)
  sizes SITE_PACKAGES [--json]  MB each installed distribution costs (its files + .pyc)

The left-out distributions are never imported by the runtime: TensorFlow's own Python never imports
libclang; tensorboard-data-server is the server of `tensorboard --logdir`, not needed to write
summaries; the Google Cloud clients Apache Beam's `gcp` extra pulls in for its ML, Spanner,
Bigtable, SQL, DLP, KMS, ... connectors are not used by import-examples or transform (Dataflow's own
clients, storage, BigQuery, Pub/Sub and Datastore stay); TensorFlow never loads cuRAND (it has its
own RNG).
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys

# Distribution -> why the image leaves it out. Their own dependencies go too, unless something kept
# needs them.
LEAVE_OUT = {
    "libclang": "TensorFlow's Python never imports clang (used by its source generators only)",
    "tensorboard-data-server": "serves `tensorboard --logdir`; training only writes event files",
    "google-cloud-aiplatform": "Beam's ML connectors (and vertex-job, which runs where jobs are "
    "launched)",
    "google-cloud-bigtable": "Beam's Bigtable connector",
    "google-cloud-spanner": "Beam's Spanner connector",
    "google-cloud-dlp": "Beam's DLP transforms",
    "google-cloud-kms": "Beam's KMS-keyed transforms",
    "google-cloud-language": "Beam's ML connectors",
    "google-cloud-secret-manager": "Beam's ML connectors",
    "google-cloud-videointelligence": "Beam's ML connectors",
    "google-cloud-vision": "Beam's ML connectors",
    "google-cloud-recommendations-ai": "Beam's ML connectors",
    "cloud-sql-python-connector": "Beam's Cloud SQL connector",
    "pg8000": "Beam's Cloud SQL connector",
    "pymysql": "Beam's Cloud SQL connector",
    "python-tds": "Beam's Cloud SQL connector",
    "keyrings-google-artifactregistry-auth": "pip's keyring for Artifact Registry; nothing "
    "pip-installs in the image",
    "widgetsnbextension": "ipywidgets' classic-notebook frontend (TFMA's notebook view); never "
    "imported",
    "jupyterlab-widgets": "ipywidgets' JupyterLab frontend (TFMA's notebook view); never imported",
    "nvidia-curand-cu12": "TensorFlow never loads cuRAND (its own Philox RNG); nothing else in "
    "cuda.lock needs it",
}

# The runtime's distribution, the root of what is kept.
ROOT = "generic-trainer"
# Installed with --no-deps (requirements/no-deps.txt, copied beside this file in the image build):
# kept as roots too, and their declared requirements are theirs to leave unmet (the lock holds what
# they use).
NO_DEPS_FILE = "no-deps.txt"


def no_deps_names(path: str = NO_DEPS_FILE) -> set[str]:
    """The distributions of the no-deps requirements file (none when it is absent)."""
    if not os.path.isfile(path):
        return set()
    with open(path, encoding="utf-8") as f:
        lines = [line.split("#")[0].strip() for line in f]
    return {canonical(re.split(r"[=<>!~ ;\[]", line)[0]) for line in lines if line}


# TensorFlow's CPU-only wheel: the same `tensorflow` package without the CUDA kernels (-470 MB).
CPU_WHEEL = {"tensorflow": "tensorflow-cpu"}

# Files the runtime never loads (globs relative to site-packages).
PRUNE_GLOBS = [
    "tensorflow/include",  # C++ headers, only to compile custom ops (~400 MB)
    "**/tests",  # test suites of pandas, numpy, pyarrow, ...
    "apache_beam/**/*_test.py",  # Beam's tests live beside its modules
    "apache_beam/examples",
    "tensorflow_transform/**/*_test.py",
    "tfx_bsl/**/*_test.py",
    "tensorflow_model_analysis/**/*_test.py",
    "fairness_indicators/**/*_test.py",
    "jedi/third_party",  # typeshed stubs for IPython's completion (TFMA imports IPython), ~32 MB
    "pyarrow/include",  # headers
    "pyarrow/_pyarrow_cpp_tests*.so",
    "pyarrow/*flight*",  # Arrow Flight RPC: only `import pyarrow.flight` loads it
    "nvidia/*/include",  # CUDA headers
    # multi-GPU cuSOLVER: TensorFlow loads libcusolver only
    "nvidia/cusolver/lib/libcusolverMg.so*",
    # the alternate NVRTC build; cuDNN loads libnvrtc.so.12
    "nvidia/cuda_nvrtc/lib/libnvrtc*.alt.so*",
    "nvidia/cuda_nvcc/nvvm/lib64",  # libnvvm: XLA compiles PTX with its own LLVM, then ptxas
    "nvidia/cublas/lib/libnvblas.so*",  # the BLAS drop-in shim
    "nvidia/cufft/lib/libcufftw.so*",  # the FFTW-compatible shim
    "nvidia/nccl/lib/libnccl_device.*",  # NCCL's device-API IR, for user kernels only
    "**/*.a",  # static libraries
    # Cython sources and declarations, C/C++ headers, type stubs: read by compilers and IDEs only
    "**/*.pyx",
    "**/*.pxd",
    "**/*.pxi",
    "**/*.pyi",
    "**/*.h",
    # StableHLO's Python bindings (tensorflow.compiler.mlir.stablehlo): nothing in TensorFlow,
    # Keras, TFX's libraries or the runtime imports them (15 MB)
    "tensorflow/compiler/mlir/stablehlo/stablehlo_extension*.so",
    # TensorBoard's web front end: only `tensorboard --logdir` serves it (its data server is left
    # out too); writing summaries never reads it
    "tensorboard/webfiles.zip",
    # Pillow's AVIF codec: loaded only to open or save .avif images (PIL.AvifImagePlugin guards the
    # import), 5 MB
    "PIL/_avif.*.so",
    "pillow.libs/libavif*.so*",
]

CHECK_LINE = re.compile(
    r"The package `(?P<pkg>[^`]+)` requires `(?P<name>[A-Za-z0-9_.\-]+)(?P<spec>[^`]*)`, "
    r"but it's not installed"
)


def canonical(name: str) -> str:
    """PEP 503 normalised distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_lines(path: str) -> list[tuple[str, str]]:
    """(canonical name, `name==version` line) of each pin in a lock file."""
    pins = []
    with open(path) as f:
        for line in f:
            m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;\\]+)", line)
            if m:
                pins.append((canonical(m.group(1)), f"{m.group(1)}=={m.group(2)}"))
    return pins


def requirements(accelerator: str, runtime_lock: str, cuda_lock: str) -> list[str]:
    """The pins to install: both locks' for `cuda`; the runtime lock's, TensorFlow's CPU wheel, for
    `cpu`.
    Never what LEAVE_OUT names."""
    if accelerator not in ("cpu", "cuda"):
        raise SystemExit(f"slim.py: ACCELERATOR must be cpu or cuda, not {accelerator!r}")
    if accelerator == "cuda" and not os.path.isfile(cuda_lock):
        here = sorted(
            f
            for f in os.listdir(os.path.dirname(cuda_lock) or ".")
            if f.startswith("cuda") and f.endswith(".lock")
        )
        raise SystemExit(
            f"slim.py: CUDA_LOCK {cuda_lock!r} is not a lock file here; expected one of {here}"
        )
    out = []
    for path in [runtime_lock, cuda_lock] if accelerator == "cuda" else [runtime_lock]:
        for name, line in lock_lines(path):
            if name in LEAVE_OUT:
                continue
            if accelerator == "cpu" and name in CPU_WHEEL:
                line = CPU_WHEEL[name] + line[line.index("==") :]
            out.append(line)
    return out


def installed() -> dict[str, object]:
    from importlib.metadata import distributions

    return {canonical(d.metadata["Name"]): d for d in distributions()}


def kept(dists: dict[str, object]) -> set[str]:
    """The runtime's closure: ROOT and what it requires (extras followed), never entering
    LEAVE_OUT."""
    from packaging.requirements import Requirement

    provided = {
        cpu: full for full, cpu in CPU_WHEEL.items() if cpu in dists
    }  # tensorflow-cpu stands for tensorflow
    aliases = {full: cpu for cpu, full in provided.items()}
    seen: set[tuple[str, tuple[str, ...]]] = set()
    # The GPU image's CUDA libraries are TensorFlow's `and-cuda` extra, which nothing requires:
    # without this
    # root prune-dists would uninstall every one of them (elf.py check fails the build when one is
    # missing).
    stack = [(ROOT, ()), ("tensorflow", ("and-cuda",))]
    stack += [(name, ()) for name in sorted(no_deps_names())]
    while stack:
        name, extras = stack.pop()
        name = aliases.get(name, name)
        if name in LEAVE_OUT or (name, extras) in seen or name not in dists:
            continue
        seen.add((name, extras))
        for spec in dists[name].requires or []:
            req = Requirement(spec)
            wanted = req.marker is None or any(
                req.marker.evaluate({"extra": e}) for e in ("", *extras)
            )
            if wanted:
                stack.append((canonical(req.name), tuple(sorted(req.extras))))
    return {name for name, _ in seen}


def prune_dists(uv: str) -> None:
    dists = installed()
    if ROOT not in dists:
        raise SystemExit(f"slim.py: {ROOT} is not installed in {sys.prefix}")
    extra = sorted(set(dists) - kept(dists))
    if extra:
        print(
            f"slim.py: uninstalling {len(extra)} distributions the runtime does not need: "
            f"{' '.join(extra)}"
        )
        subprocess.run([uv, "pip", "uninstall", "--python", sys.executable, *extra], check=True)


def allowed_complaint(line: str, dists: dict[str, object]) -> bool:
    """A `uv pip check` line explained by LEAVE_OUT or by the CPU wheel standing for tensorflow."""
    owner = re.match(r"The package `([A-Za-z0-9_.\-]+)", line)
    if owner and canonical(owner.group(1)) in no_deps_names():
        return True
    m = CHECK_LINE.search(line)
    if not m:
        return False
    name = canonical(m.group("name"))
    if name in LEAVE_OUT:
        return True
    cpu = CPU_WHEEL.get(name)
    if cpu and cpu in dists:
        from packaging.specifiers import SpecifierSet

        return SpecifierSet(m.group("spec").replace(" ", "")).contains(dists[cpu].version)
    return False


def check(uv: str) -> None:
    proc = subprocess.run(
        [uv, "pip", "check", "--python", sys.executable], capture_output=True, text=True
    )
    lines = [
        line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("The package")
    ]
    dists = installed()
    wrong = [line for line in lines if not allowed_complaint(line, dists)]
    if wrong or (proc.returncode != 0 and not lines):
        print(proc.stdout + proc.stderr, file=sys.stderr)
        raise SystemExit(
            "slim.py: the installed distributions do not fit together: " + "; ".join(wrong)
        )
    print(f"slim.py: dependencies consistent ({len(lines)} requirement(s) left out on purpose)")


def prune_files(site: str) -> int:
    removed = 0
    for pattern in PRUNE_GLOBS:
        for path in sorted(glob.glob(os.path.join(site, pattern), recursive=True)):
            if not os.path.lexists(path):
                continue
            size = tree_size(path)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.remove(path)
            removed += size
    print(f"slim.py: pruned {removed / 1e6:.0f} MB of files the runtime never loads")
    return removed


def tree_size(path: str) -> int:
    if not os.path.isdir(path) or os.path.islink(path):
        return os.lstat(path).st_size
    return sum(os.lstat(os.path.join(d, f)).st_size for d, _, files in os.walk(path) for f in files)


def sizes(site: str) -> list[tuple[str, str, int]]:
    """(name, version, bytes) per distribution: its RECORD's files that exist, plus their compiled
    .pyc."""
    import csv

    rows = []
    for record in glob.glob(os.path.join(site, "*.dist-info", "RECORD")):
        meta = os.path.basename(os.path.dirname(record))[: -len(".dist-info")]
        name, _, version = meta.rpartition("-")
        total = 0
        with open(record, newline="") as f:
            for row in csv.reader(f):
                path = os.path.normpath(os.path.join(site, row[0]))
                if not os.path.isfile(path):
                    continue
                total += os.lstat(path).st_size
                if path.endswith(".py"):
                    stem = os.path.splitext(os.path.basename(path))[0]
                    for pyc in glob.glob(
                        os.path.join(os.path.dirname(path), "__pycache__", stem + ".*.pyc")
                    ):
                        total += os.lstat(pyc).st_size
        rows.append((canonical(name), version, total))
    rows.sort(key=lambda r: -r[2])
    return rows


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    cmd, args = argv[0], argv[1:]
    if cmd == "requirements":
        print("\n".join(requirements(*args)))
    elif cmd == "prune-dists":
        prune_dists(args[0])
    elif cmd == "check":
        check(args[0])
    elif cmd == "prune-files":
        prune_files(args[0])
    elif cmd == "sizes":
        rows = sizes(args[0])
        if "--json" in args:
            print(json.dumps([{"name": n, "version": v, "bytes": b} for n, v, b in rows]))
        else:
            for name, version, size in rows:
                print(f"{size / 1e6:9.1f}  {name}=={version}")
            print(f"{sum(r[2] for r in rows) / 1e6:9.1f}  total ({len(rows)} distributions)")
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
