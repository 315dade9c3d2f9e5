"""Hostile JSON and YAML: alias bombs, self-referencing aliases, deep nesting and huge texts are
exit 2 naming the input and the limit, fast, before TensorFlow loads, wherever the runtime parses
them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import PENGUIN, cli_env
from generic_trainer import cli
from generic_trainer.artifacts import bounded_parse, kfp_io
from generic_trainer.artifacts.bounded_parse import MAX_DEPTH, MAX_NODES
from generic_trainer.errors import UserInputError
from generic_trainer.fit import cluster
from generic_trainer.intake.fit_options import TRAIN
from generic_trainer.intake.options import artifact_maps
from generic_trainer.judge import eval_config_reader, eval_tfma
from generic_trainer.task import config as task_config

ARTIFACTS = artifact_maps(TRAIN)  # the train verb's own executor-input maps


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """The billion laughs in YAML: each level an anchored list of `width` aliases of the level
    before."""
    lines = ["a0: &a0 [" + ",".join(["x"] * width) + "]"]
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * width) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


BOMB_401 = alias_bomb(9, 9)  # ~400 bytes; 9**9 = 387 million values once expanded
BOMB_284 = alias_bomb(7, 8)  # ~280 bytes; 8**7 = 2 million values
SELF_ALIASES = [
    "a: &a [*a]",
    "&a [1, *a]",
    "task: &t {model: {inner: *t}}",
    "a: &a {b: [1, {c: *a}]}",
]
DEEP_YAML = {
    "flow": "a: " + "[" * 5000 + "]" * 5000,
    "block": "a:\n" + "".join(" " * i + "- \n" for i in range(1, 400)),
    "mapping": "".join(" " * i + f"k{i}:\n" for i in range(300)) + " " * 300 + "v",
}


def deep_json(depth: int, leaf: str = "1", key: str = "a") -> str:
    return f'{{"{key}": ' * depth + leaf + "}" * depth


def test_alias_bomb_sizes_match_the_reported_cases():
    assert 380 <= len(BOMB_401) <= 420 and 260 <= len(BOMB_284) <= 300


@pytest.mark.parametrize(
    "text",
    [
        BOMB_401,
        BOMB_284,
        alias_bomb(3, 500),
        "x: &x " + "[" + ",".join(["1"] * 400) + "]\n" + "y: [" + ",".join(["*x"] * 300) + "]",
    ],
)
def test_alias_bombs_are_refused_fast_naming_the_limit(text):
    started = time.monotonic()
    with pytest.raises(
        UserInputError, match=rf"^config: expands to more than the limit of {MAX_NODES} values"
    ):
        task_config.parse_config_text(text)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("text", SELF_ALIASES)
def test_self_referencing_aliases_are_refused(text):
    with pytest.raises(
        UserInputError, match=r"^config: the alias \*\w+ refers to a value that holds itself"
    ):
        task_config.parse_config_text(text)


@pytest.mark.parametrize("shape", list(DEEP_YAML))
def test_deep_yaml_is_refused_naming_the_depth_limit(shape):
    with pytest.raises(UserInputError, match=f"nested deeper than the limit of {MAX_DEPTH} levels"):
        task_config.parse_config_text(DEEP_YAML[shape])


def test_yaml_within_the_limits_still_loads():
    shared = "base: &b {units: 8, act: relu}\nlayers: [*b, *b, {<<: *b, units: 4}]\n"
    assert task_config.parse_config_text(shared)["layers"][2] == {"units": 4, "act": "relu"}
    nested = "a: " + "[" * (MAX_DEPTH - 1) + "1" + "]" * (MAX_DEPTH - 1)
    assert task_config.parse_config_text(nested)["a"]
    assert bounded_parse.load_json(deep_json(MAX_DEPTH), "x")


def test_config_file_bomb_names_the_file(tmp_path):
    for name, text in (
        ("bomb.yaml", BOMB_401),
        ("self.yaml", SELF_ALIASES[0]),
        ("deep.json", deep_json(3000)),
    ):
        (tmp_path / name).write_text(text)
        with pytest.raises(
            UserInputError, match=rf"^--config-file {tmp_path / name}: .*(limit|itself)"
        ):
            task_config.load_config_file(str(tmp_path / name))


def test_huge_config_file_is_refused_by_its_size(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text("k: " + "x" * (bounded_parse.MAX_TEXT_BYTES + 10))
    with pytest.raises(
        UserInputError, match=rf"big.yaml is over the limit of {bounded_parse.MAX_TEXT_BYTES} bytes"
    ):
        task_config.load_config_file(str(big))


def test_params_override_bombs_and_deep_keys_are_refused_naming_the_limit():
    with pytest.raises(UserInputError, match="^--params-override: expands to more than the limit"):
        task_config.parse_params_override(BOMB_284)  # multi-line: read as a YAML mapping
    with pytest.raises(UserInputError, match="^--params-override: nested deeper than the limit"):
        task_config.parse_params_override("task.model." + ".".join(["a"] * 5000) + "=1")
    with pytest.raises(UserInputError, match="^--params-override: nested deeper than the limit"):
        task_config.parse_params_override("task.model.x=" + "[" * 3000 + "]" * 3000)
    with pytest.raises(UserInputError, match="^--params-override: the alias"):
        task_config.parse_params_override("{task: &t {model: *t}}")


def test_a_config_mapping_passed_through_is_bounded_too():
    deep: dict = {}
    node = deep
    for _ in range(2000):
        node["a"] = {}
        node = node["a"]
    with pytest.raises(UserInputError, match="^config: nested deeper"):
        task_config.parse_config_text(deep)
    shared = [list(range(100))] * 2000  # 200,000 values through shared references
    with pytest.raises(UserInputError, match="^config: expands to more than"):
        task_config.parse_config_text({"model": {"layers": shared}})


@pytest.mark.parametrize("depth", [MAX_DEPTH + 5, 900, 5000, 10_000])
def test_deep_json_is_refused_wherever_the_user_gives_json(depth, tmp_path):
    text = deep_json(depth)
    limit = f"nested deeper than the limit of {MAX_DEPTH} levels"
    ei = {
        "inputs": {"parameterValues": {"custom_config": json.loads(deep_json(20))}},
        "outputs": {},
    }
    deep_ei = json.dumps(ei).replace(deep_json(20), text)
    with pytest.raises(UserInputError, match=f"^--executor-input: {limit}"):
        kfp_io.load(deep_ei)
    (tmp_path / "ei.json").write_text(deep_ei)
    with pytest.raises(UserInputError, match=f"^--executor-input: {limit}"):
        kfp_io.load(str(tmp_path / "ei.json"))
    with pytest.raises(UserInputError, match=f"^train_args: {limit}"):
        executor_input = {"inputs": {"parameterValues": {"train_args": text}}, "outputs": {}}
        kfp_io.parse(artifacts=ARTIFACTS, executor_input=executor_input)
    with pytest.raises(UserInputError, match=f"^TF_CONFIG: {limit}"):
        cluster.resolve({"TF_CONFIG": text})
    with pytest.raises(UserInputError, match=f"^--eval-config: {limit}"):
        eval_config_reader.parse_eval_config(text)
    with pytest.raises(UserInputError, match="nested deeper than the limit"):
        eval_tfma.parse_text_proto("model_specs " + "{ a " * depth + "}" * depth)


def test_a_parameter_nested_in_the_executor_input_has_the_same_limit():
    """KFP's own levels do not count: a custom_config one level over the limit is refused naming
    it."""
    from generic_trainer.intake.values import (
        json_object,
    )

    for depth, refused in ((MAX_DEPTH, False), (MAX_DEPTH + 1, True)):
        ei = {
            "inputs": {"parameterValues": {"custom_config": json.loads(deep_json(depth))}},
            "outputs": {},
        }
        values = kfp_io.load(json.dumps(ei))["inputs"][
            "parameterValues"
        ]  # the executor input is within its limit
        if refused:
            with pytest.raises(
                UserInputError,
                match=f"^--custom-config: nested deeper than the limit of {MAX_DEPTH}",
            ):
                json_object("--custom-config", values["custom_config"])
        else:
            assert json_object("--custom-config", values["custom_config"])


def test_brackets_inside_json_strings_do_not_count():
    text = json.dumps({"a": "[" * 5000, "b": '{\\"' * 100, "c": [[1]]})
    assert bounded_parse.json_depth(text) == 3  # the object, "c"'s list and the list in it
    assert bounded_parse.load_json(text, "x")["a"] == "[" * 5000


def _cli(argv: list[str], capsys) -> tuple[int, str, float]:
    started = time.monotonic()
    try:
        code = cli.main(argv)
    except SystemExit as e:
        code = e.code
    return code, capsys.readouterr().err, time.monotonic() - started


def _write(tmp_path: Path, name: str, text: str) -> str:
    (tmp_path / name).write_text(text)
    return str(tmp_path / name)


def _cases(tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    """CLI argv and the expected message of each hostile case (the train verb, flags and executor
    input)."""
    task = [
        "train",
        "--examples",
        str(PENGUIN / "data"),
        "--task",
        f"{PENGUIN / 'task.py'}:PenguinTask",
        "--model-dir",
        str(tmp_path / "model"),
    ]
    module = [
        "train",
        "--examples",
        str(PENGUIN / "data"),
        "--module-file",
        str(PENGUIN / "module.py"),
        "--model-dir",
        str(tmp_path / "model"),
    ]
    bomb, selfref = (
        _write(tmp_path, "bomb.yaml", BOMB_401),
        _write(tmp_path, "self.yaml", SELF_ALIASES[2]),
    )
    executor_input = {
        "inputs": {"parameterValues": {"module_file": "m.py"}},
        "outputs": {"outputFile": str(tmp_path / "out.json")},
    }
    return {
        "config-file-bomb-401": (
            task + ["--config-file", bomb],
            f"--config-file {bomb}: expands to more than",
        ),
        "params-override-bomb-284": (
            task + ["--params-override", BOMB_284],
            "--params-override: expands to more",
        ),
        "config-file-self-alias": (
            task + ["--config-file", selfref],
            "refers to a value that holds itself",
        ),
        "config-file-deep": (
            task + ["--config-file", _write(tmp_path, "deep.yaml", DEEP_YAML["flow"])],
            f"nested deeper than the limit of {MAX_DEPTH}",
        ),
        "executor-input-10000": (
            [
                "train",
                "--executor-input",
                json.dumps(executor_input)[:-1] + ', "x": ' + deep_json(10_000) + "}",
            ],
            "--executor-input: nested deeper than the limit",
        ),
        "custom-config-5000": (
            module + ["--custom-config", deep_json(5000)],
            "--custom-config: nested deeper",
        ),
        "custom-config-900": (
            module + ["--custom-config", deep_json(900, key="password")],
            "--custom-config: nested deeper",
        ),
        "hyperparameters-deep": (
            module + ["--hyperparameters", _write(tmp_path, "hp.json", deep_json(3000))],
            "hp.json is nested deeper than the limit",
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "config-file-bomb-401",
        "params-override-bomb-284",
        "config-file-self-alias",
        "config-file-deep",
        "executor-input-10000",
        "custom-config-5000",
        "custom-config-900",
        "hyperparameters-deep",
    ],
)
def test_hostile_json_and_yaml_on_the_cli_are_exit_2(case, tmp_path, capsys):
    argv, message = _cases(tmp_path)[case]
    code, err, seconds = _cli(argv, capsys)
    assert code == 2, err[-2000:]
    assert message in err and "Traceback" not in err and "RecursionError" not in err, err[-2000:]
    assert seconds < 10
    assert not (tmp_path / "model").exists()


CHECK = """
import json, sys
sys.path.insert(0, sys.argv[1])
from test_bounded_parse import _cases
from generic_trainer.cli import main
from pathlib import Path
codes = {name: main(argv) for name, (argv, _) in _cases(Path(sys.argv[2])).items()}
print(json.dumps({"codes": codes,
                  "heavy": [m for m in ("tensorflow", "keras") if m in sys.modules]}))
"""


def test_every_hostile_case_ends_before_tensorflow_loads(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", CHECK, str(Path(__file__).parent), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=180,
        env=cli_env(),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["heavy"] == [] and set(result["codes"].values()) == {2}, (
        result,
        proc.stderr[-3000:],
    )
