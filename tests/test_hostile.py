"""Hostile user code and models (tests/hostile/), through the real CLI: modules that end the process
at import or in run_fn / tuner_fn / a Task, leave a non-daemon thread running, hang in run_fn
(SIGTERM), write outside their dirs; models that hang or allocate without bound under evaluate's and
infra-validate's sandbox.
The README's "Hostile and bad input" table lists these cases."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import PENGUIN, cli_env, run_cli

HOSTILE = Path(__file__).parent / "hostile"
sys.path.insert(0, str(HOSTILE))


def _train(module: str, tmp_path: Path, *extra) -> list:
    return [
        "train",
        "--examples",
        PENGUIN / "data",
        "--schema",
        PENGUIN / "schema.pbtxt",
        "--module-file",
        HOSTILE / module,
        "--model-dir",
        tmp_path / "model",
        "--metrics-file",
        tmp_path / "metrics.json",
        *extra,
    ]


def _nothing_published(tmp_path: Path) -> None:
    assert not (tmp_path / "model" / "Format-Serving").exists()
    assert not (tmp_path / "metrics.json").exists()


# --------------------------------------------------------------------------------------------
# User code that ends the process: exit 3 naming the code it asked for, never a success without a
# model
# --------------------------------------------------------------------------------------------


def test_exit_error_names_the_code_and_the_line():
    from generic_trainer.errors import EXIT_USER_CODE
    from generic_trainer.fit import user_code

    def users_function(code):
        sys.exit(code)

    for code, asked in [
        (None, "sys.exit()"),
        (0, "sys.exit(0)"),
        (7, "sys.exit(7)"),
        ("bye", "sys.exit('bye')"),
    ]:
        try:
            users_function(code)
        except SystemExit as e:
            error = user_code.exit_error(e, "run_fn")
        assert error.exit_code == EXIT_USER_CODE
        assert str(error).startswith(f"run_fn called {asked} at {__file__} line ")


@pytest.mark.slow
def test_sys_exit_0_at_import_is_a_user_code_failure(tmp_path):
    proc = run_cli(_train("exit_at_import.py", tmp_path))
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert (
        "called sys.exit(0)" in proc.stderr
        and f"{HOSTILE / 'exit_at_import.py'} line 5" in proc.stderr
    )
    _nothing_published(tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize(
    "code, asked", [(0, "sys.exit(0)"), (7, "sys.exit(7)"), ("bye", "sys.exit('bye')")]
)
def test_sys_exit_in_run_fn_is_a_user_code_failure(tmp_path, code, asked):
    proc = run_cli(
        _train("exit_in_run_fn.py", tmp_path, "--custom-config", json.dumps({"exit": code}))
    )
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert f"run_fn called {asked}" in proc.stderr and "exit_in_run_fn.py line" in proc.stderr
    assert "exit code 3 (user code)" in proc.stderr
    _nothing_published(tmp_path)


@pytest.mark.slow
def test_sys_exit_in_tuner_fn_is_a_user_code_failure(tmp_path):
    proc = run_cli(
        [
            "tune",
            "--examples",
            PENGUIN / "data",
            "--schema",
            PENGUIN / "schema.pbtxt",
            "--module-file",
            HOSTILE / "exit_in_tuner_fn.py",
            "--best-hyperparameters-dir",
            tmp_path / "best",
        ]
    )
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "tuner_fn called sys.exit(7)" in proc.stderr
    assert not (tmp_path / "best").exists()


@pytest.mark.slow
def test_sys_exit_in_a_task_method_is_a_user_code_failure(tmp_path):
    from datagen import write_schema, write_split

    rows = [{"x1": [0.1 * i], "x2": [0.2], "target": [0.3 * i]} for i in range(20)]
    write_split(str(tmp_path / "examples"), "train", rows)
    write_split(str(tmp_path / "examples"), "eval", rows)
    schema = write_schema(
        str(tmp_path / "schema.pbtxt"), {"x1": "FLOAT", "x2": "FLOAT", "target": "FLOAT"}
    )
    proc = run_cli(
        [
            "train",
            "--task",
            f"{HOSTILE / 'exit_task.py'}:ExitingTask",
            "--examples",
            tmp_path / "examples",
            "--schema",
            schema,
            "--model-dir",
            tmp_path / "model",
            "--mode",
            "train",
            "--params-override",
            "trainer.train_steps=5",
        ]
    )
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "called sys.exit(5)" in proc.stderr and "exit_task.py line" in proc.stderr
    assert not (tmp_path / "model" / "Format-Serving").exists()


# --------------------------------------------------------------------------------------------
# Endings no `except` sees (the supervisor), children left running, exceptions hard to report
# --------------------------------------------------------------------------------------------


def _endings(tmp_path: Path, do: str, **config) -> list:
    return _train("user_endings.py", tmp_path, "--custom-config", json.dumps({"do": do, **config}))


def _no_lock_or_staging(tmp_path: Path) -> None:
    left = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".model"))
    assert left == [], left  # .model.lock, .model.staging-*


@pytest.mark.slow
@pytest.mark.parametrize(
    "do, how",
    [
        (
            "os_exit",
            "the run ended with exit status 0 (os._exit() or a library ending the process) while "
            "run_fn ran",
        ),
        (
            "kill_self",
            "the run was killed by SIGKILL (the out-of-memory killer, or a kill from outside?) "
            "while run_fn ran",
        ),
    ],
)
def test_ending_the_process_in_run_fn_is_exit_3_and_releases_the_lock(tmp_path, do, how):
    proc = run_cli(_endings(tmp_path, do))
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert f"train failed: {how}, before it finished: no outputs were published" in proc.stderr
    assert f"released the lock on {tmp_path / 'model'}" in proc.stderr
    assert proc.stdout == ""
    _nothing_published(tmp_path)
    _no_lock_or_staging(tmp_path)


@pytest.mark.slow
def test_a_forged_completion_entry_without_a_model_is_exit_3(tmp_path):
    """Issue 31: the parent decides success: a run_fn that writes the run record's `end` entry
    itself and
    ends the process leaves no model, so the run is exit 3, not 0."""
    proc = run_cli(_endings(tmp_path, "forge_end"))
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert (
        f"train failed: the run reported success, but its --model-dir {tmp_path / 'model'} holds "
        "no model (Format-Serving/saved_model.pb is missing)"
    ) in proc.stderr
    assert f"released the lock on {tmp_path / 'model'}" in proc.stderr
    assert proc.stdout == ""
    _nothing_published(tmp_path)
    _no_lock_or_staging(tmp_path)


@pytest.mark.slow
def test_a_process_left_running_by_run_fn_is_named_and_ended_and_does_not_hold_the_pipe(tmp_path):
    """`generic-trainer train ... | cat` waited for the `sleep 1000` run_fn left holding stdout: now
    the run ends
    at once, naming the process and ending it."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "generic_trainer",
            *map(str, _endings(tmp_path, "child", pid_dir=str(tmp_path))),
        ],
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = proc.communicate(timeout=600)  # without the fix: until the sleep ends (1000 s)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-3000:]
    assert json.loads(out)["serving_model_dir"] == str(tmp_path / "model" / "Format-Serving")
    sleeper = int((tmp_path / "sleeper.pid").read_text())
    assert (
        f"process left running by the run: pid {sleeper} (process group " in err
        and "sleep 1000" in err
    )
    assert not os.path.exists(f"/proc/{sleeper}")


