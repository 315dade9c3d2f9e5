"""Issue 31: secrets from every channel masked on the whole stream, the supervisor deciding success
in the parent (main output, atexit grace, signals from outside), and the examples cache within
memory.

The supervisor runs real child processes (a small script stands in for the verb where the case is
the supervisor's own); vertex-job --dry-run runs the real CLI without TensorFlow.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import cli_env
from generic_trainer import supervisor
from generic_trainer.artifacts import main_output, masking
from generic_trainer.intake.secret_channels import run_secrets
from generic_trainer.records import cache_budget


def _relay(
    writes: list[tuple[bytes, float]], secrets: list[str], tmp_path: Path, hidden=None
) -> bytes:
    read_fd, write_fd = os.pipe()
    out = tmp_path / "relayed"
    with open(out, "wb") as sink:
        thread = threading.Thread(
            target=masking.relay, args=(read_fd, sink, masking.Masker(secrets), 0.1, hidden)
        )
        thread.start()
        for data, pause in writes:
            os.write(write_fd, data)
            time.sleep(pause)
        os.close(write_fd)
        thread.join(timeout=20)
    os.close(read_fd)
    return out.read_bytes()


def test_a_token_split_across_writes_or_the_line_cut_is_masked(tmp_path):
    token = "tok-1234567890"
    slow = _relay([(b"auth tok-12345", 0.6), (b"67890 ok\n", 0.0)], [token], tmp_path)
    assert slow == b"auth *** ok\n"
    cut = masking.MAX_LINE - 5  # the 1 MiB bound cuts the line inside the token
    long = _relay([(b"x" * cut + token.encode() + b"y" * 100, 0.0)], [token], tmp_path)
    assert token.encode() not in long and b"***" in long and len(long) == cut + 103
    tail = _relay([(b"ends with tok-", 0.3)], [token], tmp_path)  # at EOF it is written
    assert tail == b"ends with tok-"


PREINIT = (
    b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
    b"I0000 00:00:1795749000.149242    5065 port.cc:153] oneDNN custom operations are on.\n"
    b"W0000 00:00:1795749000.149667    5065 gpu_device.cc:2365] Cannot dlopen some GPU libraries.\n"
    b"E0000 00:00:1795749013.096498    5065 cuda_platform.cc:52] failed call to cuInit: 303\n"
)
USERS = (
    b"I1127 03:09:19.528000 140312 module.py:20] the user's absl-py line, dated\n"
    b"2026-11-27 03:09:22,710 INFO generic_trainer.train: I0000 00:00:1.0 1 a.cc:1] quoted\n"
)


@pytest.mark.parametrize(
    "level,kept",
    [
        ("0", PREINIT.splitlines(keepends=True)),
        ("1", PREINIT.splitlines(keepends=True)[2:]),
        ("2", PREINIT.splitlines(keepends=True)[3:]),
        ("3", []),
    ],
)
def test_absl_preinit_lines_below_tf_cpp_min_log_level_are_dropped_and_users_lines_kept(
    tmp_path, level, kept
):
    """TensorFlow's start-up lines that absl prints before its initialisation, whatever
    TF_CPP_MIN_LOG_LEVEL says, are dropped as that level asks; the user's lines stay."""
    from generic_trainer.log_text import native_log_below

    relayed = _relay([(PREINIT + USERS, 0.0)], [], tmp_path, native_log_below(level))
    assert relayed == b"".join(kept) + USERS


def test_a_lone_surrogate_in_a_secret_does_not_break_the_masker():
    mask = masking.Masker(["ab\ud800cd-secret", "\udcff-escaped-byte"])
    assert mask("x ab\ud800cd-secret y".encode("utf-8", "surrogatepass")) == b"x *** y"
    assert mask(b"z \xff-escaped-byte") == b"z ***"
    assert mask(b"x ab\\ud800cd-secret") == b"x ***"  # as repr / JSON print it


def test_url_userinfo_is_masked_everywhere():
    mask = masking.Masker([])
    line = b"STORAGE_EMULATOR_HOST=http://user:pa55word@emu:9023 model gs://u:pw-1@b/m\n"
    assert mask(line) == b"STORAGE_EMULATOR_HOST=http://***@emu:9023 model gs://***@b/m\n"
    assert mask(b"ssh://git@host and a:b@c") == b"ssh://git@host and a:b@c"


def test_every_configuration_channel_feeds_the_secret_list(tmp_path):
    config = tmp_path / "task.yaml"
    config.write_text("task:\n  custom_config:\n    hub_token: from-config-file\n")
    hp = tmp_path / "hp.json"
    hp.write_text(json.dumps({"units": 8, "db_password": "from-hyperparams"}))
    executor_input = {
        "inputs": {
            "parameterValues": {
                "config": "trainer:\n  api_key: from-inline-yaml\n",
                "params_override": "task.custom_config.secret=from-kfp-override",
            }
        }
    }
    values = {
        "params_override": "task.custom_config.access_token=from-override,trainer.steps=5",
        "config_file": [str(config)],
        "hyperparameters": str(hp),
        "executor_input": json.dumps(executor_input),
        "custom_config": '{"n": 1, "url": "gs://me:from-url@bucket/x"}',
        "env": ["WANDB_API_KEY=from-vertex-env", "DEBUG=true", "DB_PASSWORD=1234"],
        "container_args": ["train", "--params-override", "a.client_secret=from-container-args"],
    }
    environ = {"HF_TOKEN": "from-environment", "TOKENIZERS_PARALLELISM": "false"}
    environ["STORAGE_EMULATOR_HOST"] = "http://user:from-emulator@localhost:9000"
    assert run_secrets(values, environ) == {
        "from-override",
        "from-config-file",
        "from-hyperparams",
        "from-inline-yaml",
        "from-kfp-override",
        "from-url",
        "from-vertex-env",
        "from-container-args",
        "from-environment",
        "from-emulator",
    }


