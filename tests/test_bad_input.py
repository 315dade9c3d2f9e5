"""Bad input is exit 2 with a message naming the input and what was expected, never a traceback.

Numbers in every numeric flag (found from the argparse parser, so a new flag is covered), executor
input of any shape, split names, hyperparameter files, secrets in custom_config, records that do
not decode against the schema, and a Cloud Storage endpoint that refuses connections.
"""

from __future__ import annotations

import copy
import json
import os
import random
import re
import socket
import time
from pathlib import Path

import pytest
from conftest import PENGUIN, gcs_upload, run_cli
from generic_trainer import cli
from generic_trainer.artifacts import downloads, kfp_io
from generic_trainer.artifacts.redaction import redact
from generic_trainer.artifacts.storage_settings import GCS_TIMEOUT_ENV
from generic_trainer.errors import UserInputError
from generic_trainer.intake.environment import storage_settings
from generic_trainer.intake.fit_options import TRAIN
from generic_trainer.intake.fit_request import build_train_request, load_hyperparameters
from generic_trainer.intake.options import artifact_maps
from generic_trainer.records import example_files

ARTIFACTS = artifact_maps(TRAIN)  # the train verb's own executor-input maps

REGRESSION = Path(__file__).parent / "modules" / "regression"

# --------------------------------------------------------------------------------------------
# Numbers: every numeric flag of every verb, derived from the parser
# --------------------------------------------------------------------------------------------

NUMERIC_METAVARS = {"N", "K", "SECONDS", "SIZE", "GB", "PORT", "BYTES"}
NUMERIC_WORDS = {
    "steps",
    "count",
    "timeout",
    "size",
    "trials",
    "requests",
    "port",
    "limit",
    "seconds",
    "gb",
}
BAD_NUMBERS = ["inf", "-inf", "nan", "1e400", "1e999", "-1", "abc", "1e30", "1.5e3x", "0x10"]
# The flags the parser is known to have today: the derivation must find at least these.
KNOWN_NUMERIC = {
    ("train", "--train-steps"),
    ("train", "--eval-steps"),
    ("train", "--cluster-timeout"),
    ("train", "--steps-per-execution"),
    ("tune", "--train-steps"),
    ("tune", "--eval-steps"),
    ("tune", "--max-trials"),
    ("tune", "--worker-timeout"),
    ("evaluate", "--timeout"),
    ("infra-validate", "--num-requests"),
    ("infra-validate", "--batch-size"),
    ("infra-validate", "--timeout"),
    ("infra-validate", "--memory-limit"),
    ("vertex-job", "--replica-count"),
    ("vertex-job", "--accelerator-count"),
    ("vertex-job", "--boot-disk-size-gb"),
}


def numeric_flags() -> list[tuple[str, str]]:
    """(verb, flag) of every flag that takes a number, from the CLI's own parser."""
    parser = cli.build_parser()
    verbs = next(a for a in parser._actions if a.dest == "verb").choices
    found = []
    for verb, sub in verbs.items():
        for action in sub._actions:
            if not action.option_strings or action.nargs == 0:
                continue
            flag = max(action.option_strings, key=len)
            if action.metavar in NUMERIC_METAVARS or NUMERIC_WORDS & set(action.dest.split("_")):
                found.append((verb, flag))
    return sorted(found)


def test_numeric_flags_are_found_from_the_parser():
    assert KNOWN_NUMERIC <= set(numeric_flags())


@pytest.fixture()
def layout(tmp_path):
    """Just enough for each verb's request to be built: an examples dir, a model dir, a module
    path."""
    (tmp_path / "examples").mkdir()
    (tmp_path / "model").mkdir()
    return tmp_path


def _base_args(verb: str, root: Path) -> list[str]:
    ex, out = str(root / "examples"), str(root / "out")
    return {
        "train": ["train", "--examples", ex, "--module-file", "m.py", "--model-dir", out],
        "doctor": ["doctor", "--examples", ex, "--module-file", "m.py", "--model-dir", out],
        "tune": [
            "tune",
            "--examples",
            ex,
            "--module-file",
            "m.py",
            "--best-hyperparameters-dir",
            out,
        ],
        "evaluate": [
            "evaluate",
            "--model",
            str(root / "model"),
            "--examples",
            ex,
            "--blessing-dir",
            out,
            "--eval-config",
            '{"label_key": "y"}',
        ],
        "infra-validate": [
            "infra-validate",
            "--model",
            str(root / "model"),
            "--examples",
            ex,
            "--blessing-dir",
            out,
        ],
        "vertex-job": [
            "vertex-job",
            "--project",
            "p",
            "--region",
            "r",
            "--image",
            "i",
            "--base-output-dir",
            "gs://b/run",
        ],
    }[verb]