def _kfp_train(tmp_path: Path, config: dict) -> tuple[list, Path]:
    out = tmp_path / "kfp"

    def art(name: str, schema: str) -> dict:
        return {
            "artifacts": [{"name": name, "uri": str(out / name), "type": {"schemaTitle": schema}}]
        }

    executor_input = {
        "inputs": {
            "parameterValues": {
                "module_file": str(HOSTILE / "user_endings.py"),
                "custom_config": config,
                "schema": str(PENGUIN / "schema.pbtxt"),
            },
            "artifacts": {
                "examples": {"artifacts": [{"uri": str(PENGUIN / "data"), "name": "examples"}]}
            },
        },
        "outputs": {
            "outputFile": str(out / "executor_output.json"),
            "artifacts": {
                "model": art("model", "system.Model"),
                "metrics": art("metrics", "system.Metrics"),
            },
        },
    }
    return ["train", "--executor-input", json.dumps(executor_input)], out / "executor_output.json"


@pytest.mark.slow
@pytest.mark.parametrize("form", ["cli", "kfp"])
def test_a_secret_in_an_exception_message_is_masked_in_every_line(tmp_path, form):
    config = {"do": "secret", "api_token": "TOKEN-S3CRET-42"}
    if form == "cli":
        args, executor_output = (
            _train("user_endings.py", tmp_path, "--custom-config", json.dumps(config)),
            None,
        )
    else:
        args, executor_output = _kfp_train(tmp_path, config)
    proc = run_cli(args)
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "TOKEN-S3CRET-42" not in proc.stdout + proc.stderr
    assert "train failed: run_fn raised RuntimeError: auth failed for token ***" in proc.stderr
    assert (
        'raise RuntimeError(f"auth failed for token' in proc.stderr
    )  # the traceback is there, masked
    assert proc.stderr.count("auth failed for token ***") >= 2
    if executor_output is not None:
        assert not executor_output.exists()  # never written for a failed run


