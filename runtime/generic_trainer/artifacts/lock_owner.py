"""Who holds an output lock: the owner record a run writes into its lock file, read back whatever it holds.

A lock file may hold anything (a crash mid-write, another tool's file, a hostile one): nothing in it is
trusted. `valid_pid` accepts only a pid a run could have recorded; `describe_owner` never fails.
"""

from __future__ import annotations

import os
import time

MAX_PID = 4194304  # Linux's largest pid_max


def short(value: object) -> str:
    """`repr(value)` cut to 80 characters (a lock file's values go into log lines)."""
    return repr(value)[:80]


def valid_pid(value: object) -> int | None:
    """`value` when it is a process id a run could have recorded (a whole number 1..MAX_PID), else None."""
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_PID:
        return value
    return None


def describe_owner(owner: dict) -> str:
    """'pid 123 on host h (started 2026-01-01T00:00:00Z)' from a lock file's owner record (any content)."""
    if not owner:
        return "a run that has not yet recorded its pid and host"
    if valid_pid(owner.get("pid")) is None:
        return f"a lock file not written by a generic-trainer run (its pid is {short(owner.get('pid'))})"
    started = owner.get("started")
    ok = isinstance(started, (int, float)) and not isinstance(started, bool) and 0 <= started < 1e11
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)) if ok else "at an unknown time"
    host = owner.get("host")
    host = host if isinstance(host, str) and host.isprintable() and len(host) <= 80 else short(host)
    return f"pid {owner['pid']} on host {host} (started {when})"


def taken_over(owner: dict) -> str:
    """What a run says when it takes over the lock `owner` recorded: a stale one, or a foreign file."""
    if owner and valid_pid(owner.get("pid")) is None:
        return f"a foreign lock file, no live run's ({describe_owner(owner)})"
    return f"the stale lock of a run that is gone ({describe_owner(owner)})"


def pid_alive(pid: int) -> bool:
    """Whether process `pid` exists on this host (one of another user counts)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError, ValueError):
        return False
    except PermissionError:
        return True
    return True
