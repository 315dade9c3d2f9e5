"""What the trainer image installs and leaves out (images/trainer/slim.py), checked without building
it.

The distributions' metadata comes from the dev venv, which carries the runtime lock's versions: the
runtime's own imports must all come from distributions the image keeps, and what slim.py prunes must
never be a file TensorFlow loads.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from importlib.metadata import packages_distributions, version
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SLIM_PATH = REPO / "images" / "trainer" / "slim.py"
RUNTIME_LOCK = REPO / "requirements" / "runtime.lock"
CUDA_LOCK = REPO / "images" / "trainer" / "cuda.lock"
CUDA_LOCKS = sorted((REPO / "images" / "trainer").glob("cuda*.lock"))
RUNTIME = REPO / "runtime" / "generic_trainer"
# Not in the image on purpose (the README says so): the runtime imports them lazily, with a clear
# error.
NOT_IN_IMAGE = {
    "google.cloud.aiplatform": "vertex-job runs where jobs are launched "
    "(generic-trainer[pipelines])",
    "boto3": "s3:// module files without the /s3 mount (generic-trainer[s3])",
    "botocore": "as boto3",
    "docker": "tfx-pipeline run --docker starts the image's containers from the host, never "
    "inside the image",
    "kfp": "options.component_function, called only by components/build.py to compile the "
    "components",
}


def _load_script(path, name):
    """One of the image's build scripts as a module (they are not part of the package)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def slim():
    return _load_script(SLIM_PATH, "trainer_image_slim")


def pins(lines):
    return dict(line.split("==", 1) for line in lines)


def test_cpu_image_installs_the_locked_tensorflow_cpu_and_no_cuda_wheels(slim):
    lock = dict((name, line.split("==")[1]) for name, line in slim.lock_lines(str(RUNTIME_LOCK)))
    got = pins(slim.requirements("cpu", str(RUNTIME_LOCK), str(CUDA_LOCK)))
    assert got["tensorflow-cpu"] == lock["tensorflow"], (
        "the CPU wheel must be the locked TensorFlow version"
    )
    assert "tensorflow" not in got
    assert not [n for n in got if n.startswith("nvidia-")]
    names = {slim.canonical(n) for n in got}
    assert not names & set(slim.LEAVE_OUT)
    assert names == (set(lock) - set(slim.LEAVE_OUT) - {"tensorflow"}) | {"tensorflow-cpu"}


def test_cuda_image_installs_both_locks_but_what_slim_leaves_out(slim):
    got = {
        slim.canonical(n): v
        for n, v in pins(slim.requirements("cuda", str(RUNTIME_LOCK), str(CUDA_LOCK))).items()
    }
    want = {
        name: line.split("==")[1]
        for path in (RUNTIME_LOCK, CUDA_LOCK)
        for name, line in slim.lock_lines(str(path))
        if name not in slim.LEAVE_OUT
    }
    assert got == want
    assert "tensorflow" in got and "nvidia-cudnn-cu12" in got and "nvidia-curand-cu12" not in got


def test_bad_accelerator_is_refused(slim):
    with pytest.raises(SystemExit, match="ACCELERATOR must be cpu or cuda, not 'gpu'"):
        slim.requirements("gpu", str(RUNTIME_LOCK), str(CUDA_LOCK))


def test_a_cuda_lock_that_is_not_there_is_refused_naming_the_ones_that_are(slim):
    with pytest.raises(
        SystemExit,
        match=r"CUDA_LOCK '.*cuda-blackwel\.lock' is not a lock file here; expected one of "
        r"\['cuda-blackwell\.lock', 'cuda\.lock'\]",
    ):
        slim.requirements("cuda", str(RUNTIME_LOCK), str(CUDA_LOCK.parent / "cuda-blackwel.lock"))
    assert slim.requirements(
        "cpu", str(RUNTIME_LOCK), "no-such.lock"
    )  # the CPU image reads no CUDA lock


def test_every_left_out_distribution_is_locked(slim):
    locked = {name for path in (RUNTIME_LOCK, CUDA_LOCK) for name, _ in slim.lock_lines(str(path))}
    assert set(slim.LEAVE_OUT) <= locked, f"stale LEAVE_OUT entries: {set(slim.LEAVE_OUT) - locked}"


def runtime_imports() -> set[str]:
    """Top-level modules (google.X, google.cloud.X in the namespace packages) the runtime
    imports."""
    found = set()
    for path in RUNTIME.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                parts = name.split(".")
                depth = 3 if parts[:2] == ["google", "cloud"] else 2 if parts[0] == "google" else 1
                found.add(".".join(parts[:depth]))
    return found


