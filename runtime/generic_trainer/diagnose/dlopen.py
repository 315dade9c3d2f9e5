"""Does every CUDA library TensorFlow opens on a GPU resolve by soname, as dlopen from its loader
finds it?

TensorFlow's GPU loader (xla/tsl dso_loader) sits in `tensorflow/libtensorflow_framework.so.2` and
calls `dlopen("libcusolver.so.11")` etc. with a bare soname. glibc then searches, in this order: the
caller's DT_RPATH (only when it has no DT_RUNPATH), LD_LIBRARY_PATH, the caller's DT_RUNPATH, the
ld.so cache (`/etc/ld.so.cache`, built by `ldconfig` from /etc/ld.so.conf.d), then the default
directories. The framework's RUNPATH names only some `nvidia/*/lib` directories (not cuSOLVER,
nvJitLink or NVRTC): without a library path the GPU is silently not registered and TensorFlow trains
on the CPU. `unresolved` does that search for each soname (and, recursively, for each DT_NEEDED of
what it finds, from that library). Standard library only, plus `ldconfig -p` to read the cache.
`doctor` runs it; so do the image's build and test:

  python -m generic_trainer.diagnose.dlopen SITE_PACKAGES [--ld-cache FILE]
      exit 0: every library resolves; 1: some do not (listed); 2: usage

LD_LIBRARY_PATH is read from the environment there. --ld-cache reads another cache than the system's
(tests build one with `ldconfig -C FILE -f CONF`).
"""

from __future__ import annotations

import glob
import importlib.util
import os
import subprocess
import sys

from generic_trainer.artifacts import bounded_parse
from generic_trainer.diagnose.elf_dynamic import read_dynamic

LOADER = "tensorflow/libtensorflow_framework.so.2"
# What TensorFlow 2.21 dlopens on a GPU machine (xla/tsl/platform/default/dso_loader.cc and
# dlopen_checker.cc: cudart, cuBLAS, cuBLASLt, cuFFT, cuSOLVER, cuSPARSE and cuDNN before it
# registers a GPU at all; NCCL for multi-GPU all-reduce, CUPTI for GPU profiling), what cuDNN 9
# loads itself (its sub-libraries, NVRTC for its runtime-compiled engines), what XLA runs (ptxas,
# libdevice) and what cuSPARSE/cuSOLVER/cuFFT link (nvJitLink). Paths relative to site-packages; `*`
# matches the minor version.
CUDA_LOADED = [
    "nvidia/cuda_runtime/lib/libcudart.so.12",
    "nvidia/cublas/lib/libcublas.so.12",
    "nvidia/cublas/lib/libcublasLt.so.12",
    "nvidia/cufft/lib/libcufft.so.11",
    "nvidia/cusolver/lib/libcusolver.so.11",
    "nvidia/cusparse/lib/libcusparse.so.12",
    "nvidia/nvjitlink/lib/libnvJitLink.so.12",
    "nvidia/cudnn/lib/libcudnn.so.9",
    "nvidia/cudnn/lib/libcudnn_graph.so.9",
    "nvidia/cudnn/lib/libcudnn_ops.so.9",
    "nvidia/cudnn/lib/libcudnn_cnn.so.9",
    "nvidia/cudnn/lib/libcudnn_adv.so.9",
    "nvidia/cudnn/lib/libcudnn_engines_precompiled.so.9",
    "nvidia/cudnn/lib/libcudnn_engines_runtime_compiled.so.9",
    "nvidia/cudnn/lib/libcudnn_heuristic.so.9",
    "nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
    "nvidia/cuda_nvrtc/lib/libnvrtc-builtins.so.12.*",
    "nvidia/nccl/lib/libnccl.so.2",
    "nvidia/cuda_cupti/lib/libcupti.so.12",
    "nvidia/cuda_nvcc/bin/ptxas",
    "nvidia/cuda_nvcc/nvvm/libdevice/libdevice.10.bc",
]
# Provided at run time by the host's NVIDIA driver (the container runtime injects it), never by the
# image.
FROM_THE_DRIVER = {"libcuda.so.1"}
DEFAULT_DIRS = [
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
]


class CacheUnreadable(OSError):
    """`ldconfig -p` could not be run (no ldconfig here)."""


def tensorflow_site() -> str | None:
    """The site-packages directory TensorFlow is installed in, found without importing it (or
    None)."""
    spec = importlib.util.find_spec("tensorflow")
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.dirname(list(spec.submodule_search_locations)[0])


def sonames(site: str) -> list[str]:
    """The sonames TensorFlow (and cuDNN, NVRTC) dlopen: CUDA_LOADED's shared libraries, `*` matched
    in site."""
    names = []
    for rel in CUDA_LOADED:
        base = os.path.basename(rel)
        if ".so" not in base:
            continue
        if "*" in base:
            found = sorted(glob.glob(os.path.join(site, rel)))
            base = os.path.basename(found[0]) if found else base
        names.append(base)
    return names


