"""The supervising parent: the console script runs each verb in a child process it watches.

User code runs in the process that runs the verb, so it can end that process in ways no `except`
sees: `os._exit(0)`, a signal, a crash in a native library; and it can leave processes running that
keep the log pipe open. The parent (light: no TensorFlow; `--help` and argument errors are answered
before it starts anything) runs `python -m generic_trainer <same arguments>` as a child in its own
session and:

- relays the child's stdout and stderr line by line, masking every known secret value (the values of
  custom_config's secret keys, redaction.secret_values) in every line, tracebacks included;
- forwards the signals it gets (SIGTERM from Kubernetes or Vertex preemption, SIGINT, ...) to the child,
  which handles them exactly as before; the child dies with the parent (PR_SET_PDEATHSIG);
- reads the run record (artifacts/run_record.py) once the child ended: only a child that wrote its
  `end` entry finished the runtime's contract; its exit code stands, its summary is printed here and
  its KFP executor output is moved to where KFP reads it (never for a failed run). Any other ending
  is exit 3 naming what happened (the exit status or the signal, and the user code that was running),
  and the output locks the child held are released and their staging dirs removed;
- names every process the run left running (pid and command line, from /proc) and ends it: SIGTERM
  to its process group, SIGKILL after a short grace. The parent is a child subreaper, so processes
  orphaned by the child are found even when they left its process group.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable
from typing import BinaryIO

from generic_trainer.artifacts import run_record
from generic_trainer.errors import EXIT_BAD_OUTPUT, EXIT_PREEMPTED, EXIT_USER_CODE

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
GRACE_S = 3.0  # between SIGTERM and SIGKILL for processes left running
_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER = 1, 36
_SIGNAL_EXITS = {signal.SIGTERM: EXIT_PREEMPTED, signal.SIGINT: 130}


def wanted(environ: dict[str, str] | None = None) -> bool:
    """Whether this process should supervise a child (not a child itself, not turned off, on Linux)."""
    environ = os.environ if environ is None else environ
    return (
        run_record.RECORD_ENV not in environ
        and environ.get(SUPERVISE_ENV, "1") != "0"
        and sys.platform.startswith("linux")
    )


def known_secrets(args: object) -> set[str]:
    """The secret values in the parsed arguments: custom_config's secret keys, also inside the executor input
    (inline JSON or a file)."""
    from generic_trainer.artifacts.redaction import secret_values

    values = dict(vars(args))
    source = values.get("executor_input")
    if isinstance(source, str) and not source.lstrip().startswith("{") and os.path.isfile(source):
        try:
            with open(source, encoding="utf-8", errors="replace") as f:
                values["executor_input"] = f.read(16 << 20)
        except OSError:
            pass
    return secret_values(values)


def executor_output_path(final: str) -> str:
    """Where the verb writes KFP's executor output: `final`, or when supervised a staged sibling of it (the
    write is tried where KFP reads it, before anything is published) that the parent renames to `final`
    only once the run has succeeded, and removes otherwise: a failed run never leaves one."""
    if not run_record.active():
        return final
    staged = f"{final}.staged-{uuid.uuid4().hex[:8]}"
    run_record.note("executor_output", staged, final=final)
    return staged


def print_summary(summary: dict) -> None:
    """Print the run's summary (JSON) on stdout; when supervised, the parent prints it once the run ended.
    A stdout user code closed loses only the summary, not the run."""
    if run_record.active():
        run_record.note("summary", summary)
        return
    try:
        print(json.dumps(summary, indent=2), flush=True)
    except OSError as e:
        log.warning("could not print the run's summary to stdout: %s", e)


def _prctl(option: int, value: int) -> None:
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _die_with_parent() -> None:  # runs in the child between fork and exec
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def become_subreaper() -> None:
    """Have processes orphaned below this one reparented to it (not to init), so `left_running` finds them."""
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)


class Masker:
    """Replaces every secret value in the bytes it is given with `***`."""

    def __init__(self, secrets: Iterable[str]):
        forms = set()
        for (
            secret
        ) in secrets:  # as written, and as JSON (once or twice escaped) or repr() would print it
            once = json.dumps(secret)[1:-1]
            forms |= {secret, once, json.dumps(once)[1:-1], repr(secret)[1:-1]}
        self.secrets = sorted(
            {f.encode("utf-8", "surrogateescape") for f in forms if f}, key=len, reverse=True
        )

    def __call__(self, data: bytes) -> bytes:
        for secret in self.secrets:
            data = data.replace(secret, b"***")
        return data


class MaskingFilter(logging.Filter):
    """A logging filter masking secret values in each record (for a verb run without the supervisor:
    in-process `cli.main(argv)`, GENERIC_TRAINER_SUPERVISE=0)."""

    def __init__(self, secrets: Iterable[str]):
        super().__init__()
        self.mask = Masker(secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        masked = self.mask(text.encode("utf-8", "surrogateescape")).decode(
            "utf-8", "surrogateescape"
        )
        if masked != text:
            record.msg, record.args = masked, ()
        return True


def mask_logs(secrets: set[str]) -> None:
    """Mask `secrets` in what this process logs through its root handlers."""
    if secrets:
        for handler in logging.getLogger().handlers:
            handler.addFilter(MaskingFilter(secrets))


def relay(source: int, sink: BinaryIO, mask: Masker, idle_s: float = 0.5) -> None:
    """Copy `source` (a pipe's fd) to `sink` until EOF, masked; whole lines at once so a secret is never
    split (a partial line waits at most `idle_s`). Writing stops if `sink` fails; reading never does."""
    pending, writable = b"", True
    poller = select.poll()
    poller.register(source, select.POLLIN | select.POLLHUP)
    while True:
        ready = poller.poll(idle_s * 1000)
        chunk = os.read(source, 65536) if ready else None
        if chunk == b"":
            out, pending = pending, b""
        elif chunk is None:
            out, pending = pending, b""  # idle: a prompt or a progress line without its newline
        else:
            pending += chunk
            cut = max(pending.rfind(b"\n"), pending.rfind(b"\r")) + 1
            cut = len(pending) if len(pending) > 1 << 20 else cut
            out, pending = pending[:cut], pending[cut:]
        if out and writable:
            try:
                sink.write(mask(out))
                sink.flush()
            except (OSError, ValueError):
                writable = False  # the reader went away (`| head`): keep draining the child
        if chunk == b"":
            return


def _proc_stat(pid: str) -> tuple[int, int, str] | None:
    """(ppid, pgid, state) of a process from /proc, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()
    return int(fields[1]), int(fields[2]), fields[0]


def _command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip() or "?"
    except OSError:
        return "?"


def left_running(group: int) -> dict[int, int]:
    """{pid: pgid} of the live processes descended from this one (orphans come back to it as a subreaper)
    or in the process group `group` (the child's), never this process or its own group."""
    stats = {
        int(p): s for p in os.listdir("/proc") if p.isdigit() and (s := _proc_stat(p)) is not None
    }
    me, own_group = os.getpid(), os.getpgrp()
    found, frontier = set(), {me}
    while frontier:
        frontier = {
            pid for pid, (ppid, _, _) in stats.items() if ppid in frontier and pid not in found
        }
        found |= frontier
    found |= {pid for pid, (_, pgid, _) in stats.items() if pgid == group}
    return {
        pid: stats[pid][1]
        for pid in sorted(found)
        if pid != me and stats[pid][2] not in ("Z", "X") and stats[pid][1] != own_group
    }


def _reap() -> None:
    """Collect the exit status of orphans that ended (they are this subreaper's children now)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _signal_all(procs: dict[int, int], sig: int) -> None:
    for pgid in set(procs.values()):
        if pgid > 1:
            try:
                os.killpg(pgid, sig)
            except OSError:
                pass
    for pid in procs:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def end_left_running(group: int, grace_s: float = GRACE_S, settle_s: float = 1.0) -> list[int]:
    """Name and end the processes the run left running (SIGTERM to their groups, SIGKILL after
    `grace_s`); returns their pids. Helpers that end by themselves once the run is gone
    (multiprocessing's resource tracker) get `settle_s` first."""
    procs = left_running(group)
    deadline = time.monotonic() + settle_s
    while procs and time.monotonic() < deadline:
        time.sleep(0.05)
        _reap()
        procs = left_running(group)
    for pid, pgid in procs.items():
        log.warning(
            "process left running by the run: pid %d (process group %d): %s; ending it",
            pid,
            pgid,
            _command_line(pid),
        )
    if not procs:
        return []
    _signal_all(procs, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not left_running(group):
            _reap()  # the ones that ended are zombies until collected
            return list(procs)
        time.sleep(0.05)
    survivors = left_running(group)
    log.warning(
        "%d process(es) still running %.0f s after SIGTERM: killing them (SIGKILL)",
        len(survivors),
        grace_s,
    )
    _signal_all(survivors, signal.SIGKILL)
    time.sleep(0.1)
    _reap()
    return list(procs)


def _describe_ending(returncode: int, record: run_record.RunRecord) -> str:
    """'was killed by SIGSEGV while run_fn ran' and the like."""
    if returncode < 0:
        sig = signal.Signals(-returncode)
        what = {
            signal.SIGKILL: " (the out-of-memory killer, or a kill from outside?)",
            signal.SIGSEGV: " (a crash in native code)",
            signal.SIGABRT: " (an abort in native code)",
        }
        how = f"was killed by {sig.name}{what.get(sig, '')}"
    else:
        how = f"ended with exit status {returncode} (os._exit() or a library ending the process)"
    if record.calling:
        return f"{how} while {record.calling[-1]} ran"
    return (
        f"{how} after {record.last_called} returned"
        if record.last_called
        else f"{how} before user code ran"
    )


def _release_held(record: run_record.RunRecord) -> None:
    """Remove the staging dirs and the lock files of the outputs a dead child held (the locks name this
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


def _finish(
    verb: str, child: subprocess.Popen, record: run_record.RunRecord, forwarded: set[int]
) -> int:
    """The exit code of the whole run: the child's own once it finished its contract, else exit 3 (or
    143 / 130 when a forwarded SIGTERM / SIGINT ended it before it could handle it)."""
    if record.end is not None:
        code = record.end["value"]
        if child.returncode != code:
            log.warning(
                "after the run ended (exit code %d), the process ended with %s; the run's code stands",
                code,
                f"signal {-child.returncode}"
                if child.returncode < 0
                else f"status {child.returncode}",
            )
        for what in record.end.get("closed") or []:
            log.warning(
                "user code closed the process's %s: what was written to it after that was lost",
                what,
            )
        return _succeeded(record) if code == 0 else _discard_executor_output(record, code)
    _release_held(record)
    sig = -child.returncode if child.returncode < 0 else 0
    if sig in forwarded and sig in _SIGNAL_EXITS:
        log.error(
            "%s stopped: %s before it could save anything",
            verb,
            _describe_ending(child.returncode, record),
        )
        return _discard_executor_output(record, _SIGNAL_EXITS[sig])
    log.error(
        "%s failed: the run %s, before it finished: no outputs were published; user code must return or "
        "raise, not end the process, so the run ends with exit code 3 (user code)",
        verb,
        _describe_ending(child.returncode, record),
    )
    return _discard_executor_output(record, EXIT_USER_CODE)


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


def run(verb: str, argv: list[str], secrets: Iterable[str]) -> int:
    """Run `python -m generic_trainer ARGV` as a supervised child; returns the run's exit code."""
    record_dir = tempfile.mkdtemp(prefix="generic-trainer-run-")
    record_path = os.path.join(record_dir, "record.jsonl")
    become_subreaper()
    forwarded: set[int] = set()
    child = subprocess.Popen(
        [sys.executable, "-m", "generic_trainer", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=_die_with_parent,
        env={**os.environ, run_record.RECORD_ENV: record_path},
    )

    def forward(signum: int, frame: object) -> None:
        forwarded.add(signum)
        try:
            os.kill(child.pid, signum)
        except OSError:
            pass

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    mask = Masker(secrets)
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
    try:
        child.wait()
        end_left_running(child.pid)
        for thread, pipe in zip(relays, (child.stdout, child.stderr), strict=True):
            thread.join(timeout=10)  # a process that escaped the subreaper could hold a pipe open
            if not thread.is_alive():
                pipe.close()
        return _finish(verb, child, run_record.RunRecord.read(record_path), forwarded)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        shutil.rmtree(record_dir, ignore_errors=True)
