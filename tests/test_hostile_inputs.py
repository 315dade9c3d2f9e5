"""Hostile input of issue 31, each fixed at its cause: module sources (nesting, PEP 263, NUL bytes),
TFRecord lengths, numbers and text the runtime decodes, and log lines forged with control
characters.

Module sources and bad numbers run through the real CLI (exit 2 before TensorFlow loads); the
readers and parsers are called directly on hostile files.
"""

from __future__ import annotations

import gzip
import json
import logging
import stat
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PENGUIN, cli_env
from generic_trainer.artifacts import bounded_parse
from generic_trainer.beam import tfrecords
from generic_trainer.errors import UserCodeError, UserInputError
from generic_trainer.fit import accelerator, keras_auto, module_source, user_module
from generic_trainer.log_text import EscapingFilter, shown
from generic_trainer.records import example_files

HEAVY = ("tensorflow", "keras")
DEEP_SOURCES = {
    "binary-operators": "x = " + "a + " * 200_000 + "a\n",  # RecursionError in ast construction
    "unary-minus": "x = " + "-" * 200_000 + "1\n",  # MemoryError in the parser
    "attributes": "x = a" + ".b" * 200_000 + "\n",
    "lambdas": "x = " + "lambda: " * 100_000 + "1\n",
}


def _cli(args: list[str], env: dict[str, str] | None = None) -> tuple[int, list[str], str]:
    """(exit code, heavy modules loaded, stderr) of `cli.main(args)` in a fresh interpreter."""
    code = (
        "import sys, json; from generic_trainer.cli import main; c = main(sys.argv[1:]); "
        f"print(json.dumps([c, [m for m in {HEAVY!r} if m in sys.modules]]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=cli_env(env),
    )
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return result[0], result[1], proc.stderr


def _train(module: Path, tmp_path: Path, *extra: str) -> list[str]:
    return [
        "train",
        "--examples",
        str(PENGUIN / "data"),
        "--module-file",
        str(module),
        "--model-dir",
        str(tmp_path / "m"),
        *extra,
    ]


@pytest.mark.parametrize("name", sorted(DEEP_SOURCES))
def test_deeply_nested_module_source_is_exit_2_naming_the_file(name, tmp_path):
    path = tmp_path / "deep.py"
    path.write_text(DEEP_SOURCES[name])
    with pytest.raises(UserInputError, match="nests expressions or statements too deeply"):
        module_source.parse(str(path))
    with pytest.raises(UserInputError, match=r"deep\.py nests"):
        user_module.check_syntax(str(path))  # --keras keras3 / tf_keras: the loader's check
    with pytest.raises(UserInputError, match=r"deep\.py nests"):
        keras_auto.choose(str(path))  # --keras auto reads it first


@pytest.mark.parametrize("keras", ["auto", "keras3"])
def test_deep_module_on_the_cli_is_exit_2_before_tensorflow(keras, tmp_path):
    path = tmp_path / "deep.py"
    path.write_text(DEEP_SOURCES["binary-operators"])
    code, heavy, stderr = _cli(_train(path, tmp_path, "--keras", keras))
    assert (code, heavy) == (2, []), stderr[-2000:]
    assert "too deeply for Python to compile (RecursionError)" in stderr


def test_a_deep_file_beside_the_module_is_left_to_its_import(tmp_path):
    (tmp_path / "helper.py").write_text(DEEP_SOURCES["attributes"])
    (tmp_path / "main.py").write_text("import helper\n")
    assert keras_auto.choose(str(tmp_path / "main.py"))[0] == "keras3"


def test_pep_263_coding_cookie_is_honoured_and_nul_bytes_are_named(tmp_path):
    latin = tmp_path / "latin.py"
    latin.write_bytes(b"# -*- coding: latin-1 -*-\nNAME = '\xe9t\xe9'\n")
    tree = module_source.parse(str(latin))
    assert tree.body[0].value.value == "\u00e9t\u00e9"
    assert keras_auto.choose(str(latin))[0] == "keras3"
    plain = tmp_path / "plain.py"
    plain.write_bytes(b"NAME = '\xe9t\xe9'\n")
    with pytest.raises(UserInputError, match=r"not valid UTF-8 Python source .*PEP 263"):
        module_source.parse(str(plain))
    nul = tmp_path / "nul.py"
    nul.write_bytes(b"x = 1\ny = 2\x00\n")
    with pytest.raises(UserInputError, match=r"nul\.py holds a NUL byte \(byte 11, line 2\)"):
        user_module.check_syntax(str(nul))
    bad = tmp_path / "bad.py"
    bad.write_text("def f(:\n")
    with pytest.raises(UserInputError, match=r"syntax error in .*bad\.py line 1: .*'def f\(:'"):
        user_module.check_syntax(str(bad))


def test_a_nul_byte_in_the_module_on_the_cli_is_exit_2_before_tensorflow(tmp_path):
    nul = tmp_path / "nul.py"
    nul.write_bytes(b"x = 1\x00\n")
    code, heavy, stderr = _cli(_train(nul, tmp_path, "--keras", "keras3"))
    assert (code, heavy) == (2, []), stderr[-2000:]
    assert "holds a NUL byte" in stderr and "syntax error in None" not in stderr


def _record(payload: bytes, length: int | None = None) -> bytes:
    header = struct.pack("<Q", len(payload) if length is None else length)
    crc = tfrecords.masked_crc32c
    return header + struct.pack("<I", crc(header)) + payload + struct.pack("<I", crc(payload))


