"""Speed flags end to end: --mixed-precision, --jit-compile, --steps-per-execution reach a module's
own models.

The module (tests/modules/speed) compiles its models without those arguments, as users do, and
records what Keras made of them; a second model sets them itself and must keep its own choice.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import PENGUIN, run_cli
from datagen import write_schema, write_split
from generic_trainer.errors import UserInputError
from generic_trainer.intake.fit_request import build_train_request

MODULE = Path(__file__).parent / "modules" / "speed" / "speed_module.py"
STEPS = 16


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("speed-data")
    rows = [
        {"left": [i / 100], "right": [1 - i / 100], "cls": [int(i % 3 == 0)]} for i in range(128)
    ]
    write_split(root / "examples", "train", rows)
    write_split(root / "examples", "eval", rows[:32])
    write_schema(root / "schema.pbtxt", {"left": "FLOAT", "right": "FLOAT", "cls": "INT"})
    return root


def _train(data: Path, out: Path, *flags: str, env: dict[str, str] | None = None):
    proc = run_cli(
        [
            "train",
            "--examples",
            data / "examples",
            "--schema",
            data / "schema.pbtxt",
            "--module-file",
            MODULE,
            "--model-dir",
            out / "model",
            "--train-steps",
            STEPS,
            *flags,
        ],
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (out / "model" / "Format-Serving" / "saved_model.pb").is_file()
    return json.loads((out / "model" / "logs" / "speed.json").read_text()), proc.stderr


@pytest.mark.slow
def test_float16_jit_compile_and_steps_per_execution_reach_the_modules_compile(data, tmp_path):
    dump = tmp_path / "xla-dump"  # XLA writes each module it compiles here
    record, stderr = _train(
        data,
        tmp_path,
        "--mixed-precision",
        "mixed_float16",
        "--jit-compile",
        "--steps-per-execution",
        "4",
        env={"XLA_FLAGS": f"--xla_dump_to={dump}"},
    )
    assert record["policy"] == "mixed_float16"
    flags = record["flags"]
    assert flags["jit_compile"] is True and flags["steps_per_execution"] == 4
    assert flags["compute_dtype"] == "float16" and flags["variable_dtype"] == "float32"
    assert flags["output_dtype"] == "float16"
    assert (
        flags["optimizer"] == "LossScaleOptimizer"
    )  # Keras wraps the optimizer under mixed_float16
    assert flags["batch_ends"] == STEPS // 4  # 4 batches per call: callbacks see every 4th
    assert dump.is_dir() and any(dump.iterdir())  # XLA really compiled a step
    assert (
        "speed options: mixed_precision=mixed_float16 jit_compile=True steps_per_execution=4"
        in stderr
    )
    explicit = record["explicit"]  # the module's own compile arguments win
    assert explicit["jit_compile"] is False and explicit["steps_per_execution"] == 1
    assert explicit["batch_ends"] == STEPS and explicit["compute_dtype"] == "float16"


@pytest.mark.slow
def test_bfloat16_and_no_jit_compile_reach_the_modules_compile(data, tmp_path):
    record, stderr = _train(
        data, tmp_path, "--mixed-precision", "mixed_bfloat16", "--no-jit-compile"
    )
    assert record["policy"] == "mixed_bfloat16"
    flags = record["flags"]
    assert flags["compute_dtype"] == "bfloat16" and flags["variable_dtype"] == "float32"
    assert flags["output_dtype"] == "bfloat16" and flags["optimizer"] == "Adam"
    assert (
        flags["jit_compile"] is False
        and flags["steps_per_execution"] == 1
        and flags["batch_ends"] == STEPS
    )


@pytest.mark.parametrize(
    "flags, names",
    [
        (["--steps-per-execution", "-1"], "--steps-per-execution"),
        (["--steps-per-execution", "two"], "--steps-per-execution"),
        (["--mixed-precision", "float64"], "--mixed-precision"),
    ],
)
@pytest.mark.slow
def test_bad_speed_flags_exit_2_naming_the_flag_and_write_no_model(data, tmp_path, flags, names):
    proc = run_cli(
        [
            "train",
            "--examples",
            data / "examples",
            "--module-file",
            MODULE,
            "--model-dir",
            tmp_path / "model",
            *flags,
        ],
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert names in proc.stderr
    assert not (tmp_path / "model").exists()


def test_speed_flags_given_as_kfp_strings_or_json_values_become_typed(tmp_path):
    """KFP passes parameters as strings or JSON values; both become typed request fields."""
    examples = str(PENGUIN / "data")
    base = {"examples": examples, "module_file": "m.py", "model_dir": str(tmp_path / "m")}
    request = build_train_request(
        {
            **base,
            "jit_compile": "false",
            "steps_per_execution": "8",
            "mixed_precision": "mixed_bfloat16",
        },
        environ={},
    )
    program = request.program
    assert (program.jit_compile, program.steps_per_execution, program.mixed_precision) == (
        False,
        8,
        "mixed_bfloat16",
    )
    request = build_train_request(
        {**base, "jit_compile": True, "steps_per_execution": 2.0}, environ={}
    )
    program = request.program
    assert (program.jit_compile, program.steps_per_execution, program.mixed_precision) == (
        True,
        2,
        None,
    )
    request = build_train_request(base, environ={})
    program = request.program
    assert (program.jit_compile, program.steps_per_execution, program.mixed_precision) == (
        None,
        None,
        None,
    )
    for key, value in (
        ("jit_compile", "maybe"),
        ("steps_per_execution", -1),
        ("mixed_precision", "float16"),
    ):
        with pytest.raises(UserInputError) as e:
            build_train_request({**base, key: value}, environ={})
        assert e.value.input_name == "--" + key.replace("_", "-")


def test_task_api_points_to_its_own_config(tmp_path):
    base = {"task": "my_task.py:MyTask", "model_dir": str(tmp_path / "m")}
    for key, value, hint in (
        ("mixed_precision", "mixed_float16", "runtime.mixed_precision_dtype"),
        ("steps_per_execution", "4", "trainer.steps_per_loop"),
        ("jit_compile", True, "no XLA option"),
    ):
        with pytest.raises(UserInputError) as e:
            build_train_request({**base, key: value}, environ={})
        assert e.value.input_name == "--" + key.replace("_", "-") and hint in str(e.value)