@pytest.mark.slow
@pytest.mark.parametrize(
    "do, first_line",
    [
        (
            "bad_str",
            "train failed: run_fn raised BadStr: <its message could not be read: str() raised "
            "ValueError>",
        ),
        (
            "base_exception",
            "train failed: run_fn raised NotAnException: stop everything (a BaseException that is "
            "not an "
            "Exception: raise an Exception subclass)",
        ),
    ],
)
def test_exceptions_hard_to_report_are_user_code_failures_not_bugs(tmp_path, do, first_line):
    proc = run_cli(_endings(tmp_path, do))
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert first_line in proc.stderr and "a bug of generic-trainer" not in proc.stderr
    _nothing_published(tmp_path)
    _no_lock_or_staging(tmp_path)


@pytest.mark.slow
def test_closing_stdout_and_stderr_after_a_good_model_is_a_success(tmp_path):
    proc = run_cli(_endings(tmp_path, "close_fds"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["serving_model_dir"] == str(
        tmp_path / "model" / "Format-Serving"
    )
    assert (tmp_path / "model" / "Format-Serving" / "saved_model.pb").is_file()
    assert "user code closed the process's stdout (fd 1)" in proc.stderr
    assert "user code closed the process's stderr (fd 2)" in proc.stderr


# --------------------------------------------------------------------------------------------
# Threads left running, a run_fn that hangs, writes outside the module's dirs
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_non_daemon_thread_left_running_does_not_keep_the_process_alive(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "generic_trainer", *map(str, _train("thread_left.py", tmp_path))],
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = proc.communicate(
            timeout=600
        )  # without the fix: never (the thread sleeps for ever)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-3000:]
    assert (tmp_path / "model" / "Format-Serving" / "saved_model.pb").is_file()
    assert json.loads(out)["serving_model_dir"] == str(tmp_path / "model" / "Format-Serving")
    assert "1 thread(s) still running after the run ended, not waited for: 'hostile-sleeper'" in err
    assert err.index("published") < err.index(
        "hostile-sleeper"
    )  # only after everything was written


@pytest.mark.slow
def test_sigterm_ends_a_hanging_run_fn_promptly_with_143(tmp_path):
    """What KFP / Vertex do with a task past its timeout: SIGTERM (then SIGKILL after a grace
    period).
    A run_fn hanging in Python is interrupted by the preemption handler: exit 143 at once."""
    log_path = tmp_path / "train.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "generic_trainer",
                *map(str, _train("hang_in_run_fn.py", tmp_path)),
            ],
            env=cli_env(),
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        try:
            deadline = time.monotonic() + 600
            while "hostile run_fn: hanging now" not in log_path.read_text():
                assert proc.poll() is None, log_path.read_text()[-3000:]
                assert time.monotonic() < deadline, "run_fn never started"
                time.sleep(0.2)
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert code == 143, log_path.read_text()[-3000:]
    assert "preempted: SIGTERM received" in log_path.read_text()
    _nothing_published(tmp_path)


@pytest.mark.slow
def test_writing_outside_its_dirs_does_not_touch_the_published_model(tmp_path):
    """Needs the staging dir outside the published tree (issue 13 item 14, the i13a branch): on the
    old layout
    serving_model_dir/../../Format-Serving IS the published model."""
    import tiny_serving

    published = tmp_path / "model" / "Format-Serving"
    tiny_serving.save(str(published), marker="the model published before")
    proc = run_cli(_train("write_outside.py", tmp_path))
    assert proc.returncode == 4, proc.stderr[-3000:]  # it wrote no model where it should
    assert "wrote no model" in proc.stderr
    assert (published / "assets.extra" / "marker").read_text() == "the model published before"


# --------------------------------------------------------------------------------------------
# The sandbox (fast: children without TensorFlow)
# --------------------------------------------------------------------------------------------


def _sandbox(tmp_path: Path, target: str, spec: dict, limits, monkeypatch):
    from generic_trainer.judge import sandbox

    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(HOSTILE), os.environ.get("PYTHONPATH", "")])
    )
    spec_path, result_path = tmp_path / "spec.json", tmp_path / "result.json"
    spec_path.write_text(json.dumps(spec))
    outcome = sandbox.run(
        "generic_trainer.judge.sandbox",
        [target, str(spec_path), str(result_path)],
        limits,
        str(tmp_path),
        "test child",
    )
    return outcome, (json.loads(result_path.read_text()) if result_path.exists() else None)