def test_the_runtimes_imports_come_from_kept_distributions(slim):
    """Every third-party module the runtime imports is provided by a distribution the image
    keeps."""
    dists = slim.installed()
    kept = slim.kept(dists)
    assert {"tensorflow", "apache-beam", "pyarrow", "tensorflow-transform", "keras-tuner"} <= kept
    assert not kept & set(slim.LEAVE_OUT)
    providers = packages_distributions()
    stdlib = set(sys.stdlib_module_names)
    checked = []
    for module in sorted(runtime_imports()):
        top = module.split(".")[0]
        if top in stdlib or top in ("generic_trainer", "__future__") or module in NOT_IN_IMAGE:
            continue
        if top == "google":
            prefix = module.replace(".", "/")
            owners = {
                slim.canonical(d)
                for d in providers.get("google", [])
                if any(str(f).startswith((prefix + "/", prefix + ".")) for f in _files(d))
            }
        else:
            owners = {slim.canonical(d) for d in providers.get(top, [])}
        assert owners, f"no distribution provides {module}"
        assert owners & kept, (
            f"{module} ({owners}) is imported by the runtime but left out of the image"
        )
        checked.append(module)
    assert len(checked) >= 10, checked


def _files(dist_name: str):
    from importlib.metadata import files

    return files(dist_name) or []


def test_only_left_out_requirements_are_allowed_to_be_missing(slim):
    class Dist:
        def __init__(self, v):
            self.version = v

    tf_version = version("tensorflow")
    cpu = {"tensorflow-cpu": Dist(tf_version)}
    line = "The package `{}` requires `{}`, but it's not installed"
    assert slim.allowed_complaint(line.format("tensorflow", "libclang>=13.0.0"), cpu)
    assert slim.allowed_complaint(line.format("tf-keras", "tensorflow>=2.21,<2.22"), cpu)
    assert not slim.allowed_complaint(line.format("tf-keras", "tensorflow>=2.21,<2.22"), {})
    assert not slim.allowed_complaint(line.format("tf-keras", "tensorflow>=2.22"), cpu)
    assert not slim.allowed_complaint(line.format("keras", "numpy"), cpu)
    assert not slim.allowed_complaint("The package `a` has version 1 but requires `b==2`", cpu)


def test_pruning_keeps_what_tensorflow_loads(slim, tmp_path):
    removed = [
        "tensorflow/include/tensorflow/core/x.h",
        "pandas/tests/frame/test_x.py",
        "apache_beam/io/filesystem_test.py",
        "apache_beam/examples/wordcount.py",
        "pyarrow/include/arrow/api.h",
        "pyarrow/libarrow_flight.so.2500",
        "pyarrow/_flight.cpython-311.so",
        "nvidia/cudnn/include/cudnn.h",
        "nvidia/cusolver/lib/libcusolverMg.so.11",
        "nvidia/cuda_nvrtc/lib/libnvrtc.alt.so.12",
        "nvidia/cuda_nvrtc/lib/libnvrtc-builtins.alt.so.12.9",
        "nvidia/cuda_nvcc/nvvm/lib64/libnvvm.so",
        "nvidia/nccl/lib/libnccl_device.ltoir",
        "nvidia/cublas/lib/libnvblas.so.12",
        "nvidia/cufft/lib/libcufftw.so.11",
        "somepkg/lib/libx.a",
        "pyarrow/lib.pyx",
        "numpy/__init__.pxd",
        "pyarrow/types.pxi",
        "numpy/__init__.pyi",
        "scipy/special/special.h",
        "tensorflow/compiler/mlir/stablehlo/stablehlo_extension.so",
        "tensorboard/webfiles.zip",
        "PIL/_avif.cpython-311-x86_64-linux-gnu.so",
        "pillow.libs/libavif-8a7f9d56.so.16.4.2",
    ]
    kept = [
        "tensorflow/libtensorflow_cc.so.2",
        "tensorflow/python/framework/test_util.py",
        "apache_beam/io/filesystem.py",
        "apache_beam/testing/util.py",
        "pyarrow/libarrow.so.2500",
        "pyarrow/libparquet.so.2500",
        "numpy/testing/__init__.py",
        "nvidia/cusolver/lib/libcusolver.so.11",
        "nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
        "nvidia/cuda_nvrtc/lib/libnvrtc-builtins.so.12.9",
        "nvidia/cuda_nvcc/bin/ptxas",
        "nvidia/cuda_nvcc/nvvm/libdevice/libdevice.10.bc",
        "nvidia/nccl/lib/libnccl.so.2",
        "nvidia/cublas/lib/libcublasLt.so.12",
        "nvidia/cufft/lib/libcufft.so.11",
        "nvidia/cudnn/lib/libcudnn_engines_precompiled.so.9",
        "nvidia/nvjitlink/lib/libnvJitLink.so.12",
        "tensorflow/compiler/mlir/stablehlo/__init__.py",
        "tensorflow/python/profiler/internal/_pywrap_profiler_plugin.so",
        "tensorboard/assets.py",
        "PIL/_imaging.cpython-311-x86_64-linux-gnu.so",
        "PIL/AvifImagePlugin.py",
        "pillow.libs/libwebp-51b0b3f7.so.7.2.0",
        "pyarrow/lib.cpython-311-x86_64-linux-gnu.so",
    ]
    for rel in removed + kept:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * 10)
    assert slim.prune_files(str(tmp_path)) == 10 * len(removed)
    assert [rel for rel in removed if (tmp_path / rel).exists()] == []
    assert [rel for rel in kept if not (tmp_path / rel).exists()] == []


