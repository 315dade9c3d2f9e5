"""Does every CUDA library TensorFlow opens on a GPU resolve by soname, as dlopen from its loader finds it?

TensorFlow's GPU loader (xla/tsl dso_loader) sits in `tensorflow/libtensorflow_framework.so.2` and calls
`dlopen("libcusolver.so.11")` etc. with a bare soname. glibc then searches, in this order: the caller's
DT_RPATH (only when it has no DT_RUNPATH), LD_LIBRARY_PATH, the caller's DT_RUNPATH, the ld.so cache
(`/etc/ld.so.cache`, built by `ldconfig` from /etc/ld.so.conf.d), then the default directories. The framework's
RUNPATH names only some `nvidia/*/lib` directories (not cuSOLVER, nvJitLink or NVRTC): without a library path
the GPU is silently not registered and TensorFlow trains on the CPU. This script does that search for each
soname (and, recursively, for each DT_NEEDED of what it finds, from that library) and fails naming what does not
resolve. Standard library only, plus `ldconfig -p` to read the cache.

  python dlopen_check.py SITE_PACKAGES [--ld-cache FILE]      exit 0: all resolve; 1: some do not (listed)

LD_LIBRARY_PATH is read from the environment. --ld-cache reads another cache than the system's (tests build one
with `ldconfig -C FILE -f CONF`).
"""

from __future__ import annotations

import glob
import os
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from elf import CUDA_LOADED, DT_RUNPATH, FROM_THE_DRIVER, SHT_DYNAMIC, Elf  # noqa: E402  (elf.py sits beside this script)

LOADER = "tensorflow/libtensorflow_framework.so.2"
DEFAULT_DIRS = [
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
]


def sonames(site: str) -> list[str]:
    """The sonames TensorFlow (and cuDNN, NVRTC) dlopen: CUDA_LOADED's shared libraries, `*` matched in site."""
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
    """{soname: path} of the ld.so cache (`ldconfig -p`; the first entry of a name wins, as in ld.so)."""
    args = ["-p"] + (["-C", cache_file] if cache_file else [])
    for ldconfig in (
        "ldconfig",
        "/sbin/ldconfig",
        "/usr/sbin/ldconfig",
    ):  # not on a non-root user's PATH
        try:
            out = subprocess.run(
                [ldconfig, *args], capture_output=True, text=True, check=True
            ).stdout
            break
        except (OSError, subprocess.CalledProcessError):
            continue
    else:
        raise SystemExit("dlopen_check.py: ldconfig -p failed: cannot read the ld.so cache")
    cache: dict[str, str] = {}
    for line in out.splitlines()[1:]:
        if "=>" in line and "x86-64" in line:
            name, path = line.strip().split(" ", 1)[0], line.rsplit("=>", 1)[1].strip()
            cache.setdefault(name, path)
    return cache


def search_dirs(caller: str, env_path: str) -> list[str]:
    """The directories a dlopen from `caller` searches before the ld.so cache: its DT_RPATH (only when it has no
    DT_RUNPATH), LD_LIBRARY_PATH, its DT_RUNPATH; $ORIGIN is the caller's directory."""
    elf = Elf.read(caller)
    dirs = elf.dynamic()[1] if elf is not None else []
    origin = os.path.dirname(caller)
    dirs = [d.replace("$ORIGIN", origin).replace("${ORIGIN}", origin) for d in dirs]
    env = [d for d in env_path.split(":") if d]
    return env + dirs if elf is not None and has_runpath(elf) else dirs + env


def has_runpath(elf: Elf) -> bool:
    """Whether the dynamic section has a DT_RUNPATH (then DT_RPATH is ignored and LD_LIBRARY_PATH comes first)."""
    for sh in elf.shdrs:
        if sh[1] == SHT_DYNAMIC:
            with open(elf.path, "rb") as f:
                f.seek(sh[4])
                raw = f.read(sh[5])
            return DT_RUNPATH in (
                struct.unpack_from("<q", raw, i)[0] for i in range(0, len(raw) - 15, 16)
            )
    return False


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
    """({soname: path found}, ["soname: not found ...", ...]) for every soname TensorFlow's loader opens, and
    every DT_NEEDED of what it finds (searched from that library, as ld.so does)."""
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
                f"{name}: not found by dlopen from {who} (its RUNPATH, LD_LIBRARY_PATH, the ld.so cache)"
            )
            continue
        found.setdefault(name, path)
        elf = Elf.read(path)
        if elf is not None:
            todo += [(dep, path) for dep in elf.dynamic()[0]]
    return found, problems


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__)
        return 2
    site = os.path.abspath(argv[0])
    cache = read_cache(argv[argv.index("--ld-cache") + 1] if "--ld-cache" in argv else None)
    found, problems = unresolved(site, os.environ.get("LD_LIBRARY_PATH", ""), cache)
    for name in sonames(site):
        print(f"  {name:42} {found.get(name, 'NOT FOUND')}")
    if problems:
        print(
            "dlopen_check.py: TensorFlow could not load these on a GPU (it would train on the CPU):\n  "
            + "\n  ".join(problems),
            file=sys.stderr,
        )
        return 1
    print(
        f"dlopen_check.py: every CUDA library TensorFlow opens resolves from {LOADER} ({len(found)} libraries)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
