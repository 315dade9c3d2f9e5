"""Start-up stays light: help and argument errors answer without loading TensorFlow or other heavy
libraries.

(How fast they answer is measured by bench/overhead.py --mode startup, not asserted here.)
"""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = (
    "tensorflow",
    "keras",
    "tensorflow_transform",
    "tfx_bsl",
    "kfp",
    "google.cloud.storage",
    "google.cloud.aiplatform",
    "keras_tuner",
)  # (the empty google.cloud namespace comes from a .pth file)

CODE = """
import json, sys
from generic_trainer.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as e:
    code = e.code
print(json.dumps({"code": code, "heavy": [m for m in HEAVY if m in sys.modules]}))
""".replace("HEAVY", repr(HEAVY))


def _run(args: list[str], tmp_path) -> tuple[dict, str]:
    import json

    proc = subprocess.run(
        [sys.executable, "-c", CODE, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["--help"], 0, None),
        (["train", "--help"], 0, None),
        (["tune", "--help"], 0, None),
        (["train", "--no-such-flag"], 2, "unrecognized arguments: --no-such-flag"),
        (["train", "--mixed-precision", "float64"], 2, "--mixed-precision: invalid choice"),
        (
            ["train", "--examples", "missing-dir", "--module-file", "m.py", "--model-dir", "out"],
            2,
            "--examples: missing-dir is not a directory",
        ),
        (
            [
                "train",
                "--examples",
                ".",
                "--module-file",
                "m.py",
                "--model-dir",
                "out",
                "--steps-per-execution",
                "-1",
            ],
            2,
            "--steps-per-execution",
        ),
        (["train", "--examples", ".", "--module-file", "m.py"], 2, "--model-dir: required"),
    ],
)
def test_help_and_argument_errors_answer_without_loading_heavy_libraries(
    tmp_path, args, code, message
):
    result, stderr = _run(args, tmp_path)
    assert result["code"] == code
    assert result["heavy"] == []
    if message:
        assert message in stderr