def test_sizes_count_files_and_their_bytecode(slim, tmp_path):
    dist = tmp_path / "demo-1.0.dist-info"
    dist.mkdir()
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "__init__.py").write_bytes(b"x" * 100)
    (tmp_path / "demo" / "__pycache__").mkdir()
    (tmp_path / "demo" / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"x" * 50)
    (dist / "RECORD").write_text(
        "demo/__init__.py,,100\ndemo/gone.py,,7\ndemo-1.0.dist-info/RECORD,,\n"
    )
    [(name, ver, size)] = slim.sizes(str(tmp_path))
    assert (name, ver) == ("demo", "1.0")
    assert size == 150 + (dist / "RECORD").stat().st_size


# ------------------------------------------------------------------------------------------------
# images/trainer/elf.py: strip what the loader never maps, check that what is kept resolves.

ELF_PATH = REPO / "images" / "trainer" / "elf.py"
DOCKERFILE = REPO / "images" / "trainer" / "Dockerfile"


@pytest.fixture(scope="module")
def elf():
    return _load_script(ELF_PATH, "trainer_image_elf")


def _extension(package: str, stem: str) -> Path:
    """An extension module's file, found without importing its package (tensorflow.python: no
    TensorFlow start)."""
    import importlib.util as iu

    top, *rest = package.split(".")
    spec = iu.find_spec(top)
    found = sorted(Path(spec.submodule_search_locations[0], *rest).glob(f"{stem}*.so"))
    assert found, f"{package} has no {stem}*.so extension module"
    return found[0]