@pytest.mark.parametrize("length", [1 << 62, 30 << 30, (1 << 64) - 1])
@pytest.mark.parametrize("gzipped", [False, True])
def test_a_tfrecord_length_beyond_the_file_is_refused_before_reading(length, gzipped, tmp_path):
    data = _record(b"good") + _record(b"x" * 16, length=length)
    path = tmp_path / ("huge.gz" if gzipped else "huge.tfrecord")
    path.write_bytes(gzip.compress(data) if gzipped else data)
    claims = f"record 2: its header claims {length} bytes, more than the"
    with pytest.raises(UserInputError, match=claims):
        list(example_files.read_records(str(path), damaged_input="--examples"))
    assert list(example_files.read_records(str(path))) == [b"good"]  # stops quietly
    assert claims in example_files.damaged_file([str(tmp_path / "*")])
    with pytest.raises(ValueError, match=claims):
        list(tfrecords.iter_records(str(path), lambda p: open(p, "rb")))
    first = tmp_path / "first" / path.name
    first.parent.mkdir()
    first.write_bytes(gzip.compress(_record(b"x", length)) if gzipped else _record(b"x", length))
    with pytest.raises(UserInputError, match="record 1: its header claims"):
        example_files.check_readable([str(first.parent / "*")])


def test_numbers_and_text_python_cannot_decode_are_exit_2_naming_the_input():
    big = "1" + "0" * 5000
    with pytest.raises(UserInputError, match=r"^--custom-config: holds a number .*4300 digits"):
        bounded_parse.load_json(f'{{"n": {big}}}', "--custom-config")
    with pytest.raises(UserInputError, match=r"^--config-file c.yaml: holds a number"):
        bounded_parse.load_yaml(f"n: {big}\n", "--config-file c.yaml")
    for text in ('{"token": "ab\\ud800cd"}', '{"t": "\\udc00"}', '{"t": "\ud800"}'):
        with pytest.raises(UserInputError, match="holds a lone surrogate"):
            bounded_parse.load_json(text, "--custom-config")
    assert bounded_parse.load_json('{"t": "\\ud83d\\ude00"}', "x") == {"t": "\U0001f600"}


def test_big_integers_and_surrogates_on_the_cli_are_exit_2_before_tensorflow(tmp_path):
    hp = tmp_path / "hp.json"
    hp.write_text(f'{{"units": {"9" * 5000}}}')
    big = f'{{"n": {"9" * 5000}}}'
    for extra, said in (
        (["--custom-config", big], "holds a number Python cannot read"),
        (["--hyperparameters", str(hp)], "holds a number Python cannot read"),
        (["--custom-config", '{"token": "abc\\ud800defg"}'], "holds a lone surrogate \\ud800"),
    ):
        code, heavy, stderr = _cli(_train(PENGUIN / "module.py", tmp_path, *extra))
        assert (code, heavy) == (2, []), stderr[-2000:]
        assert f"{extra[0]}: " in stderr and said in stderr


def test_nvidia_smi_output_that_is_not_utf8_counts_gpus_and_drops_escapes(tmp_path):
    smi = tmp_path / "nvidia-smi"
    smi.write_bytes(
        b"#!/bin/sh\nprintf 'GPU 0: Tesla \\377\\376 X (UUID: GPU-1)\\nGPU 1: A\\033[2J (UUID: "
        b"2)\\n'\n"
    )
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    found = accelerator.detect({"PATH": str(tmp_path)}, dev_dir=str(tmp_path / "nodev"))
    assert found.found == 2 and "\ufffd" in found.evidence and "\x1b" not in found.evidence


def test_control_characters_in_user_strings_never_start_a_log_line(tmp_path, caplog):
    forged = "m\n2026-01-01 00:00:00,000 ERROR generic_trainer: train failed\r\x1b[2K\u2028"
    assert shown(forged) == (
        "m\\n2026-01-01 00:00:00,000 ERROR generic_trainer: train failed\\r\\x1b[2K\\u2028"
    )
    error = UserInputError("--model-dir", f"{forged} is bad")
    assert "\n" not in str(error) and "\\n2026" in str(error)
    record = logging.LogRecord("generic_trainer", logging.INFO, "", 0, "model %s", (forged,), None)
    EscapingFilter().filter(record)
    assert "\n" not in record.getMessage()
    failed = OSError(28, "No space left on device", f"/out/{forged}")
    traceback = UserCodeError("run_fn raised ValueError: x\nTraceback (most recent call last):")
    record = logging.LogRecord(
        "generic_trainer.x", logging.ERROR, "", 0, "%s; %s", (failed, traceback), None
    )
    EscapingFilter().filter(record)
    assert record.getMessage().count("\n") == 1  # the user code's traceback keeps its lines
    assert "/out/m\\n2026" in record.getMessage()
    user = logging.LogRecord("module (absl)", logging.INFO, "", 0, "%s", ("a\nb",), None)
    EscapingFilter().filter(user)
    assert user.getMessage() == "a\nb"  # user code's own lines are the user's


def test_a_newline_in_a_path_on_the_cli_is_escaped(tmp_path):
    code, _, stderr = _cli(
        _train(PENGUIN / "module.py", tmp_path, "--examples", str(tmp_path / "x\nERROR forged"))
    )
    assert code == 2
    assert not any(line.startswith("ERROR forged") for line in stderr.splitlines()), stderr
    assert "x\\nERROR forged" in stderr


def test_tool_text_drops_control_characters():
    assert bounded_parse.tool_text(b"a\xffb\x1b[31m\tc\n") == "a\ufffdb[31m\tc\n"
