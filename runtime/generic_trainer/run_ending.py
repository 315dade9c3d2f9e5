"""How a supervised run's ending becomes its exit code (the parent decides, supervisor.py watches).

A child that wrote its record's `end` entry keeps its exit code, but exit 0 only when the main
output is there (artifacts/main_output.py); then its summary is printed and its staged KFP executor
output renamed to where KFP reads it. A run a forwarded signal stopped first is 128+N; any other
ending is exit 3 naming what happened. A failed run leaves no executor output, and the output locks
the child held are released with their staging dirs removed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import signal
import subprocess

from generic_trainer.artifacts import main_output, run_record
from generic_trainer.errors import EXIT_BAD_OUTPUT, EXIT_USER_CODE
from generic_trainer.supervised import print_summary

log = logging.getLogger("generic_trainer")


@dataclasses.dataclass
class RunWatch:
    """What the parent knows of the run besides its record: the main output it must find on success
    (None: not checked) and the signals sent to the supervisor, in order."""

    main_output: str | None = None
    forwarded: list[int] = dataclasses.field(default_factory=list)


def _release_held(record: run_record.RunRecord) -> None:
    """Remove the staging dirs and the lock files of the outputs a dead child held.

    The locks name this process as their owner, so no other run can have taken them meanwhile.
    """
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


def exit_code(
    verb: str, child: subprocess.Popen, record: run_record.RunRecord, run: RunWatch
) -> int:
    """The exit code of the whole run.

    The child's own once it finished its contract (a success only when its main output is there,
    `main_output.problem`), 128+N when a signal sent to the supervisor stopped it first, else 3.

    Args:
      verb: the verb's name, for the messages.
      child: the ended child process.
      record: the child's run record, read after it ended.
      run: the main output to find and the signals forwarded.

    Returns:
      The exit code.
    """
    if record.end is not None:
        return _reported_end(verb, child, record, run)
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
        "return or raise, not end the process, so the run ends with exit code 3 (user code)",
        verb,
        record.ending(child.returncode),
    )
    return _discard_executor_output(record, EXIT_USER_CODE)


def _reported_end(
    verb: str, child: subprocess.Popen, record: run_record.RunRecord, run: RunWatch
) -> int:
    """The exit code of a run that reported its end: its own, but 3 when its main output is
    missing."""
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


def _warn_late_ending(child: subprocess.Popen, code: int, record: run_record.RunRecord) -> None:
    """Warn when the process ended otherwise than the run said, or user code closed a stream."""
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
    """Remove the staged executor output of a failed run; returns `code`."""
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
