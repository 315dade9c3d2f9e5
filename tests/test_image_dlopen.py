"""The GPU image's CUDA libraries resolve the way TensorFlow's loader dlopens them
(generic_trainer.diagnose.dlopen).

Checked here without building the image: a fake site-packages with TensorFlow's real
libtensorflow_framework.so.2 (its real RUNPATH) and tiny ELF libraries, built with gcc, under the
`nvidia/<package>/lib/<soname>` layout of the CUDA wheels; the ld.so cache is built by the real
ldconfig from the Dockerfile's own ld.so.conf.d step. The image's build and test
(images/trainer/smoke.sh) and `doctor` run the same module in the image.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCKERFILE = REPO / "images" / "trainer" / "Dockerfile"

pytestmark = pytest.mark.skipif(
    not shutil.which("gcc")
    or not os.path.exists("/sbin/ldconfig")
    and not shutil.which("ldconfig"),
    reason="needs gcc and ldconfig (Linux)",
)


@pytest.fixture(scope="module")
def dl():
    from generic_trainer.diagnose import dlopen

    return dlopen


COMMAND = [sys.executable, "-m", "generic_trainer.diagnose.dlopen"]


def _framework() -> Path:
    top = importlib.util.find_spec("tensorflow").submodule_search_locations[0]
    return Path(top) / "libtensorflow_framework.so.2"


def _lib(path: Path, soname: str, src: Path, *link: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["gcc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(path), str(src), *link],
        check=True,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory, dl):
    """A site-packages laid out like the GPU image's: TensorFlow's framework library (a link to the
    real one)
    and one tiny library per CUDA soname; cuSOLVER needs nvJitLink (DT_NEEDED, no RUNPATH), as
    the real one."""
    root = tmp_path_factory.mktemp("site")
    (root / "tensorflow").mkdir()
    (root / "tensorflow" / "libtensorflow_framework.so.2").symlink_to(_framework())
    src = root / "f.c"
    src.write_text("int f(void) { return 1; }\n")
    dl_entries = [rel for rel in dl.CUDA_LOADED if ".so" in rel]
    ordered = sorted(
        dl_entries, key=lambda rel: "cusolver" in rel
    )  # nvJitLink before cuSOLVER links to it
    for rel in ordered:
        rel = rel.replace("*", "5")
        path = root / rel
        if "cusolver" in rel:
            jit = root / "nvidia" / "nvjitlink" / "lib"
            _lib(path, path.name, src, "-Wl,--no-as-needed", f"-L{jit}", "-l:libnvJitLink.so.12")
        else:
            _lib(path, path.name, src)
    return root


def _dockerfile_ld_step() -> str:
    runs = re.findall(r"^RUN (.*?)(?<!\\)\n", DOCKERFILE.read_text(), re.M | re.S)
    steps = [r for r in runs if "ld.so.conf.d" in r]
    assert len(steps) == 1, (
        "the Dockerfile must put the nvidia/*/lib directories into ld.so.conf.d in one RUN step"
    )
    return steps[0]


def test_the_framework_runpath_misses_cusolver_nvjitlink_and_nvrtc(dl, site):
    """Today's image (no library path): the sonames the framework's RUNPATH reaches resolve,
    cuSOLVER, nvJitLink
    and NVRTC do not, and the command fails naming them (the GPU was never registered on an H100
    for this)."""
    found, problems = dl.unresolved(str(site), "", dl.read_cache())
    missing = {p.split(":")[0] for p in problems}
    assert {"libcusolver.so.11", "libnvJitLink.so.12", "libnvrtc.so.12"} <= missing
    for reached in (
        "libcudart.so.12",
        "libcublas.so.12",
        "libcudnn.so.9",
        "libcufft.so.11",
        "libnccl.so.2",
    ):
        assert found[reached] == str(
            site / "tensorflow" / os.path.relpath(found[reached], site / "tensorflow")
        )
        assert reached not in missing
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    out = subprocess.run([*COMMAND, str(site)], capture_output=True, text=True, env=env)
    assert out.returncode == 1
    assert (
        "libcusolver.so.11: not found by dlopen from tensorflow/libtensorflow_framework.so.2"
        in out.stderr
    )


def test_the_dockerfile_ld_so_conf_step_makes_every_soname_resolve(dl, site, tmp_path):
    """The Dockerfile's RUN step, run here against the fake site (its ld.so.conf.d file and
    `ldconfig` pointed at
    a private config and cache): afterwards every soname resolves, each to its nvidia/*/lib file."""
    conf, cache = tmp_path / "cuda.conf", tmp_path / "ld.so.cache"
    step = _dockerfile_ld_step()
    assert "ldconfig" in step and "nvidia/*/lib" in step
    step = (
        step.replace("/opt/venv/lib/python3*/site-packages", str(site))
        .replace("/etc/ld.so.conf.d/generic-trainer-cuda.conf", str(conf))
        .replace("ldconfig", f"ldconfig -X -f {conf} -C {cache}")
        .replace("${ACCELERATOR}", "cuda")
    )
    subprocess.run(["bash", "-c", f"export PATH=$PATH:/sbin:/usr/sbin; {step}"], check=True)
    assert sorted(conf.read_text().split()) == sorted(str(p) for p in site.glob("nvidia/*/lib"))
    found, problems = dl.unresolved(str(site), "", dl.read_cache(str(cache)))
    assert problems == []
    assert found["libcusolver.so.11"] == str(
        site / "nvidia" / "cusolver" / "lib" / "libcusolver.so.11"
    )
    assert set(dl.sonames(str(site))) <= set(found)
    out = subprocess.run(
        [*COMMAND, str(site), "--ld-cache", str(cache)],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"},
    )
    assert out.returncode == 0, out.stderr
    assert "every CUDA library TensorFlow opens resolves" in out.stdout


def test_ld_library_path_works_too_and_a_missing_dependency_is_named(dl, site, tmp_path):
    """LD_LIBRARY_PATH is searched before the RUNPATH; a library's own DT_NEEDED is searched from
    that library
    (cuSOLVER's nvJitLink), so removing it names both."""
    dirs = ":".join(str(p) for p in site.glob("nvidia/*/lib"))
    assert dl.unresolved(str(site), dirs, dl.read_cache())[1] == []
    without_jit = ":".join(d for d in dirs.split(":") if "nvjitlink" not in d)
    problems = dl.unresolved(str(site), without_jit, dl.read_cache())[1]
    assert problems and all(p.startswith("libnvJitLink.so.12: not found") for p in problems)
    assert any("from nvidia/cusolver/lib/libcusolver.so.11" in p for p in problems)
    assert any("from tensorflow/libtensorflow_framework.so.2" in p for p in problems)


def test_rpath_comes_before_ld_library_path_runpath_after(dl, tmp_path):
    """glibc's order: DT_RPATH (only without DT_RUNPATH), LD_LIBRARY_PATH, DT_RUNPATH."""
    src = tmp_path / "f.c"
    src.write_text("int f(void) { return 1; }\n")
    old, new = tmp_path / "rpath" / "libold.so", tmp_path / "runpath" / "libnew.so"
    _lib(old, "libold.so", src, "-Wl,--disable-new-dtags", "-Wl,-rpath,$ORIGIN/a")
    _lib(new, "libnew.so", src, "-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN/a")
    assert dl.search_dirs(str(old), "/env") == [str(old.parent / "a"), "/env"]
    assert dl.search_dirs(str(new), "/env") == ["/env", str(new.parent / "a")]
