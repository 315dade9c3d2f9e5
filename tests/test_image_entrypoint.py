"""The trainer image's ENTRYPOINT script (images/trainer/entrypoint.sh), run on the host with a fake
PATH.

No image and no engine: the script is plain sh, so it runs here with stand-in `generic-trainer` and
`python` programs that print how they were called. What it must do: CLI arguments (`docker run IMAGE
train ...`) get `generic-trainer` in front; a whole command (kfp.local's DockerRunner appends the
component's `generic-trainer train ...` after the ENTRYPOINT; `python`, `sh`) runs as given.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "images" / "trainer" / "entrypoint.sh"
DOCKERFILE = REPO / "images" / "trainer" / "Dockerfile"
IMAGE_PATH = "/usr/local/bin/generic-trainer-entrypoint"


def fake_program(directory: Path, name: str, exit_code: int = 0) -> None:
    """A program that prints its name and each argument on a line, then exits with `exit_code`."""
    path = directory / name
    path.write_text(
        f"#!/bin/sh\necho 'RAN {name}'\n"
        f'for a in "$@"; do printf \'%s\\n\' "$a"; done\nexit {exit_code}\n'
    )
    path.chmod(0o755)


@pytest.fixture
def bin_dir(tmp_path):
    d = tmp_path / "bin"
    d.mkdir()
    fake_program(d, "generic-trainer")
    fake_program(d, "python")
    return d


def entry(bin_dir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["/bin/sh", str(SCRIPT), *args],
        env={"PATH": str(bin_dir)},
        capture_output=True,
        text=True,
        timeout=30,
    )


def ran(proc: subprocess.CompletedProcess) -> list[str]:
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def cli_verbs() -> set[str]:
    from generic_trainer.cli import build_parser

    return {
        verb
        for action in build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
        for verb in action.choices
    }


def script_verbs() -> set[str]:
    m = re.search(r'^VERBS="([^"]*)"', SCRIPT.read_text(), re.M)
    assert m, "entrypoint.sh has no VERBS line"
    return set(m.group(1).split())


def test_verb_list_is_the_clis():
    assert script_verbs() == cli_verbs(), (
        "update VERBS in images/trainer/entrypoint.sh to the CLI's verbs"
    )


def test_cli_arguments_get_generic_trainer(bin_dir):
    config = '{"epochs": 2, "note": "a b"}'
    assert ran(entry(bin_dir, "train", "--custom-config", config, "--model-dir", "/out/m")) == [
        "RAN generic-trainer",
        "train",
        "--custom-config",
        config,
        "--model-dir",
        "/out/m",
    ]
    assert ran(entry(bin_dir, "--help")) == ["RAN generic-trainer", "--help"]
    assert ran(entry(bin_dir)) == ["RAN generic-trainer", "--help"]


def test_every_verb_goes_to_generic_trainer_even_if_a_program_has_its_name(bin_dir):
    for verb in sorted(cli_verbs()):
        fake_program(bin_dir, verb)  # e.g. a `transform` or `train` program somewhere on PATH
        assert ran(entry(bin_dir, verb, "--x")) == ["RAN generic-trainer", verb, "--x"], verb


def test_a_command_runs_as_given(bin_dir):
    # kfp.local's DockerRunner: the component's command and args after the ENTRYPOINT
    assert ran(entry(bin_dir, "generic-trainer", "train", "--x", "1")) == [
        "RAN generic-trainer",
        "train",
        "--x",
        "1",
    ]
    assert ran(entry(bin_dir, "python", "-c", "print(1)")) == ["RAN python", "-c", "print(1)"]
    tool = bin_dir / "elsewhere"
    tool.mkdir()
    fake_program(tool, "tool")
    assert ran(entry(bin_dir, str(tool / "tool"), "a b")) == ["RAN tool", "a b"]


def test_unknown_word_goes_to_generic_trainer_for_its_usage_error(bin_dir):
    assert ran(entry(bin_dir, "no-such-verb", "--x")) == [
        "RAN generic-trainer",
        "no-such-verb",
        "--x",
    ]


def test_exit_code_and_pid_are_the_programs(bin_dir):
    fake_program(bin_dir, "generic-trainer", exit_code=3)
    assert entry(bin_dir, "train").returncode == 3
    # exec, not a child: the program keeps the shell's PID (PID 1 in a container gets the signals)
    (bin_dir / "pid").write_text("#!/bin/sh\necho $$\n")
    (bin_dir / "pid").chmod(0o755)
    proc = subprocess.run(
        ["/bin/sh", "-c", f'echo $$; exec /bin/sh "{SCRIPT}" pid'],
        env={"PATH": str(bin_dir)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    shell_pid, program_pid = proc.stdout.split()
    assert shell_pid == program_pid


def test_component_command_lines_reach_generic_trainer_unchanged(bin_dir):
    """What DockerRunner runs: `ENTRYPOINT + command + args` of each component gives generic-trainer
    the args."""
    yamls = sorted((REPO / "components").glob("*/component.yaml"))
    assert yamls
    for path in yamls:
        for executor in yaml.safe_load(path.read_text())["deploymentSpec"]["executors"].values():
            container = executor["container"]
            args = [str(a) if not isinstance(a, str) else a for a in container["args"]]
            assert ran(entry(bin_dir, *container["command"], *args)) == [
                "RAN generic-trainer",
                *args,
            ], path


def test_image_runs_the_script_as_its_entrypoint():
    text = DOCKERFILE.read_text()
    entrypoints = re.findall(r"^ENTRYPOINT (.*)$", text, re.M)
    assert entrypoints and json.loads(entrypoints[-1]) == [IMAGE_PATH]
    assert re.search(rf"^COPY images/trainer/entrypoint\.sh {re.escape(IMAGE_PATH)}$", text, re.M)
    assert SCRIPT.stat().st_mode & 0o111, "entrypoint.sh must be executable (COPY keeps the mode)"
    assert SCRIPT.read_text().startswith("#!/bin/sh\n")
    proc = subprocess.run(["/bin/sh", "-n", str(SCRIPT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
