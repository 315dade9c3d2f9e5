"""The processes a supervised run left running: found from /proc, named in the log, and ended.

The supervisor is a child subreaper (`become_subreaper`), so processes orphaned below the run come
back to it; `end_left_running` names each (pid and command line) and ends it: SIGTERM to its
process group, SIGKILL after a grace period. Standard library only; Linux.
"""

from __future__ import annotations

import logging
import os
import signal
import time

log = logging.getLogger("generic_trainer")
GRACE_S = 3.0  # between SIGTERM and SIGKILL for processes left running
_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    """Have processes orphaned below this one reparented to it (not to init), so `left_running`
    finds
    them."""
    prctl(_PR_SET_CHILD_SUBREAPER, 1)


def prctl(option: int, value: int) -> None:
    """prctl(2) `option` with `value`; nothing where it is not available."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass


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
    """{pid: pgid} of the live processes descended from this one (orphans come back to it as a
    subreaper)
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