def test_strip_keeps_the_mapped_bytes_and_the_module_works(elf, tmp_path):
    """A real extension module with a symbol table (zstandard's C backend, in the runtime lock):
    stripped, the
    bytes its program headers cover are unchanged, the symbol table is gone, and the module still
    works."""
    import shutil
    import subprocess

    original = _extension("zstandard", "backend_c")
    copy = tmp_path / "zstandard" / original.name
    copy.parent.mkdir()
    shutil.copy2(original, copy)
    before = elf.Elf.read(str(copy))
    assert before is not None and ".symtab" in before.names
    end = before.mapped_end()
    saved = elf.strip(str(copy))
    assert saved > 0 and copy.stat().st_size == original.stat().st_size - saved
    after = elf.Elf.read(str(copy))
    assert after.phdrs == before.phdrs
    assert not [n for n in after.names if n in (".symtab", ".strtab") or n.startswith(".debug_")]
    assert {n for n in before.names if not elf.strippable(n)} == set(after.names)
    # The loader reads the file header but for the section header fields (e_shoff, e_shnum,
    # e_shstrndx), and
    # what the program headers cover: all of that is unchanged.
    header = elf.EHDR.size
    assert [f for i, f in enumerate(after.header) if i not in (6, 12, 13)] == [
        f for i, f in enumerate(before.header) if i not in (6, 12, 13)
    ]
    assert copy.read_bytes()[header:end] == original.read_bytes()[header:end]
    assert elf.strip(str(copy)) == 0, "a stripped file has nothing left to strip"
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('zstandard.backend_c', {str(copy)!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "data = b'generic-trainer ' * 1000\n"
        "packed = m.ZstdCompressor(level=3).compress(data)\n"
        "assert m.ZstdDecompressor().decompress(packed) == data and len(packed) < len(data) / 10\n"
        "print('ok', m.__file__)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("ok ") and str(copy) in proc.stdout, (
        proc.stderr
    )


def test_strip_leaves_other_files_alone(elf, tmp_path):
    text = tmp_path / "module.py"
    text.write_text("x = 1\n")
    elf32 = tmp_path / "lib32.so"
    elf32.write_bytes(b"\x7fELF\x01\x01\x01" + b"\0" * 100)  # 32-bit: not handled, left as it is
    short = tmp_path / "short.so"
    short.write_bytes(b"\x7fELF")
    for path in (text, elf32, short):
        before = path.read_bytes()
        assert elf.strip(str(path)) == 0
        assert path.read_bytes() == before
    assert elf.strip_tree(str(tmp_path)) == {}


def test_check_names_each_unresolved_library(elf, tmp_path):
    """TensorFlow's `_pywrap_tfe` alone: the TensorFlow libraries it needs (through its RUNPATH) are
    named; once
    they are where its RUNPATH points, it resolves. The driver's libcuda.so.1 never counts as
    missing."""
    import shutil

    original = _extension("tensorflow.python", "_pywrap_tfe")
    copy = tmp_path / "tensorflow" / "python" / original.name
    copy.parent.mkdir(parents=True)
    shutil.copy2(original, copy)
    needed, dirs = elf.Elf.read(str(copy)).dynamic()
    assert "libtensorflow_framework.so.2" in needed and "$ORIGIN/../" in dirs
    own = [lib for lib in needed if not any(Path(d, lib).exists() for d in elf.SYSTEM_LIB_DIRS)]
    assert "libtensorflow_framework.so.2" in own
    problems = elf.unresolved(str(tmp_path))
    assert problems == [f"tensorflow/python/{original.name}: needs {lib}" for lib in own]
    for lib in own:
        (tmp_path / "tensorflow" / lib).write_bytes(b"")
    assert elf.unresolved(str(tmp_path)) == []
    assert "libcuda.so.1" in elf.FROM_THE_DRIVER


def test_check_names_each_missing_cuda_library(elf, tmp_path):
    for rel in elf.CUDA_LOADED:
        path = tmp_path / rel.replace("*", "9")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
    assert elf.missing_cuda(str(tmp_path)) == []
    (tmp_path / "nvidia/nccl/lib/libnccl.so.2").unlink()
    (tmp_path / "nvidia/cudnn/lib/libcudnn_engines_precompiled.so.9").unlink()
    assert elf.missing_cuda(str(tmp_path)) == [
        "nvidia/cudnn/lib/libcudnn_engines_precompiled.so.9",
        "nvidia/nccl/lib/libnccl.so.2",
    ]
    assert elf.main(["check", str(tmp_path), "--accelerator", "cuda"]) == 1
    assert elf.main(["check", str(tmp_path), "--accelerator", "cpu"]) == 0


@pytest.mark.parametrize("lock", CUDA_LOCKS, ids=lambda p: p.name)
def test_cuda_loaded_matches_what_prune_files_keeps(elf, slim, tmp_path, lock):
    """No PRUNE_GLOBS pattern removes a library TensorFlow or cuDNN loads, and each CUDA lock
    installs them all."""
    for rel in elf.CUDA_LOADED:
        path = tmp_path / rel.replace("*", "9")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
    slim.prune_files(str(tmp_path))
    assert elf.missing_cuda(str(tmp_path)) == []
    packages = {
        name.removeprefix("nvidia-").removesuffix("-cu12").replace("-", "_")
        for name, _ in slim.lock_lines(str(lock))
    }
    for rel in elf.CUDA_LOADED:
        assert rel.split("/")[1] in packages, f"{rel} comes from no package of {lock.name}"


def test_the_builder_strips_and_checks_after_pruning():
    runs = "\n".join(
        line for line in DOCKERFILE.read_text().splitlines() if not line.lstrip().startswith("#")
    )
    order = [
        runs.index(step)
        for step in ("slim.py prune-files", "elf.py strip", "elf.py check", "compileall")
    ]
    assert order == sorted(order), "prune, then strip, then check, then compile"
    assert 'elf.py check "$site" --accelerator "${ACCELERATOR}"' in runs
    assert "images/trainer/elf.py" in runs


def test_the_gpu_image_keeps_tensorflows_and_cuda_extra(slim):
    """Nothing requires TensorFlow's `and-cuda` extra, yet the GPU image needs it: kept() follows it
    (but for what
    LEAVE_OUT names); in the CPU image those packages are not installed, so nothing changes
    there."""

    class Dist:
        def __init__(self, *requires):
            self.requires = list(requires)

    extra = 'extra == "and-cuda"'
    dists = {
        "generic-trainer": Dist("tensorflow>=2.21", "numpy"),
        "numpy": Dist(),
        "tensorflow": Dist(
            "numpy", f"nvidia-cudnn-cu12==9.28; {extra}", f"nvidia-curand-cu12; {extra}"
        ),
        "nvidia-cudnn-cu12": Dist("nvidia-cublas-cu12"),
        "nvidia-cublas-cu12": Dist(),
        "nvidia-curand-cu12": Dist(),
        "libclang": Dist(),
    }
    assert slim.kept(dists) == {
        "generic-trainer",
        "numpy",
        "tensorflow",
        "nvidia-cudnn-cu12",
        "nvidia-cublas-cu12",
    }
    cpu = {
        name: d
        for name, d in dists.items()
        if not name.startswith("nvidia-") and name != "tensorflow"
    }
    cpu["tensorflow-cpu"] = dists["tensorflow"]
    assert slim.kept(cpu) == {"generic-trainer", "numpy", "tensorflow-cpu"}
