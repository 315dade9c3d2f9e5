"""The supervising parent: the console script runs each verb in a child process it watches.

User code runs in the process that runs the verb, so it can end that process in ways no `except`
sees (`os._exit(0)`, a signal, a native crash), write the run record itself, or leave processes
running. The parent (light: no TensorFlow) runs `python -m generic_trainer <same arguments>` as a
child in its own session and:

- relays its stdout and stderr masked as whole streams (artifacts/masking.py: every secret of every
  configuration channel, intake/secret_channels.py, and URL userinfo), tracebacks included;
- forwards the signals it gets to the child (which dies with the parent, PR_SET_PDEATHSIG); a run
  one of them ends before it finished is "stopped from outside by SIGx", exit 128+N;
- gives `atexit` handlers ATEXIT_GRACE_S after the child reported its end, then decides the exit
  code itself (run_ending.py);
- names every process the run left running and ends it (artifacts/leftovers.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping

from generic_trainer import log_text, run_ending
from generic_trainer.artifacts import leftovers, run_record
from generic_trainer.artifacts.leftovers import (  # noqa: F401 (left_running: re-exported)
    become_subreaper,
    end_left_running,
    left_running,
)
from generic_trainer.artifacts.masking import Masker, MaskingFilter, relay
from generic_trainer.supervised import (  # noqa: F401 (executor_output_path: re-exported)
    executor_output_path,
    print_summary,
)

log = logging.getLogger("generic_trainer")
SUPERVISE_ENV = "GENERIC_TRAINER_SUPERVISE"  # "0": run the verb in this process (debugging only)
FORWARDED = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)
ATEXIT_GRACE_S = 30.0  # after the run reported its end: atexit handlers and teardown, at most
_PR_SET_PDEATHSIG = 1


def wanted(environ: dict[str, str] | None = None) -> bool:
    """Whether this process should supervise a child: not a child itself, not turned off, Linux.

    Args:
      environ: the environment to read (None: os.environ).
    """
    environ = os.environ if environ is None else environ
    return (
        run_record.RECORD_ENV not in environ
        and environ.get(SUPERVISE_ENV, "1") != "0"
        and sys.platform.startswith("linux")
    )


def known_secrets(args: object, environ: Mapping[str, str] | None = None) -> set[str]:
    """The secret values of the run, from every configuration channel (intake/secret_channels.py).

    Args:
      args: the parsed arguments.
      environ: the environment whose secrets count too (None: os.environ).

    Returns:
      The secret values to mask.
    """
    from generic_trainer.intake.secret_channels import run_secrets

    return run_secrets(dict(vars(args)), os.environ if environ is None else environ)


def _die_with_parent() -> None:  # runs in the child between fork and exec
    leftovers.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def mask_logs(secrets: set[str]) -> None:
    """Mask `secrets` in what this process logs through its root handlers."""
    if secrets:
        for handler in logging.getLogger().handlers:
            handler.addFilter(MaskingFilter(secrets))


def _wait(child: subprocess.Popen, record_path: str, grace_s: float) -> None:
    """Wait for the child; once it reported its end, kill its group after `grace_s` (atexit)."""
    ended_at = None
    while child.poll() is None:
        try:
            child.wait(timeout=0.25)
        except subprocess.TimeoutExpired:
            pass
        if ended_at is None and run_record.RunRecord.read(record_path).end is not None:
            ended_at = time.monotonic()
        if ended_at is not None and time.monotonic() - ended_at > grace_s and child.poll() is None:
            log.warning(
                "the run ended, but its process was still running %.0f s later (an atexit handler "
                "or a library's teardown that does not return?): killing it (SIGKILL)",
                grace_s,
            )
            with contextlib.suppress(OSError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()


def run(
    verb: str,
    argv: list[str],
    secrets: Iterable[str],
    expected_output: str | None = None,
    command: list[str] | None = None,
) -> int:
    """Run `python -m generic_trainer ARGV` (or `command`) as a supervised child.

    Args:
      verb: the verb's name, for the messages.
      argv: the child's arguments.
      secrets: values masked in everything the child writes.
      expected_output: the main output a successful run must leave (`main_output.problem`).
      command: the child's command line instead of `python -m generic_trainer ARGV`.

    Returns:
      The run's exit code.
    """
    record_dir = tempfile.mkdtemp(prefix="generic-trainer-run-")
    record_path = os.path.join(record_dir, "record.jsonl")
    become_subreaper()
    watch = run_ending.RunWatch(main_output=expected_output)
    child = _start_child(command or [sys.executable, "-m", "generic_trainer", *argv], record_path)

    def forward(signum: int, frame: object) -> None:
        watch.forwarded.append(signum)
        with contextlib.suppress(OSError):
            os.kill(child.pid, signum)

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    relays = _start_relays(child, Masker(secrets))
    try:
        _wait(child, record_path, ATEXIT_GRACE_S)
        end_left_running(child.pid)
        for thread, pipe in zip(relays, (child.stdout, child.stderr), strict=True):
            thread.join(timeout=10)  # a process that escaped the subreaper could hold a pipe open
            if not thread.is_alive():
                pipe.close()
        return run_ending.exit_code(verb, child, run_record.RunRecord.read(record_path), watch)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        shutil.rmtree(record_dir, ignore_errors=True)


def _start_child(command: list[str], record_path: str) -> subprocess.Popen:
    """Start the child in its own session, dying with this process, writing `record_path`."""
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=_die_with_parent,
        env={**os.environ, run_record.RECORD_ENV: record_path},
    )


def _start_relays(child: subprocess.Popen, mask: Masker) -> list[threading.Thread]:
    """Threads relaying the child's stdout and stderr, masked, to this process's."""
    hidden = log_text.native_log_below(os.environ.get("TF_CPP_MIN_LOG_LEVEL"))
    relays = [
        threading.Thread(
            target=relay,
            args=(pipe.fileno(), sink, mask, 0.5, lines),
            daemon=True,
            name=f"relay-{name}",
        )
        for pipe, sink, name, lines in (
            (child.stdout, sys.stdout.buffer, "stdout", None),
            (child.stderr, sys.stderr.buffer, "stderr", hidden),
        )
    ]
    for thread in relays:
        thread.start()
    return relays