def _main(argv: list[str], capsys) -> tuple[int, str]:
    try:
        code = cli.main(argv)
    except SystemExit as e:  # argparse
        code = e.code
    captured = capsys.readouterr()
    return code, captured.err + captured.out  # doctor prints its checks, the fail lines too


@pytest.mark.parametrize("verb, flag", numeric_flags())
def test_every_numeric_flag_refuses_non_finite_and_out_of_range(verb, flag, layout, capsys):
    for bad in BAD_NUMBERS:
        argv = _base_args(verb, layout) + [f"{flag}={bad}"]
        if verb == "vertex-job":
            argv += ["--", "train", "--examples", "gs://b/x", "--module-file", "gs://b/m.py"]
        code, err = _main(argv, capsys)
        assert code == 2, (flag, bad, err[-800:])
        assert flag in err, (flag, bad, err[-800:])
        assert "Traceback" not in err and "OverflowError" not in err
        # the accepted range (or form, for sizes) is stated
        assert re.search(r">=? -?\d+ and at most \d+", err) or "size like" in err, (
            flag,
            bad,
            err[-800:],
        )


@pytest.mark.parametrize(
    "key, value, flag",
    [
        ("train_steps", "inf", "--train-steps"),
        ("train_steps", 1e400, "--train-steps"),
        ("eval_steps", "1e400", "--eval-steps"),
        ("steps_per_execution", "Infinity", "--steps-per-execution"),
        ("cluster_timeout", float("nan"), "--cluster-timeout"),
        ("train_steps", True, "--train-steps"),
        ("train_steps", 2**64, "--train-steps"),
        ("train_steps", 2.5, "--train-steps"),
        ("train_steps", [3], "--train-steps"),
    ],
)
def test_executor_input_numbers_are_checked_too(tmp_path, key, value, flag):
    values = {
        "examples": str(PENGUIN / "data"),
        "module_file": "m.py",
        "model_dir": str(tmp_path / "m"),
        key: value,
    }
    expected = re.escape(flag) + r": expected a (whole )?number .*>=? \d+ and at most \d+"
    with pytest.raises(UserInputError, match=expected):
        build_train_request(values, environ={}, kfp=None)


def test_numbers_in_exponent_float_or_string_form_are_accepted(tmp_path):
    values = {
        "examples": str(PENGUIN / "data"),
        "module_file": "m.py",
        "model_dir": str(tmp_path / "m"),
        "train_steps": "1e3",
        "eval_steps": 7.0,
        "cluster_timeout": "2.5",
        "steps_per_execution": "4",
    }
    req = build_train_request(values, environ={})
    assert (
        req.train_steps,
        req.eval_steps,
        req.cluster_timeout,
        req.program.steps_per_execution,
    ) == (1000, 7, 2.5, 4)
    assert isinstance(req.train_steps, int)


@pytest.mark.parametrize("value", ["inf", "0", "-3", "nan", "soon"])
def test_gcs_timeout_environment_variable_is_checked(tmp_path, value):
    values = {
        "examples": str(PENGUIN / "data"),
        "module_file": "m.py",
        "model_dir": str(tmp_path / "m"),
    }
    expected = r"GENERIC_TRAINER_GCS_TIMEOUT: expected a number of seconds > 0 and at most "
    with pytest.raises(UserInputError, match=expected):
        build_train_request(values, environ={GCS_TIMEOUT_ENV: value})


def test_memory_size_too_large_names_the_range(layout, capsys):
    code, err = _main(
        _base_args("infra-validate", layout) + ["--memory-limit", "99999999999TiB"], capsys
    )
    assert code == 2 and "--memory-limit" in err and "9223372036854775807" in err


# --------------------------------------------------------------------------------------------
# Secrets: redaction walks lists and nested objects; secret_keys is a name or a list
# --------------------------------------------------------------------------------------------