_CHILD = """
import atexit, os, signal, sys, time
from generic_trainer.artifacts import run_record
run_record.claim()
do = sys.argv[1]
if do == "forge_end":
    run_record.note("end", 0, closed=[])
    os._exit(0)
if do == "atexit_blocks":
    atexit.register(time.sleep, 1000)
    run_record.note("end", 0, closed=[])
    sys.exit(0)
if do == "sleep":
    print("ready", flush=True)
    time.sleep(60)
"""

_PARENT = """
import json, logging, sys
from generic_trainer import supervisor
logging.basicConfig(level="INFO")
supervisor.ATEXIT_GRACE_S = 1.0
do, expected = sys.argv[1], sys.argv[2] or None
code = supervisor.run("train", [], [], expected, [sys.executable, "-c", {child!r}, do])
print(json.dumps(code), flush=True)
"""


def _supervise(do: str, expected: str = "", sig: int | None = None) -> tuple[int, str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _PARENT.format(child=_CHILD), do, expected],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(),
    )
    if sig is not None:
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    return json.loads(out.strip().splitlines()[-1]), err


def test_a_forged_end_entry_without_the_main_output_is_exit_3(tmp_path):
    code, err = _supervise("forge_end", str(tmp_path / "model"))
    assert code == 3, err
    assert (
        f"train failed: the run reported success, but its --model-dir {tmp_path / 'model'}" in err
    )
    assert "holds no model (Format-Serving/saved_model.pb is missing)" in err
    (tmp_path / "model" / "Format-Serving").mkdir(parents=True)
    (tmp_path / "model" / "Format-Serving" / "saved_model.pb").write_bytes(b"\xff\xff\xff")
    assert "is not a SavedModel" in main_output.problem("train", str(tmp_path / "model"))


def test_a_blocking_atexit_handler_gets_a_bounded_grace_period():
    start = time.monotonic()
    code, err = _supervise("atexit_blocks")
    assert code == 0 and time.monotonic() - start < 30, err
    assert "its process was still running 1 s later (an atexit handler" in err


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGUSR1, signal.SIGTERM])
def test_a_signal_sent_to_the_supervisor_is_reported_as_from_outside(sig):
    code, err = _supervise("sleep", sig=sig)
    assert code == 128 + sig, err
    name = signal.Signals(sig).name
    assert f"train stopped from outside by {name}: the run was killed by {name}" in err
    assert "user code must return or raise" not in err


def test_main_output_expected_only_where_one_process_publishes(tmp_path):
    values = {"model_dir": "m"}
    assert main_output.expected("train", values, {}) == os.path.abspath("m")
    assert main_output.expected("train", values, {"TF_CONFIG": "{}"}) is None
    assert main_output.expected("push", {"pushed_model_dir": "p"}, {}) is None
    assert main_output.expected("train", {**values, "mode": "eval"}, {}) is None
    assert main_output.expected("tune", lambda: {"best_hyperparameters_dir": "b"}, {}) is not None
    assert main_output.expected("tune", lambda: 1 / 0, {}) is None  # the run reports it
    assert main_output.expected("train", {"model_dir": "gs://b/m"}, {}) is None


def test_another_frameworks_model_must_leave_files_not_a_saved_model(tmp_path):
    values = {"model_dir": str(tmp_path / "m"), "model_format": "other"}
    path = main_output.expected("train", values, {})
    assert path == str(tmp_path / "m" / "Format-Serving")
    assert "does not exist" in main_output.problem("train", path)
    os.makedirs(path)
    (tmp_path / "m" / "Format-Serving" / "model.pkl").write_bytes(b"pickle")
    assert main_output.problem("train", path) is None
    plain = main_output.expected("train", {"model_dir": str(tmp_path / "m")}, {})
    assert "saved_model.pb is missing" in main_output.problem("train", plain)


def test_memory_left_reads_the_cgroup_and_meminfo(tmp_path):
    (tmp_path / "memory.max").write_text("2684354560\n")  # 2.5 GiB
    (tmp_path / "memory.current").write_text("536870912\n")
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 100 kB\nMemAvailable: 8388608 kB\n")
    assert cache_budget.memory_left(str(tmp_path), str(meminfo)) == 2 << 30
    (tmp_path / "memory.max").write_text("max\n")
    assert cache_budget.memory_left(str(tmp_path), str(meminfo)) == 8 << 30


def test_known_secrets_reads_the_parsed_arguments(tmp_path):
    args = argparse.Namespace(verb="train", params_override="x.token=cli-token-77")
    assert supervisor.known_secrets(args, environ={}) == {"cli-token-77"}
