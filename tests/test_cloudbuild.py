"""cloudbuild.yaml: parsed, every substitution defined, every file it uses present, and its
component-compiling step run here (in a copy of components/) for a commit tag."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest
import yaml
from conftest import REPO

BUILTINS = {
    "PROJECT_ID",
    "BUILD_ID",
    "PROJECT_NUMBER",
    "LOCATION",
    "COMMIT_SHA",
    "SHORT_SHA",
    "REVISION_ID",
    "REPO_NAME",
    "REPO_FULL_NAME",
    "BRANCH_NAME",
    "TAG_NAME",
    "REF_NAME",
    "TRIGGER_NAME",
    "SERVICE_ACCOUNT",
}
# `$$` is a literal dollar; `$NAME` / `${NAME}` are Cloud Build substitutions.
SUBSTITUTION = re.compile(r"(?<!\$)\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


@pytest.fixture(scope="module")
def build() -> dict:
    return yaml.safe_load((REPO / "cloudbuild.yaml").read_text())


def _step(build: dict, step_id: str) -> dict:
    return next(s for s in build["steps"] if s.get("id") == step_id)


def _used_substitutions(node) -> set[str]:
    if isinstance(node, dict):
        return set().union(*(_used_substitutions(v) for v in node.values())) if node else set()
    if isinstance(node, list):
        return set().union(*(_used_substitutions(v) for v in node)) if node else set()
    if isinstance(node, str):
        return {a or b for a, b in SUBSTITUTION.findall(node.replace("$$", ""))}
    return set()


def test_every_substitution_is_defined(build):
    used = _used_substitutions({k: v for k, v in build.items() if k != "substitutions"})
    used |= _used_substitutions(build["substitutions"])
    undefined = {
        name for name in used if name not in BUILTINS and name not in build["substitutions"]
    }
    assert not undefined, f"cloudbuild.yaml uses undefined substitutions {undefined}"
    assert all(
        name.startswith("_") for name in build["substitutions"]
    )  # Cloud Build's rule for user ones
    assert (
        build["options"]["dynamicSubstitutions"] is True
    )  # _IMAGE's default refers to ${PROJECT_ID}


def test_builds_the_trainer_dockerfile_tagged_with_commit_and_latest(build):
    step = _step(build, "build")
    assert step["name"] == "gcr.io/cloud-builders/docker" and step["args"][0] == "build"
    dockerfile = next(a.split("=", 1)[1] for a in step["args"] if a.startswith("--file="))
    assert (REPO / dockerfile).is_file() and dockerfile == "images/trainer/Dockerfile"
    assert (
        step["args"][-1] == "."
    )  # the context is the repository root, as the Dockerfile's COPY lines expect
    for line in (REPO / dockerfile).read_text().splitlines():
        if line.startswith("COPY") and "--from=" not in line:
            for src in line.split()[1:-1]:
                assert list(REPO.glob(src)), (
                    f"{dockerfile} copies {src}, which the build context lacks"
                )
    build_args = {a.split("=", 2)[1] for a in step["args"] if a.startswith("--build-arg=")}
    assert build_args <= set(re.findall(r"^ARG (\w+)", (REPO / dockerfile).read_text(), re.M))
    tags = [a.split("=", 1)[1] for a in step["args"] if a.startswith("--tag=")]
    assert tags == ["${_IMAGE}:${COMMIT_SHA}", "${_IMAGE}:latest"]
    assert _step(build, "push")["args"] == ["push", "--all-tags", "${_IMAGE}"]
    assert set(build["images"]) == set(tags)
    order = [s["id"] for s in build["steps"]]
    assert (
        order.index("check-commit")
        < order.index("build")
        < order.index("push")
        < order.index("upload-components")
    )


def _script(step: dict) -> str:
    assert step["entrypoint"] == "bash" and step["args"][0] == "-c"
    return step["args"][1]


def test_compile_step_recompiles_the_component_yaml_for_the_pushed_tag(build, tmp_path):
    script = _script(_step(build, "compile-components"))
    commands = [line.strip() for line in script.splitlines() if line.strip()]
    pip = next(c for c in commands if c.startswith("pip install"))
    # The kfp it installs is the one the checked-in YAML was compiled with (the dev lock's pin).
    lock_version = re.search(
        r"^kfp==(\S+)$", (REPO / "requirements" / "dev.lock").read_text(), re.M
    ).group(1)
    assert "sed -n 's/^kfp==//p' requirements/dev.lock" in pip
    import kfp

    assert kfp.__version__ == lock_version
    # Run the step's python commands, with its substitutions filled in, in a copy of components/.
    work = tmp_path / "workspace"
    shutil.copytree(
        REPO / "components", work / "components", ignore=shutil.ignore_patterns("__pycache__")
    )
    image = "us-central1-docker.pkg.dev/my-project/generic-trainer/trainer"
    python_lines = [c for c in commands if c.startswith("python ")]
    assert python_lines, script
    for line in python_lines:
        line = (
            line.replace("${_IMAGE}", image).replace("${COMMIT_SHA}", "0123abc").replace("$$", "$")
        )
        args = [a.strip('"') for a in line.split()[1:]]
        proc = subprocess.run(
            [sys.executable, *args], cwd=work, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in ("trainer", "tuner"):
        compiled = yaml.safe_load((work / "components" / name / "component.yaml").read_text())
        executor = next(iter(compiled["deploymentSpec"]["executors"].values()))
        assert executor["container"]["image"] == f"{image}:0123abc"
        assert (REPO / "components" / name / "component.yaml").is_file()


def test_upload_step_copies_both_components_for_commit_and_latest(build):
    script = _script(_step(build, "upload-components"))
    assert "for name in trainer tuner" in script
    assert 'for version in "${COMMIT_SHA}" latest' in script
    assert '"components/$$name/component.yaml"' in script
    assert '"${_COMPONENTS_URI}/$$version/$$name/component.yaml"' in script
    assert _step(build, "check-commit")["args"][1].strip().startswith('test -n "$COMMIT_SHA"')