def test_a_sandbox_child_returns_its_value_and_is_no_failure(tmp_path, monkeypatch):
    from generic_trainer.judge import sandbox, sandbox_outcome

    outcome, result = _sandbox(
        tmp_path, "hostile_children:answer", {"x": 1}, sandbox.Limits(60, None), monkeypatch
    )
    assert outcome.code == 0 and not outcome.timed_out and result == {"value": {"echo": {"x": 1}}}
    assert sandbox_outcome.failure(outcome, sandbox.Limits(60, None)) is None


def test_sandbox_memory_limit_is_reported_as_memory(tmp_path, monkeypatch):
    from generic_trainer.judge import sandbox, sandbox_outcome

    limits = sandbox.Limits(120, 256 * 1024**2)
    outcome, result = _sandbox(tmp_path, "hostile_children:grow_memory", {}, limits, monkeypatch)
    assert outcome.code == 0 and result["error"]["class"] == "MemoryError"
    assert outcome.stage.startswith("holding ") and outcome.stage.endswith(" MiB")
    reason = sandbox_outcome.memory_reason(outcome.stage, limits, result["error"]["message"])
    assert "ran out of memory while holding" in reason and "memory limit 256 MiB" in reason


def test_sandbox_idle_limit_counts_from_the_last_progress(tmp_path, monkeypatch):
    from generic_trainer.judge import sandbox, sandbox_outcome

    limits = sandbox.Limits(timeout=3, memory_limit=None, idle=True)
    started = time.monotonic()
    outcome, result = _sandbox(
        tmp_path,
        "hostile_children:hang_after_progress",
        {"steps": 4, "every": 1.5},
        limits,
        monkeypatch,
    )
    assert outcome.timed_out and result is None and outcome.stage == "step 4"
    assert time.monotonic() - started > 6  # the progress kept it alive past the 3 s limit
    with pytest.raises(ProcessLookupError):
        os.kill(outcome.pid, 0)  # killed with its process group, and reaped
    reason = sandbox_outcome.failure(outcome, limits)
    assert "did not finish within the time limit of 3 s without progress (it was step 4" in reason