def read_cache(cache_file: str | None = None) -> dict[str, str]:
    """{soname: path} of the ld.so cache (`ldconfig -p`; the first entry of a name wins, as in
    ld.so).

    Raises:
      CacheUnreadable: no ldconfig could be run.
    """
    args = ["-p"] + (["-C", cache_file] if cache_file else [])
    for ldconfig in ("ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"):  # not on a user's PATH
        try:
            raw = subprocess.run(
                [ldconfig, *args], capture_output=True, check=True, timeout=30
            ).stdout
            break
        except (OSError, subprocess.SubprocessError):
            continue
    else:
        raise CacheUnreadable("ldconfig -p failed: cannot read the ld.so cache")
    cache: dict[str, str] = {}
    for line in bounded_parse.tool_text(raw).splitlines()[1:]:  # any bytes: not UTF-8, controls
        if "=>" in line and "x86-64" in line:
            name, path = line.strip().split(" ", 1)[0], line.rsplit("=>", 1)[1].strip()
            cache.setdefault(name, path)
    return cache


def search_dirs(caller: str, env_path: str) -> list[str]:
    """The directories a dlopen from `caller` searches before the ld.so cache: its DT_RPATH (only
    when it has no DT_RUNPATH), LD_LIBRARY_PATH, its DT_RUNPATH; $ORIGIN is the caller's
    directory."""
    dynamic = read_dynamic(caller)
    origin = os.path.dirname(caller)
    dirs = [
        d.replace("$ORIGIN", origin).replace("${ORIGIN}", origin)
        for d in (dynamic.dirs if dynamic else ())
    ]
    env = [d for d in env_path.split(":") if d]
    return env + dirs if dynamic is not None and dynamic.runpath else dirs + env


def resolve(name: str, caller: str, env_path: str, cache: dict[str, str]) -> str | None:
    """Where dlopen(name) called from `caller` finds the library, or None."""
    for d in search_dirs(caller, env_path):
        if os.path.isfile(os.path.join(d, name)):
            return os.path.join(d, name)
    if name in cache and os.path.exists(cache[name]):
        return cache[name]
    for d in DEFAULT_DIRS:
        if os.path.isfile(os.path.join(d, name)):
            return os.path.join(d, name)
    return None


def unresolved(site: str, env_path: str, cache: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """What dlopen finds for every soname TensorFlow's loader opens, and every DT_NEEDED of what it
    finds (searched from that library, as ld.so does).

    Args:
      site: the site-packages directory holding tensorflow/ and nvidia/.
      env_path: LD_LIBRARY_PATH's value.
      cache: the ld.so cache (`read_cache`).

    Returns:
      ({soname: path found}, ["soname: not found by dlopen from ...", ...]).
    """
    loader = os.path.join(site, LOADER)
    if not os.path.isfile(loader):
        return {}, [f"{LOADER}: not under {site}"]
    found, problems, seen = {}, [], set()
    todo = [(name, loader) for name in sonames(site)]
    while todo:
        name, caller = todo.pop(0)
        if (name, caller) in seen or name in FROM_THE_DRIVER:
            continue
        seen.add((name, caller))
        path = resolve(name, caller, env_path, cache)
        who = os.path.relpath(caller, site) if caller.startswith(site) else caller
        if path is None:
            problems.append(
                f"{name}: not found by dlopen from {who} "
                "(its RUNPATH, LD_LIBRARY_PATH, the ld.so cache)"
            )
            continue
        found.setdefault(name, path)
        dynamic = read_dynamic(path)
        if dynamic is not None:
            todo += [(dep, path) for dep in dynamic.needed]
    return found, problems


def main(argv: list[str]) -> int:
    """The command: list where each soname resolves; 0 when all do, 1 when some do not, 2 on bad
    usage."""
    if not argv or argv[0].startswith("-"):
        print(__doc__)
        return 2
    site = os.path.abspath(argv[0])
    try:
        cache = read_cache(argv[argv.index("--ld-cache") + 1] if "--ld-cache" in argv else None)
    except CacheUnreadable as e:
        print(f"dlopen: {e}", file=sys.stderr)
        return 1
    found, problems = unresolved(site, os.environ.get("LD_LIBRARY_PATH", ""), cache)
    for name in sonames(site):
        print(f"  {name:42} {found.get(name, 'NOT FOUND')}")
    if problems:
        print(
            "dlopen: TensorFlow could not load these on a GPU (it would train on the CPU):\n  "
            + "\n  ".join(problems),
            file=sys.stderr,
        )
        return 1
    print(
        f"dlopen: every CUDA library TensorFlow opens resolves from {LOADER} "
        f"({len(found)} libraries)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