def test_redaction_walks_lists_nested_objects_and_secret_keys_forms():
    config = {
        "creds": [{"api_key": "s1", "region": "eu"}, {"nested": [{"password": "s2"}]}],
        "secret_keys": "plain, other",
        "plain": "s3",
        "other": {"x": "s4"},
        "deep": {"plain": "s5", "list": ["ok", {"plain": "s6"}]},
        "inner": {"secret_keys": ["mine"], "mine": "s7", "free": 1},
        "mine": "visible-outside-its-object",
        "epochs": 3,
    }
    out = redact(config)
    text = json.dumps(out)
    for secret in ("s1", "s2", "s3", "s4", "s5", "s6", "s7"):
        assert f'"{secret}"' not in text
    assert out["creds"][0] == {"api_key": "***", "region": "eu"}
    assert out["creds"][1] == {"nested": [{"password": "***"}]}
    assert out["deep"]["list"] == ["ok", {"plain": "***"}]
    assert out["inner"] == {"secret_keys": ["mine"], "mine": "***", "free": 1}
    assert out["mine"] == "visible-outside-its-object" and out["epochs"] == 3
    assert redact({"secret_keys": "k", "k": "v"}) == {"secret_keys": "k", "k": "***"}
    assert redact({"token": ["a", "b"]}) == {"token": "***"}
    assert config["creds"][0]["api_key"] == "s1", "redact must not change its input"


def test_malformed_secret_keys_is_bad_input_and_never_leaks(tmp_path):
    values = {
        "examples": str(PENGUIN / "data"),
        "module_file": "m.py",
        "model_dir": str(tmp_path / "m"),
        "custom_config": json.dumps({"secret_keys": 5, "k": "v"}),
    }
    with pytest.raises(
        UserInputError, match="--custom-config: secret_keys: expected a key name or a list"
    ):
        build_train_request(values, environ={})
    assert redact({"secret_keys": [1], "k": "v"}) == {"secret_keys": "***", "k": "***"}


def test_task_config_dump_masks_secrets_in_lists():
    from generic_trainer.task.config import ExperimentConfig, to_yaml
    from generic_trainer.task.resolve import build_experiment

    cfg = build_experiment(
        ExperimentConfig(),
        params_override=(
            "task.custom_config={creds: [{api_key: list-s3cret}], secret_keys: k, k: str-s3cret, "
            "rows: 5}"
        ),
    )
    text = to_yaml(cfg)
    assert "list-s3cret" not in text and "str-s3cret" not in text and "rows: 5" in text


def test_report_masks_secrets_in_lists(tmp_path):
    from generic_trainer.artifacts.results import TrainResult
    from generic_trainer.fit.requests import RunFnProgram, TrainRequest
    from generic_trainer.trained import train_report

    request = TrainRequest(
        program=RunFnProgram("m.py"),
        examples="/e",
        model_dir=str(tmp_path / "m"),
        model_run_dir=str(tmp_path / "run"),
        checkpoint_dir=str(tmp_path / "ck"),
        custom_config={
            "creds": [{"api_key": "list-s3cret"}],
            "secret_keys": "k",
            "k": "str-s3cret",
        },
    )
    result = TrainResult(
        is_chief=True,
        model_dir=str(tmp_path / "m"),
        serving_model_dir="/m/Format-Serving",
        metrics={"loss": 0.1},
        model_info={"signatures": ["serving_default"]},
        strategy="_DefaultDistributionStrategy",
        num_replicas=1,
        train_steps=1,
    )
    html = train_report.train_report(request, result)
    assert "list-s3cret" not in html and "str-s3cret" not in html and "***" in html


def _train_executor_input(root: Path, parameters: dict, examples: str | None = None) -> dict:
    out = root / "kfp"

    def art(name, schema):
        return {
            "artifacts": [{"name": name, "uri": str(out / name), "type": {"schemaTitle": schema}}]
        }

    return {
        "inputs": {
            "parameterValues": parameters,
            "artifacts": {
                "examples": {
                    "artifacts": [{"uri": examples or str(root / "examples"), "name": "examples"}]
                }
            },
        },
        "outputs": {
            "outputFile": str(out / "executor_output.json"),
            "artifacts": {
                "model": art("model", "system.Model"),
                "model_run": art("model_run", "system.Artifact"),
                "metrics": art("metrics", "system.Metrics"),
                "report": art("report", "system.HTML"),
            },
        },
    }