def test_time_limit_at_the_memory_limit_blames_memory():
    """A child still running at its time limit with its address space at the memory limit (a model
    thrashing
    on allocations) is reported as a memory problem, with the limit; a plain hang as a time
    limit."""
    from generic_trainer.judge import sandbox, sandbox_outcome

    limits = sandbox.Limits(timeout=300, memory_limit=8 * 1024**3)
    at_limit = sandbox.Outcome(
        pid=1,
        code=None,
        timed_out=True,
        tail="",
        stage="serving request 1",
        peak_address_space=int(7.9 * 1024**3),
        peak_resident=6 * 1024**3,
    )
    reason = sandbox_outcome.failure(at_limit, limits)
    assert reason.startswith("the serving process reached its memory limit of 8 GiB")
    assert "address space 7.9 GiB of its 8 GiB limit" in reason and "time limit of 300 s" in reason
    hung = sandbox.Outcome(
        pid=1,
        code=None,
        timed_out=True,
        tail="",
        stage="serving request 1",
        peak_address_space=3 * 1024**3,
    )
    assert sandbox_outcome.failure(hung, limits).startswith(
        "the serving process did not finish within the time limit"
    )
    killed = sandbox.Outcome(
        pid=1, code=-signal.SIGKILL, timed_out=False, tail="", stage="loading the model"
    )
    assert (
        "ran out of memory while loading the model (memory limit 8 GiB"
        in sandbox_outcome.failure(killed, limits)
    )


# --------------------------------------------------------------------------------------------
# Models that hang or allocate without bound, under evaluate's and infra-validate's sandbox
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hostile_models(tmp_path_factory) -> dict[str, str]:
    import hostile_models as models

    root = tmp_path_factory.mktemp("hostile_models")
    return {
        "hanging": models.hanging(str(root / "hanging")),
        "allocating": models.allocating(str(root / "allocating")),
    }


def _evaluate(model: str, out: Path, *extra) -> tuple[subprocess.CompletedProcess, str]:
    proc = run_cli(
        [
            "evaluate",
            "--model",
            model,
            "--examples",
            PENGUIN / "data",
            "--eval-config",
            json.dumps({"label_key": "species"}),
            "--blessing-dir",
            out / "blessing",
            "--metrics-file",
            out / "metrics.json",
            "--report-file",
            out / "report.html",
            *extra,
        ]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]  # NOT_BLESSED is a result
    assert not (out / "blessing" / "BLESSED").exists()
    return proc, (out / "blessing" / "NOT_BLESSED").read_text()


@pytest.mark.slow
@pytest.mark.e2e
def test_evaluate_a_hanging_model_is_not_blessed_at_the_time_limit(hostile_models, tmp_path):
    started = time.monotonic()
    # 60 s without progress: above TensorFlow's import (the longest stage before the hang) on a
    # loaded machine,
    # seen at 47 s with the load average at 5 on 2 cores
    proc, reason = _evaluate(hostile_models["hanging"], tmp_path, "--timeout", "60")
    assert (
        "the evaluation process did not finish within the time limit of 60 s without progress"
        in reason
    )
    assert "(it was TFMA read 1 examples" in reason  # TFMA's own progress, from its counters
    assert time.monotonic() - started < 400
    assert json.loads(proc.stdout)["blessed"] is False
    assert json.loads((tmp_path / "metrics.json").read_text())["reasons"] == [reason.strip()]
    assert "NOT_BLESSED" in (tmp_path / "report.html").read_text()


@pytest.mark.slow
def test_evaluate_an_allocating_model_is_not_blessed_naming_the_memory_limit(
    hostile_models, tmp_path
):
    _, reason = _evaluate(hostile_models["allocating"], tmp_path, "--memory-limit", "3GiB")
    assert "the evaluation process ran out of memory while TFMA read 1 examples" in reason
    assert "memory limit 3 GiB" in reason


@pytest.mark.slow
def test_infra_validate_an_allocating_model_names_the_memory_limit(hostile_models, tmp_path):
    proc = run_cli(
        [
            "infra-validate",
            "--model",
            hostile_models["allocating"],
            "--examples",
            PENGUIN / "data",
            "--blessing-dir",
            tmp_path / "blessing",
            "--num-requests",
            "1",
            "--memory-limit",
            "3GiB",
        ]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    reason = (tmp_path / "blessing" / "INFRA_NOT_BLESSED").read_text()
    assert "out of memory (memory limit 3 GiB" in reason and "time limit" not in reason
