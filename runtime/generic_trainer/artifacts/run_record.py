"""The run record: what a supervised run holds and how it ended, for the supervising parent process.

The console script runs each verb in a child process (`generic_trainer.supervisor`). The child
appends one JSON object per line to the record file the parent names in `RECORD_ENV`: the outputs it
locks (`held` / `released`: their staging siblings go with them), its summary and staged executor
output, and, only once the runtime has finished its contract, its exit code (`end`). Which user code
is running is kept in `<record>.calls` (`enter` / `leave`). A run that ends without `end` (user code
called `os._exit`, a signal or a crash ended it) is exit 3, and the parent cleans what the record
says it held. A leaf module (standard library only): every floor may note into it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
from typing import Any

RECORD_ENV = "GENERIC_TRAINER_RUN_RECORD"
_state: dict[str, Any] = {"path": None, "parent": None, "calling": [], "last": None}


def claim(environ: dict[str, str] | None = None) -> str | None:
    """In the child: take the record path from the environment (removed, so processes the run starts
    do
    not write into it); returns it, or None when this process is not supervised."""
    environ = os.environ if environ is None else environ
    path = environ.pop(RECORD_ENV, None) or None
    _state["path"], _state["parent"] = path, os.getppid()
    return path


def supervisor_pid() -> int:
    """The supervising parent's pid (recorded as the owner of the output locks the run takes)."""
    return _state["parent"]


def active() -> bool:
    """Whether this process writes a run record (it runs under the supervisor)."""
    return _state["path"] is not None


def note(kind: str, value: Any = None, **extra: Any) -> None:
    """Append one entry (a no-op when unsupervised). Never raises: the record must not fail a
    run."""
    path = _state["path"]
    if path is None:
        return
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"kind": kind, "value": value, **extra}, default=str) + "\n")
    except (OSError, ValueError, TypeError):
        pass


def enter(what: str) -> None:
    """User code `what` starts running (the call stack is rewritten in `<record>.calls`, never
    appended:
    a Task method called per batch must not grow the record)."""
    _state["calling"].append(what)
    _state["last"] = what
    _write_calls()


def leave(what: str) -> None:
    """User code `what` returned or raised."""
    calling = _state["calling"]
    if what in calling:
        del calling[len(calling) - 1 - calling[::-1].index(what)]
    _write_calls()


def _write_calls() -> None:
    path = _state["path"]
    if path is None:
        return
    try:
        with open(path + ".calls", "w", encoding="utf-8") as f:
            f.write(json.dumps({"calling": _state["calling"], "last": _state["last"]}))
    except (OSError, ValueError, TypeError):
        pass


def ended_notes() -> dict[str, Any]:
    """What the `end` entry carries: the standard streams user code closed (their lines were
    lost)."""
    closed = []
    for fd, name in ((1, "stdout (fd 1)"), (2, "stderr (fd 2)")):
        try:
            os.fstat(fd)
        except OSError:
            closed.append(name)
    return {"closed": closed}


@dataclasses.dataclass
class RunRecord:
    """What the parent reads back: `end` is None when the runtime did not finish its contract."""

    end: dict[str, Any] | None = None
    held: dict[str, dict[str, Any]] = dataclasses.field(
        default_factory=dict
    )  # directory -> lock path, run_id
    calling: list[str] = dataclasses.field(
        default_factory=list
    )  # user code running when it stopped, innermost last
    last_called: str | None = None
    summary: Any = None
    executor_output: str | None = None  # staged by the child
    executor_output_file: str | None = None  # where KFP reads it

    @classmethod
    def read(cls, path: str) -> RunRecord:
        """Parse the record file (a missing file or a torn last line are an unfinished run)."""
        record = cls()
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            lines = []
        try:
            with open(path + ".calls", encoding="utf-8") as f:
                calls = json.load(f)
            record.calling, record.last_called = list(calls["calling"]), calls["last"]
        except (OSError, ValueError, KeyError, TypeError):
            pass  # none ran, or the process died while rewriting it
        for line in lines:
            try:
                entry = json.loads(line)
                kind, value = entry["kind"], entry.get("value")
            except (ValueError, KeyError, TypeError):
                continue
            record._add(kind, value, entry)
        return record

    def _add(self, kind: str, value: Any, entry: dict[str, Any]) -> None:
        if kind == "held":
            self.held[value] = entry
        elif kind == "released":
            self.held.pop(value, None)
        elif kind == "summary":
            self.summary = value
        elif kind == "executor_output":
            self.executor_output, self.executor_output_file = value, entry.get("final")
        elif kind == "end" and isinstance(value, int):
            self.end = entry

    def ending(self, returncode: int) -> str:
        """How the process ended, for the log: 'was killed by SIGSEGV (...) while run_fn ran' and
        the like."""
        if returncode < 0:
            sig = signal.Signals(-returncode)
            what = {
                signal.SIGKILL: " (the out-of-memory killer, or a kill from outside?)",
                signal.SIGSEGV: " (a crash in native code)",
                signal.SIGABRT: " (an abort in native code)",
            }
            how = f"was killed by {sig.name}{what.get(sig, '')}"
        else:
            how = (
                f"ended with exit status {returncode} (os._exit() or a library ending the process)"
            )
        if self.calling:
            return f"{how} while {self.calling[-1]} ran"
        if self.last_called:
            return f"{how} after {self.last_called} returned"
        return f"{how} before user code ran"