@pytest.mark.slow
def test_secrets_stay_out_of_log_report_and_executor_output(tmp_path):
    """A real KFP-style run: nested and listed secrets appear nowhere the run writes for people."""
    root = _regression_data(tmp_path, n=40)
    secrets = {
        "creds": [{"api_key": "LIST-S3CRET-1"}],
        "secret_keys": "plainkey",
        "plainkey": "STR-S3CRET-2",
        "nested": {"db": [{"password": "NESTED-S3CRET-3"}]},
        "epochs": 1,
    }
    executor_input = _train_executor_input(
        root,
        {
            "module_file": str(REGRESSION / "regress_module.py"),
            "run_fn": "train_regressor",
            "schema": str(root / "schema"),
            "train_args": {"num_steps": 3, "splits": ["training"]},
            "eval_args": {"num_steps": 2, "splits": ["validation"]},
            "custom_config": secrets,
        },
    )
    proc = run_cli(["train", "--executor-input", json.dumps(executor_input)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    written = {
        "log": proc.stderr + proc.stdout,
        "report": (tmp_path / "kfp" / "report").read_text(),
        "executor output": (tmp_path / "kfp" / "executor_output.json").read_text(),
    }
    assert "***" in written["log"]  # the custom_config is logged, redacted
    for where, text in written.items():
        for secret in ("LIST-S3CRET-1", "STR-S3CRET-2", "NESTED-S3CRET-3"):
            assert secret not in text, f"{secret} leaked into the {where}"


# --------------------------------------------------------------------------------------------
# Executor input of any shape: exit 2 naming the JSON path
# --------------------------------------------------------------------------------------------


def _valid_executor_input() -> dict:
    return {
        "inputs": {
            "parameterValues": {"module_file": "m.py", "train_steps": 3},
            "artifacts": {"examples": {"artifacts": [{"name": "e", "uri": "gs://b/examples"}]}},
        },
        "outputs": {
            "outputFile": "/tmp/out.json",
            "artifacts": {
                "model": {
                    "artifacts": [
                        {
                            "name": "m",
                            "uri": "gs://b/model",
                            "type": {"schemaTitle": "system.Model"},
                        }
                    ]
                }
            },
        },
    }


def _set(doc: dict, path: str, value) -> dict:
    doc = copy.deepcopy(doc)
    *parents, last = path.split(".")
    node = doc
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node[p]
    if value is _DELETE:
        del node[int(last) if isinstance(node, list) else last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return doc


_DELETE = object()


@pytest.mark.parametrize(
    "path, value, message",
    [
        (
            "inputs.artifacts.examples.artifacts",
            {"uri": "gs://b/e"},
            "inputs.artifacts.examples.artifacts must be a list, got dict",
        ),
        (
            "inputs.artifacts.examples.artifacts.0.uri",
            _DELETE,
            "inputs.artifacts.examples.artifacts[0].uri must be a non-empty string",
        ),
        (
            "inputs.artifacts.examples.artifacts.0.uri",
            7,
            "inputs.artifacts.examples.artifacts[0].uri must be a non-empty",
        ),
        (
            "inputs.artifacts.examples.artifacts.0",
            "gs://b/e",
            "inputs.artifacts.examples.artifacts[0] must be an object",
        ),
        ("inputs.artifacts.examples", [], "inputs.artifacts.examples must be an object"),
        ("inputs.artifacts", [], "inputs.artifacts must be an object"),
        (
            "inputs.parameterValues",
            ["module_file"],
            "inputs.parameterValues must be an object ({...}), got list",
        ),
        (
            "inputs.parameterValues",
            "x",
            "inputs.parameterValues must be an object ({...}), got str",
        ),
        ("inputs", 3, "inputs must be an object"),
        ("outputs", _DELETE, "outputs is missing"),
        ("outputs", None, "outputs must be an object"),
        (
            "outputs.artifacts.model.artifacts",
            [],
            "outputs.artifacts.model.artifacts must be a list holding the output",
        ),
        (
            "outputs.artifacts.model.artifacts",
            None,
            "outputs.artifacts.model.artifacts must be a list holding the output",
        ),
        (
            "outputs.artifacts.model.artifacts.0.uri",
            "",
            "outputs.artifacts.model.artifacts[0].uri must be a non-empty",
        ),
        (
            "outputs.artifacts.model.artifacts.0.type",
            "system.Model",
            "outputs.artifacts.model.artifacts[0].type must be an object",
        ),
        ("outputs.artifacts", {"model": "gs://b/m"}, "outputs.artifacts.model must be an object"),
        ("outputs.outputFile", _DELETE, "outputs.outputFile must be a non-empty string"),
        ("outputs.outputFile", ["a"], "outputs.outputFile must be a non-empty string"),
    ],
)
def test_malformed_executor_input_names_the_path(path, value, message):
    doc = _set(_valid_executor_input(), path, value)
    with pytest.raises(UserInputError, match=re.escape(message)) as e:
        kfp_io.parse(artifacts=ARTIFACTS, executor_input=kfp_io.load(json.dumps(doc)))
    assert str(e.value).startswith("--executor-input: ")


def test_executor_input_that_is_not_a_json_object_is_refused_naming_the_flag(tmp_path):
    for text in ("[1, 2]", '"x"', "{"):
        with pytest.raises(UserInputError, match="--executor-input: "):
            source = text if text.startswith("{") else str(_file(tmp_path, text))
            kfp_io.parse(artifacts=ARTIFACTS, executor_input=kfp_io.load(source))


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "executor_input.json"
    path.write_text(text)
    return path


def test_executor_input_fuzz_never_crashes():
    """Random values at random places: parsing succeeds or raises UserInputError, nothing else."""
    rng = random.Random(13)
    junk = [
        None,
        0,
        -1,
        1.5,
        float("inf"),
        "",
        "x",
        [],
        [None],
        [{}],
        {},
        {"artifacts": 5},
        {"uri": None},
        True,
    ]

    def paths(node, prefix=""):
        if isinstance(node, dict):
            for k, v in node.items():
                yield f"{prefix}{k}"
                yield from paths(v, f"{prefix}{k}.")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                yield f"{prefix}{i}"
                yield from paths(v, f"{prefix}{i}.")

    base = _valid_executor_input()
    every = list(paths(base))
    outcomes = {"ok": 0, "refused": 0}
    for _ in range(600):
        doc = base
        for _ in range(rng.randint(1, 3)):
            path = rng.choice(list(paths(doc)) or every)
            doc = _set(doc, path, rng.choice(junk + [_DELETE]))
        try:
            values, outputs = kfp_io.parse(artifacts=ARTIFACTS, executor_input=doc)
            build_train_request(
                {**values, "examples": str(PENGUIN / "data"), "model_dir": "/tmp/m"}, environ={}
            )
            outcomes["ok"] += 1
        except UserInputError:
            outcomes["refused"] += 1
    assert outcomes["refused"] > 100 and outcomes["ok"] > 10


# --------------------------------------------------------------------------------------------
# Split names, hyperparameter files
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "../../../../etc",
        "a/b",
        "..",
        ".",
        "train,..",
        "x..y",
        "/etc",
        "tr ain",
        "train,train",
        ["../etc"],
        5,
    ],
)
def test_split_names_are_sanitised(tmp_path, value):
    for key, flag in (("train_splits", "--train-splits"), ("eval_splits", "--eval-splits")):
        values = {
            "examples": str(PENGUIN / "data"),
            "module_file": "m.py",
            "model_dir": str(tmp_path / "m"),
            key: value,
        }
        with pytest.raises(UserInputError, match=re.escape(flag) + ": "):
            build_train_request(values, environ={})


def test_a_traversing_split_name_in_executor_input_train_args_is_refused(tmp_path):
    doc = _set(
        _valid_executor_input(),
        "inputs.parameterValues.train_args",
        {"num_steps": 3, "splits": ["../../../../etc"]},
    )
    values, _ = kfp_io.parse(artifacts=ARTIFACTS, executor_input=doc)
    with pytest.raises(
        UserInputError, match=r"--train-splits: split name '../../../../etc' is not allowed"
    ):
        build_train_request(
            {**values, "examples": str(PENGUIN / "data"), "model_dir": str(tmp_path)}, environ={}
        )


def test_split_names_with_dots_dashes_and_underscores_are_accepted(tmp_path):
    for split in ("train", "span-1.v2", "eval_A"):
        (tmp_path / "examples" / f"Split-{split}").mkdir(parents=True)
        (tmp_path / "examples" / f"Split-{split}" / "data.gz").write_bytes(b"")
    values = {
        "examples": str(tmp_path / "examples"),
        "module_file": "m.py",
        "model_dir": str(tmp_path / "m"),
        "train_splits": "train, span-1.v2",
        "eval_splits": ["eval_A"],
    }
    req = build_train_request(values, environ={})
    assert req.train_splits == ("train", "span-1.v2") and req.eval_splits == ("eval_A",)


def test_traversing_split_name_on_the_cli_reads_nothing_outside(layout, capsys):
    code, err = _main(
        [
            "train",
            "--examples",
            str(PENGUIN / "data"),
            "--module-file",
            "m.py",
            "--model-dir",
            str(layout / "out"),
            "--train-splits",
            "../../../../etc",
        ],
        capsys,
    )
    assert code == 2 and "--train-splits: split name '../../../../etc' is not allowed" in err


@pytest.mark.parametrize(
    "content, message",
    [
        (b"\xff\xfe{\x00}\x00", "is not UTF-8 text"),
        (b'{"units": 3,', "is not valid JSON"),
        (b"[1, 2]", "must hold a JSON object, got list"),
        ('{"name": "caf\u00e9"}'.encode("latin-1"), "is not UTF-8 text"),
    ],
)
def test_a_hyperparameters_file_that_is_not_a_json_object_is_refused(tmp_path, content, message):
    path = tmp_path / "best_hyperparameters.txt"
    path.write_bytes(content)
    with pytest.raises(UserInputError, match=re.escape(f"--hyperparameters: {path} {message}")):
        load_hyperparameters(str(path))
    values = {
        "examples": str(PENGUIN / "data"),
        "module_file": "m.py",
        "model_dir": str(tmp_path / "m"),
        "hyperparameters": str(tmp_path),
    }  # the directory form too
    with pytest.raises(UserInputError, match=re.escape(message)):
        build_train_request(values, environ={})


def test_hyperparameters_not_utf8_on_the_cli_is_exit_2(layout, capsys):
    bad = layout / "hp.txt"
    bad.write_bytes(b"\x80\x81 not text")
    code, err = _main(
        [
            "train",
            "--examples",
            str(PENGUIN / "data"),
            "--module-file",
            "m.py",
            "--model-dir",
            str(layout / "out"),
            "--hyperparameters",
            str(bad),
        ],
        capsys,
    )
    assert code == 2 and f"--hyperparameters: {bad} is not UTF-8" in err and "Traceback" not in err


# --------------------------------------------------------------------------------------------
# Bad data: exit 2 naming split, file, record and feature
# --------------------------------------------------------------------------------------------


def _regression_rows(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        x1, x2 = rng.uniform(-1, 1), rng.uniform(-1, 1)
        rows.append({"x1": [x1], "x2": [x2], "target": [3 * x1 - 2 * x2 + 0.5]})
    return rows


def _regression_data(root: Path, n: int = 40) -> Path:
    from datagen import write_schema, write_split

    write_split(str(root / "examples"), "training", _regression_rows(n))
    write_split(str(root / "examples"), "validation", _regression_rows(n, seed=1), gzipped=False)
    write_schema(
        str(root / "schema" / "schema.pbtxt"), {"x1": "FLOAT", "x2": "FLOAT", "target": "FLOAT"}
    )
    return root


def _write_records(path: Path, records: list[bytes]) -> None:
    import tensorflow as tf

    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for r in records:
            writer.write(r)


def test_split_of_empty_files_is_refused_before_tensorflow(layout, capsys):
    for split in ("train", "eval"):
        (layout / "examples" / f"Split-{split}").mkdir()
        (layout / "examples" / f"Split-{split}" / "part-0.gz").write_bytes(b"")
    code, err = _main(
        [
            "train",
            "--examples",
            str(layout / "examples"),
            "--module-file",
            "m.py",
            "--model-dir",
            str(layout / "out"),
        ],
        capsys,
    )
    assert code == 2, err[-2000:]
    assert "--examples: split 'train' holds no records" in err


def test_read_records_reads_plain_and_gzipped(tmp_path):
    from datagen import example_bytes, write_split

    rows = _regression_rows(5)
    for gz in (True, False):
        (path,) = write_split(str(tmp_path / str(gz)), "s", rows, gzipped=gz)
        assert list(example_files.read_records(path)) == [example_bytes(r) for r in rows]
        assert len(list(example_files.read_records(path, 2))) == 2
    # A file cut inside its third record: read quietly up to it, or refused naming the input.
    (plain,) = write_split(str(tmp_path / "cut"), "s", rows, gzipped=False)
    size = sum(12 + len(example_bytes(r)) + 4 for r in rows[:2])
    with open(plain, "r+b") as f:
        f.truncate(size + 20)
    assert len(list(example_files.read_records(plain))) == 2
    with pytest.raises(
        UserInputError, match=f"^--examples: {re.escape(plain)} ends inside a record"
    ):
        list(example_files.read_records(plain, damaged_input="--examples"))


def _bad_data_case(root: Path, case: str) -> None:
    from datagen import example_bytes

    records = [example_bytes(r) for r in _regression_rows(40)]
    bad_index = 3
    if case == "not_tf_example":
        records[bad_index] = b'{"x1": 0.5, "x2": 0.1, "target": 1.0}'
    elif case == "missing_feature":
        records[bad_index] = example_bytes({"x1": [0.5], "target": [1.0]})
    elif case == "wrong_dtype":
        records[bad_index] = example_bytes({"x1": [0.5], "x2": [b"oops"], "target": [1.0]})
    elif (
        case == "late_missing_feature"
    ):  # past the records checked up front: the input pipeline meets it
        bad_index = 30
        records[bad_index] = example_bytes({"x1": [0.5], "target": [1.0]})
    _write_records(root / "examples" / "Split-training" / "data-00000.tfrecord", records)


@pytest.mark.slow
@pytest.mark.parametrize(
    "case, expected",
    [
        ("not_tf_example", "record 3: it is not a serialized tf.Example"),
        ("missing_feature", "record 3: feature 'x2' (float) is required by the schema but missing"),
        ("wrong_dtype", "record 3: feature 'x2': Data types don't match"),
        (
            "late_missing_feature",
            "record 30: feature 'x2' (float) is required by the schema but missing",
        ),
    ],
)
def test_bad_records_are_bad_input(tmp_path, case, expected):
    root = _regression_data(tmp_path)
    (root / "examples" / "Split-training" / "data_tfrecord-00000-of-00001.gz").unlink()
    _bad_data_case(root, case)
    started = time.monotonic()
    proc = run_cli(
        [
            "train",
            "--examples",
            root / "examples",
            "--schema",
            root / "schema",
            "--module-file",
            REGRESSION / "regress_module.py",
            "--run-fn",
            "train_regressor",
            "--train-splits",
            "training",
            "--eval-splits",
            "validation",
            "--train-steps",
            "6",
            "--eval-steps",
            "2",
            "--model-dir",
            tmp_path / "model",
        ]
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    bad_file = str(root / "examples" / "Split-training" / "data-00000.tfrecord")
    assert f"--examples: bad data in split 'training', {bad_file}, {expected}" in proc.stderr, (
        proc.stderr[-3000:]
    )
    assert "run_fn raised" not in proc.stderr
    if case != "late_missing_feature":  # found before run_fn: the user's module never ran
        assert "calling train_regressor" not in proc.stderr
    assert not (tmp_path / "model" / "Format-Serving").exists()
    assert time.monotonic() - started < 600


# --------------------------------------------------------------------------------------------
# Cloud Storage: a bounded, configurable retry deadline naming the endpoint
# --------------------------------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed when the socket is: connections are refused


@pytest.mark.slow
def test_gcs_module_on_a_refusing_endpoint_fails_within_the_deadline(layout):
    host = f"http://127.0.0.1:{_closed_port()}"
    for split in ("train", "eval"):
        from datagen import write_split

        write_split(str(layout / "examples"), split, _regression_rows(2))
    started = time.monotonic()
    proc = run_cli(
        [
            "train",
            "--examples",
            layout / "examples",
            "--module-file",
            "gs://bucket/module.py",
            "--model-dir",
            layout / "out",
        ],
        env={"STORAGE_EMULATOR_HOST": host, GCS_TIMEOUT_ENV: "3"},
    )
    elapsed = time.monotonic() - started
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"Cloud Storage at {host} did not answer within 3 s" in proc.stderr
    assert "--module-file: could not download gs://bucket/module.py" in proc.stderr
    assert elapsed < 60, elapsed  # 3 s of retries plus start-up on a loaded machine (was 84 s)


def test_gcs_default_deadline_is_well_under_a_minute(monkeypatch, tmp_path):
    host = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", host)
    monkeypatch.delenv(GCS_TIMEOUT_ENV, raising=False)
    started = time.monotonic()
    with pytest.raises(
        downloads.GcsUnavailable,
        match=re.escape(f"Cloud Storage at {host} did not answer within 20 s"),
    ):
        downloads.download_gcs(
            "gs://bucket/module.py", str(tmp_path), settings=storage_settings(os.environ)
        )
    assert time.monotonic() - started < 40


def test_gcs_download_works_within_the_deadline(gcs_emulator, monkeypatch, tmp_path):
    host, bucket = gcs_emulator
    uri = gcs_upload(host, bucket, "mods/module.py", b"X = 1\n")
    gcs_upload(host, bucket, "mods/helper.py", b"Y = 2\n")
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", host)
    monkeypatch.setenv(GCS_TIMEOUT_ENV, "10")
    path = downloads.download_gcs(
        uri, str(tmp_path / "dl"), siblings_suffix=".py", settings=storage_settings(os.environ)
    )
    assert (
        Path(path).read_text() == "X = 1\n"
        and (tmp_path / "dl" / "helper.py").read_text() == "Y = 2\n"
    )
    with pytest.raises(FileNotFoundError):
        downloads.download_gcs(
            f"gs://{bucket}/mods/absent.py",
            str(tmp_path / "dl2"),
            settings=storage_settings(os.environ),
        )
    assert os.listdir(tmp_path / "dl2") == []


def test_task_params_override_secrets_are_not_logged(layout, capsys):
    code, err = _main(
        [
            "train",
            "--task",
            str(layout / "missing_task.py") + ":Missing",
            "--model-dir",
            str(layout / "out"),
            "--examples",
            str(PENGUIN / "data"),
            "--params-override",
            "task.custom_config.api_key=OVR-S3CRET,task.custom_config.creds=[{password: OVR-2}]",
        ],
        capsys,
    )
    assert code == 2, err[-2000:]
    assert "task request:" in err and "***" in err
    assert "OVR-S3CRET" not in err and "OVR-2" not in err


OWN_WRONG_SPEC = """
import tensorflow as tf

def run_fn(fn_args):
    spec = {"x1": tf.io.FixedLenFeature([1], tf.int64)}  # the data (and the schema) say float
    files = tf.io.gfile.glob(fn_args.train_files[0])
    for batch in tf.data.TFRecordDataset(files, "GZIP").batch(4).map(
            lambda s: tf.io.parse_example(s, spec)):
        pass
"""


@pytest.mark.slow
def test_module_parsing_good_data_wrongly_is_a_user_code_error(tmp_path):
    """Good data parsed with the module's own wrong spec: exit 3 (its code), not bad data."""
    root = _regression_data(tmp_path)
    module = tmp_path / "own_spec.py"
    module.write_text(OWN_WRONG_SPEC)
    proc = run_cli(
        [
            "train",
            "--examples",
            root / "examples",
            "--schema",
            root / "schema",
            "--module-file",
            module,
            "--train-splits",
            "training",
            "--eval-splits",
            "validation",
            "--model-dir",
            tmp_path / "model",
        ]
    )
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "run_fn raised InvalidArgumentError" in proc.stderr and "bad data" not in proc.stderr


def test_vertex_job_log_masks_custom_config_secrets():
    from generic_trainer import vertex

    args = [
        "train",
        "--custom-config",
        json.dumps({"creds": [{"api_key": "V-S3CRET"}], "n": 1}),
        '--custom-config={"secret_keys": "k", "k": "V-2"}',
        "--custom-config",
        "{not json V-3",
        "--train-steps",
        "5",
    ]
    logged = " ".join(vertex.loggable_args(args))
    assert "V-S3CRET" not in logged and "V-2" not in logged and "V-3" not in logged
    assert '"n": 1' in logged and "--train-steps 5" in logged


@pytest.mark.slow
def test_tune_decodes_the_first_records_before_tuner_fn(tmp_path, capsys):
    root = _regression_data(tmp_path)
    (root / "examples" / "Split-training" / "data_tfrecord-00000-of-00001.gz").unlink()
    _bad_data_case(root, "missing_feature")
    module = tmp_path / "tuning.py"
    module.write_text(
        "def tuner_fn(fn_args):\n    raise RuntimeError('tuner_fn must not run on bad data')\n"
    )
    code, err = _main(
        [
            "tune",
            "--examples",
            str(root / "examples"),
            "--schema",
            str(root / "schema"),
            "--module-file",
            str(module),
            "--train-splits",
            "training",
            "--eval-splits",
            "validation",
            "--best-hyperparameters-dir",
            str(tmp_path / "best"),
        ],
        capsys,
    )
    assert code == 2, err[-3000:]
    assert "record 3: feature 'x2' (float) is required by the schema but missing" in err
    assert "tuner_fn must not run" not in err and not (tmp_path / "best").exists()


@pytest.mark.parametrize(
    "name, text",
    [("broken.json", '{"trainer": {"train_steps": 5}'), ("broken.yaml", "trainer: [1, 2\n")],
)
def test_broken_config_file_exits_2_naming_the_file_before_anything_is_written(
    tmp_path, capsys, name, text
):
    """--config-file is parsed while the request is built: exit 2, the file named, no model dir, no
    traceback."""
    config = tmp_path / name
    config.write_text(text)
    code, err = _main(
        [
            "train",
            "--task",
            "my_tasks:MyTask",
            "--config-file",
            str(config),
            "--model-dir",
            str(tmp_path / "model"),
        ],
        capsys,
    )
    assert code == 2, err[-800:]
    assert f"--config-file {config}: not valid YAML/JSON at line" in err
    assert "Traceback" not in err and not (tmp_path / "model").exists()
