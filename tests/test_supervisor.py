"""supervisor: the console script's parent process. Masking secrets in what it relays, ending the
processes a run left running, and the CLI run through it (fast: vertex-job --dry-run needs no
TensorFlow). The user-code endings
it turns into exit 3 (os._exit, signals, children left) run the real CLI in test_hostile.py."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
import threading
import time

from conftest import cli_env, run_cli
from generic_trainer import supervisor
from generic_trainer.artifacts.redaction import secret_values


def test_secret_values_are_found_in_flags_executor_input_and_container_arguments(tmp_path):
    config = {
        "api_token": "tok-123456",
        "n": 1,
        "db": {"password": 12345678, "user": "bob"},
        "secret_keys": ["mine"],
        "mine": "abcd-mine",
        "short_token": "abc",
        "note": "not secret",
    }
    assert secret_values({"custom_config": json.dumps(config)}) == {
        "tok-123456",
        "12345678",
        "abcd-mine",
    }
    executor_input = {"inputs": {"parameterValues": {"custom_config": {"token": "kfp-token-1"}}}}
    assert secret_values({"executor_input": json.dumps(executor_input)}) == {"kfp-token-1"}
    args = ["--examples", "gs://b/x", '--custom-config={"secret": "in-a-list-1"}']
    assert secret_values({"container_args": args}) == {"in-a-list-1"}
    file = tmp_path / "executor_input.json"
    file.write_text(json.dumps(executor_input))
    args = argparse.Namespace(executor_input=str(file), custom_config=None, verb="train")
    assert supervisor.known_secrets(args, environ={}) == {"kfp-token-1"}


def test_masker_masks_the_value_as_written_and_as_json_or_repr_escape_it():
    mask = supervisor.Masker(['pa"ss\\word'])
    text = 'raw pa"ss\\word json "pa\\"ss\\\\word" repr \'pa"ss\\\\word\''
    assert mask(text.encode()) == b"raw *** json \"***\" repr '***'"


def test_relay_masks_a_secret_split_across_writes_and_flushes_a_partial_line(tmp_path):
    read_fd, write_fd = os.pipe()
    out_path = tmp_path / "out"
    with open(out_path, "wb") as sink:
        thread = threading.Thread(
            target=supervisor.relay, args=(read_fd, sink, supervisor.Masker(["s3cr3t-value"]), 0.2)
        )
        thread.start()
        os.write(write_fd, b"token s3cr")
        time.sleep(0.05)
        os.write(write_fd, b"3t-value here\nprompt> ")
        time.sleep(0.6)  # idle: the partial line is written
        assert out_path.read_bytes() == b"token *** here\nprompt> "
        os.close(write_fd)
        thread.join(timeout=10)
    os.close(read_fd)
    assert not thread.is_alive()


def test_processes_left_running_are_named_and_ended_even_orphaned_or_ignoring_sigterm(tmp_path):
    """In a child interpreter (the pytest worker's own children must not be touched): one orphan
    that left the
    run's process group (reparented to the subreaper) and one in the group that ignores SIGTERM."""
    code = textwrap.dedent("""
        import json, logging, os, subprocess, sys
        from generic_trainer import supervisor
        logging.basicConfig(level="INFO")
        supervisor.become_subreaper()
        run = subprocess.Popen(["sh", "-c",
                                "setsid sleep 1001 & echo $!; "
                                "exec sh -c 'trap \\"\\" TERM; sleep 1002'"],
                               stdout=subprocess.PIPE, text=True, start_new_session=True)
        orphan = int(run.stdout.readline())
        run.stdout.close()
        import time; time.sleep(0.5)
        run.kill()  # the run itself ends; what it started stays
        run.wait()
        ended = supervisor.end_left_running(run.pid, grace_s=1.0)
        print(json.dumps({"orphan": orphan, "ended": ended,
                          "left": list(supervisor.left_running(run.pid))}))
    """)
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=cli_env()
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["left"] == [] and result["orphan"] in result["ended"]
    assert f"process left running by the run: pid {result['orphan']}" in proc.stderr
    assert "sleep 1001" in proc.stderr
    assert "still running 1 s after SIGTERM: killing them (SIGKILL)" in proc.stderr
    assert not os.path.exists(f"/proc/{result['orphan']}")


def test_vertex_dry_run_masks_the_secret_it_would_send(tmp_path):
    secret = 'AKIA"very-secret-1'
    proc = run_cli(
        [
            "vertex-job",
            "--project",
            "p",
            "--region",
            "us-central1",
            "--image",
            "img",
            "--base-output-dir",
            "gs://b/out",
            "--dry-run",
            *("--env", "WANDB_API_KEY=wandb-secret-42", "--env", "OTHER=env-secret-99"),
            *("--env", "STORAGE_EMULATOR_HOST=http://u:emu-pass-7@h:9"),
            "--",
            "train",
            "--examples",
            "gs://b/ex",
            "--module-file",
            "gs://b/m.py",
            "--custom-config",
            json.dumps({"api_key": secret, "n": 1}),
            # issue 31: every channel feeds the secret list (vertex --env, --params-override,
            # the environment's names that say secret, URL userinfo)
            *("--params-override", "task.custom_config.api_token=override-secret-5"),
        ],
        timeout=120,
        env={"MY_SERVICE_TOKEN": "env-secret-99"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "very-secret" not in proc.stdout + proc.stderr
    for leaked in ("wandb-secret-42", "env-secret-99", "emu-pass-7", "override-secret-5"):
        assert leaked not in proc.stdout + proc.stderr
    assert "http://***@h:9" in proc.stdout
    job = json.loads(proc.stdout)
    args = job["customJob"]["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"]
    assert json.loads(args[args.index("--custom-config") + 1]) == {"api_key": "***", "n": 1}


def test_argument_errors_and_bad_input_keep_their_exit_codes_through_the_supervisor(tmp_path):
    assert run_cli(["train", "--no-such-flag"], timeout=120).returncode == 2
    proc = run_cli(
        [
            "train",
            "--examples",
            tmp_path / "missing",
            "--module-file",
            tmp_path / "m.py",
            "--model-dir",
            tmp_path / "model",
        ],
        timeout=120,
    )
    assert proc.returncode == 2 and "--examples" in proc.stderr
    assert "failed: the run" not in proc.stderr  # the child finished its contract: its code stands


def test_without_the_supervisor_log_records_are_masked_too():
    """cli.main(argv) in-process (tests, notebooks) and GENERIC_TRAINER_SUPERVISE=0 run without the
    parent: what
    they log through the root handlers is masked by a filter."""
    import io
    import logging

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        supervisor.mask_logs({"TOKEN-S3CRET-42"})
        logging.getLogger("generic_trainer").error(
            "%s failed: %s", "train", "auth failed for token TOKEN-S3CRET-42"
        )
    finally:
        root.removeHandler(handler)
    assert stream.getvalue() == "train failed: auth failed for token ***\n"


def test_a_printed_summary_has_the_runs_secrets_masked_and_stays_json():
    """cli.run_verb masks the summary it prints (the supervised parent prints it unchanged)."""
    from generic_trainer.artifacts import masking

    mask = masking.Masker({'AKIA"sec-ret-77'})
    args = ["--custom-config", json.dumps({"api_key": 'AKIA"sec-ret-77'})]
    summary = {"args": args, "url": "http://u:pw-9@h", 'AKIA"sec-ret-77': 1, "n": 2}
    masked = masking.mask_value(summary, mask)
    assert "sec-ret" not in json.dumps(masked) and "pw-9" not in json.dumps(masked)
    assert json.loads(masked["args"][1]) == {"api_key": "***"}
    assert masked["url"] == "http://***@h" and masked["***"] == 1 and masked["n"] == 2
