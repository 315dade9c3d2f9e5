"""The supervising parent: the console script runs each verb in a child process it watches.

User code runs in the process that runs the verb, so it can end that process in ways no `except`
sees (`os._exit(0)`, a signal, a native crash), write the run record itself, or leave processes
running. The parent (light: no TensorFlow) runs `python -m generic_trainer <same arguments>` as a
child in its own session and:

- relays its stdout and stderr masked as whole streams (artifacts/masking.py: every secret of every
  configuration channel, intake/secret_channels.py, and URL userinfo), tracebacks included;
- forwards the signals it gets to the child (which dies with the parent, PR_SET_PDEATHSIG); a run
  one of them ends before it finished is "stopped from outside by SIGx", exit 128+N;
- decides success itself: a child that wrote its record's `end` entry keeps its exit code, but exit
  0 only when the main output is there (artifacts/main_output.py); `atexit` handlers get
  ATEXIT_GRACE_S after that entry. Its summary is printed here and its KFP executor output moved to
  where KFP reads it (never for a failed run). Any other ending is exit 3 naming what happened, and
  the output locks the child held are released and their staging dirs removed;
- names every process the run left running and ends it (artifacts/leftovers.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable, Mapping

from generic_trainer.artifacts import leftovers, main_output, run_record
from generic_trainer.artifacts.leftovers import (  # noqa: F401 (left_running: re-exported)
    become_subreaper,
    end_left_running,
    left_running,
)
from generic_trainer.artifacts.masking import Masker, MaskingFilter, relay
from generic_trainer.errors import EXIT_BAD_OUTPUT, EXIT_USER_CODE

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
    """Whether this process should supervise a child (not a child itself, not turned off, on
    Linux)."""
    environ = os.environ if environ is None else environ
    return (
        run_record.RECORD_ENV not in environ
        and environ.get(SUPERVISE_ENV, "1") != "0"
        and sys.platform.startswith("linux")
    )


def known_secrets(args: object, environ: Mapping[str, str] | None = None) -> set[str]:
    """The secret values of the run (intake/secret_channels.py: every configuration channel of the
    parsed arguments, and the environment's secrets; `environ` None: os.environ)."""
    from generic_trainer.intake.secret_channels import run_secrets

    return run_secrets(dict(vars(args)), os.environ if environ is None else environ)


def executor_output_path(final: str) -> str:
    """Where the verb writes KFP's executor output: `final`, or when supervised a staged sibling of
    it (the write is tried where KFP reads it, before anything is published) that the parent renames
    to `final`
    only once the run has succeeded, and removes otherwise: a failed run never leaves one."""
    if not run_record.active():
        return final
    staged = f"{final}.staged-{uuid.uuid4().hex[:8]}"
    run_record.note("executor_output", staged, final=final)
    return staged


def print_summary(summary: dict) -> None:
    """Print the run's summary (JSON) on stdout; when supervised, the parent prints it once the run
    ended.
    A stdout user code closed loses only the summary, not the run."""
    if run_record.active():
        run_record.note("summary", summary)
        return
    try:
        print(json.dumps(summary, indent=2), flush=True)
    except OSError as e:
        log.warning("could not print the run's summary to stdout: %s", e)


def _die_with_parent() -> None:  # runs in the child between fork and exec
    leftovers.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def mask_logs(secrets: set[str]) -> None:
    """Mask `secrets` in what this process logs through its root handlers."""
    if secrets:
        for handler in logging.getLogger().handlers:
            handler.addFilter(MaskingFilter(secrets))


def _release_held(record: run_record.RunRecord) -> None:
    """Remove the staging dirs and the lock files of the outputs a dead child held (the locks name
    this
    process as their owner, so no other run can have taken them meanwhile)."""
    from generic_trainer.artifacts import storage

    for directory, held in record.held.items():
        try:
            with open(held["lock"], encoding="utf-8") as f:
                owner = json.load(f)
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if not isinstance(owner, dict) or owner.get("run_id") != held.get("run_id"):
            continue  # not the run's lock any more
        for path in storage.remove_stale_staging(directory):
            log.info("removed %s, left by the run", path)
        try:
            os.remove(held["lock"])
        except OSError:
            continue
        log.info("released the lock on %s", directory)


def _finish(verb: str, child: subprocess.Popen, record: run_record.RunRecord, run: RunWatch) -> int:
    """The exit code of the whole run, decided here: the child's own once it finished its contract
    (a success only when its main output is there, `main_output.problem`), 128+N when a signal sent
    to
    the supervisor stopped it first, else exit 3."""
    if record.end is not None:
        code = record.end["value"]
        _warn_late_ending(child, code, record)
        if code != 0:
            return _discard_executor_output(record, code)
        problem = main_output.problem(verb, run.main_output)
        if problem is None:
            return _succeeded(record)
        _release_held(record)
        log.error(
            "%s failed: the run reported success, but %s: no model or result was published; user "
            "code must return or raise, not end the process, so the run ends with exit code 3",
            verb,
            problem,
        )
        return _discard_executor_output(record, EXIT_USER_CODE)
    _release_held(record)
    if run.forwarded:
        sig = -child.returncode if -child.returncode in run.forwarded else run.forwarded[-1]
        name = signal.Signals(sig).name
        log.error(
            "%s stopped from outside by %s: the run %s, before it could save anything; exit %d",
            verb,
            name,
            record.ending(child.returncode),
            128 + sig,
        )
        return _discard_executor_output(record, 128 + sig)
    log.error(
        "%s failed: the run %s, before it finished: no outputs were published; user code must "
        "return or "
        "raise, not end the process, so the run ends with exit code 3 (user code)",
        verb,
        record.ending(child.returncode),
    )
    return _discard_executor_output(record, EXIT_USER_CODE)


def _warn_late_ending(child: subprocess.Popen, code: int, record: run_record.RunRecord) -> None:
    if child.returncode != code:
        log.warning(
            "after the run ended (exit code %d), the process ended with %s; the run's code stands",
            code,
            f"signal {-child.returncode}" if child.returncode < 0 else f"status {child.returncode}",
        )
    for what in record.end.get("closed") or []:
        log.warning(
            "user code closed the process's %s: what was written to it after that was lost", what
        )


def _discard_executor_output(record: run_record.RunRecord, code: int) -> int:
    if record.executor_output:
        with contextlib.suppress(OSError):
            os.remove(record.executor_output)
    return code


def _succeeded(record: run_record.RunRecord) -> int:
    """Print the run's summary and rename its staged executor output to where KFP reads it."""
    if record.summary is not None:
        print_summary(record.summary)
    if not record.executor_output or not os.path.isfile(record.executor_output):
        return 0
    try:
        os.replace(record.executor_output, record.executor_output_file)
    except OSError as e:
        log.error(
            "could not write the executor output %s: %s",
            record.executor_output_file,
            e.strerror or e,
        )
        return _discard_executor_output(record, EXIT_BAD_OUTPUT)
    return 0


@dataclasses.dataclass
class RunWatch:
    """What the parent knows of the run besides its record: the main output it must find on success
    (None: not checked) and the signals sent to the supervisor, in order."""

    main_output: str | None = None
    forwarded: list[int] = dataclasses.field(default_factory=list)


def _wait(child: subprocess.Popen, record_path: str, grace_s: float) -> None:
    """Wait for the child; once it has reported its end, give it `grace_s` (atexit handlers,
    teardown)
    before its process group is killed."""
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
    """Run `python -m generic_trainer ARGV` (or `command`) as a supervised child; returns the run's
    exit
    code. `expected_output`: the main output a successful run must leave (`main_output.problem`)."""
    record_dir = tempfile.mkdtemp(prefix="generic-trainer-run-")
    record_path = os.path.join(record_dir, "record.jsonl")
    become_subreaper()
    watch = RunWatch(main_output=expected_output)
    child = subprocess.Popen(
        command or [sys.executable, "-m", "generic_trainer", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=_die_with_parent,
        env={**os.environ, run_record.RECORD_ENV: record_path},
    )

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
        return _finish(verb, child, run_record.RunRecord.read(record_path), watch)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        shutil.rmtree(record_dir, ignore_errors=True)


def _start_relays(child: subprocess.Popen, mask: Masker) -> list[threading.Thread]:
    relays = [
        threading.Thread(
            target=relay, args=(pipe.fileno(), sink, mask), daemon=True, name=f"relay-{name}"
        )
        for pipe, sink, name in (
            (child.stdout, sys.stdout.buffer, "stdout"),
            (child.stderr, sys.stderr.buffer, "stderr"),
        )
    ]
    for thread in relays:
        thread.start()
    return relays
