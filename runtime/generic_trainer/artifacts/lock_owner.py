"""Who holds an output lock: the owner record a run writes into its lock file, read back whatever it
holds.

A lock file may hold anything (a crash mid-write, another tool's file, a hostile one): nothing in it
is trusted. `valid_pid` accepts only a pid a run could have recorded; `describe_owner` never fails.

A pid alone does not say who holds a lock: pids are reused, and a restarted container's supervisor
is pid 1 again. So the owner record carries the process's start time (`process_started`: from
/proc, seconds since the epoch) and the machine's boot id, and `owner_alive` judges a lock of this
host by all three: the pid must be alive, on the same boot, and the process with that pid must be
the one that took the lock (it started when the record says, or before the lock was taken).
"""

from __future__ import annotations

import os
import time

MAX_PID = 4194304  # Linux's largest pid_max


def short(value: object) -> str:
    """`repr(value)` cut to 80 characters (a lock file's values go into log lines)."""
    return repr(value)[:80]


def valid_pid(value: object) -> int | None:
    """`value` when it is a process id a run could have recorded (a whole number 1..MAX_PID), else
    None."""
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_PID:
        return value
    return None


def describe_owner(owner: dict) -> str:
    """'pid 123 on host h (started 2026-01-01T00:00:00Z)' from a lock file's owner record (any
    content)."""
    if not owner:
        return "a run that has not yet recorded its pid and host"
    if valid_pid(owner.get("pid")) is None:
        return (
            "a lock file not written by a generic-trainer run (its pid is "
            f"{short(owner.get('pid'))})"
        )
    started = owner.get("started")
    ok = isinstance(started, (int, float)) and not isinstance(started, bool) and 0 <= started < 1e11
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)) if ok else "at an unknown time"
    host = owner.get("host")
    host = host if isinstance(host, str) and host.isprintable() and len(host) <= 80 else short(host)
    return f"pid {owner['pid']} on host {host} (started {when})"


def taken_over(owner: dict) -> str:
    """What a run says when it takes over the lock `owner` recorded: a stale one, or a foreign
    file."""
    if owner and valid_pid(owner.get("pid")) is None:
        return f"a foreign lock file, no live run's ({describe_owner(owner)})"
    return f"the stale lock of a run that is gone ({describe_owner(owner)})"


BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"
START_SLACK_S = 2.0  # /proc's boot time is in whole seconds; start times agree within this


def boot_id() -> str | None:
    """This machine's boot id (Linux), or None where there is none."""
    try:
        with open(BOOT_ID_FILE, encoding="ascii") as f:
            return f.read(64).strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def process_started(pid: int) -> float | None:
    """When process `pid` started (seconds since the epoch, from /proc), or None when unknown."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as f:
            fields = f.read(4096).rpartition(b")")[2].split()
        with open("/proc/stat", "rb") as f:
            btime = next(int(line.split()[1]) for line in f if line.startswith(b"btime "))
        return btime + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def identity(pid: int) -> dict:
    """What an owner record says about process `pid` besides the pid: its start time and the
    boot."""
    return {"pid_started": process_started(pid), "boot_id": boot_id()}


def _number(value: object) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if ok and 0 <= value < 1e11 else None


def owner_alive(owner: dict) -> bool:
    """Whether the run that wrote `owner` (a record of this host) still runs: its pid is alive, on
    the boot the record names, and that pid's process is the one that took the lock (a pid reused
    by a later process, such as a restarted container's pid 1, is not)."""
    pid = valid_pid(owner.get("pid"))
    if pid is None or not pid_alive(pid):
        return False
    recorded_boot = owner.get("boot_id")
    if isinstance(recorded_boot, str) and boot_id() not in (None, recorded_boot):
        return False
    started = process_started(pid)
    if started is None:
        return True  # no /proc: the pid is all there is to go by
    pid_started = _number(owner.get("pid_started"))
    if pid_started is not None:
        return abs(started - pid_started) <= START_SLACK_S
    locked = _number(owner.get("started"))
    return locked is None or started <= locked + START_SLACK_S


def pid_alive(pid: int) -> bool:
    """Whether process `pid` exists on this host (one of another user counts)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError, ValueError):
        return False
    except PermissionError:
        return True
    return True
