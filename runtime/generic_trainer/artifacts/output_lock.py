"""Output locks: one run at a time on an output directory (`OutputLock`, a file beside it).

Who holds a lock, and whether it still runs, is lock_owner.py's; storage.py re-exports these names.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid

from generic_trainer.artifacts import files
from generic_trainer.artifacts.files import UnreadableFile, read_bounded
from generic_trainer.artifacts.lock_owner import (
    describe_owner,
    identity,
    owner_alive,
    taken_over,
    valid_pid,
)


class LockHeld(Exception):
    """Another live run holds the lock; `owner` is what it recorded (pid, host, started, ...)."""

    def __init__(self, lock_path: str, owner: dict, age_s: float):
        self.lock_path, self.owner, self.age_s = lock_path, owner, age_s
        super().__init__(f"{lock_path} is held by {describe_owner(owner)}")


class LockForeign(Exception):
    """The lock's path holds something no run writes (a directory, a symlink, a FIFO, a device): it
    is neither taken over nor removed (it is not the runtime's); `kind` says what it is."""

    def __init__(self, lock_path: str, kind: str):
        self.lock_path, self.kind = lock_path, kind
        super().__init__(
            f"{lock_path} is {kind}, not a lock file a run wrote; it was left alone: remove it "
            "(or move it away) if nothing of yours needs it"
        )


class OutputLock:
    """An exclusive lock on an output directory, held for a whole run: `<parent>/.<name>.lock`.

    The lock is a file created with O_CREAT|O_EXCL holding its owner (pid, host, start time, run
    id); the owner refreshes its modification time every `heartbeat_s` seconds. A lock is stale,
    and is taken over, when its owner ran on this host and that pid is gone (SIGKILL, OOM), or when
    its heartbeat is older than `stale_after_s` (an owner on another machine that died), or when it
    records no pid a run could have written (a foreign or garbled file: `lock_owner.valid_pid`).
    A run of this host is judged by its pid, its process start time and the boot
    (`lock_owner.owner_alive`), never by the pid alone. A lock path that is not a regular file (a
    directory, a symlink, a FIFO) is no run's: LockForeign, and it is left alone.
    Works on local disks and NFS v3+. Cloud Storage FUSE (`/gcs`) has no flock and no hard
    links; its O_EXCL is a lookup before the create, not a GCS precondition, so two replicas
    on different machines starting within the same moment could both win there.
    """

    def __init__(self, directory: str, stale_after_s: float = 120.0, heartbeat_s: float = 30.0):
        parent, base = os.path.split(os.path.normpath(os.path.abspath(directory)))
        self.directory = directory
        self.path = os.path.join(parent, f".{base}.lock")
        self.stale_after_s = stale_after_s
        self.heartbeat_s = heartbeat_s
        self.owner = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.time(),
            "run_id": uuid.uuid4().hex,
        }
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._created: list[str] = []

    def acquire(self) -> list[str]:
        """Take the lock or raise LockHeld; returns the stale or foreign lock files taken over
        (descriptions)."""
        taken = []
        parent = os.path.dirname(self.path)
        # the directories made to hold the lock file, deepest first: removed again if left empty
        self._created = []
        while parent and not os.path.isdir(parent):
            self._created.append(parent)
            parent = os.path.dirname(parent)
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        self.owner.update(identity(self.owner["pid"]))
        for _ in range(5):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                owner, age = self._read()
                if owner is None:  # removed meanwhile
                    continue
                if not self._is_stale(owner, age):
                    raise LockHeld(self.path, owner, age) from None
                taken.append(taken_over(owner))
                self._remove_if_same(owner)
                continue
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(json.dumps(self.owner) + "\n")
            self._thread = threading.Thread(
                target=self._heartbeat, name="output-lock-heartbeat", daemon=True
            )
            self._thread.start()
            return taken
        owner, age = self._read()
        raise LockHeld(self.path, owner or {}, age)

    def release(self) -> None:
        """Stop the heartbeat and remove the lock file (if it is still this run's)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
            try:
                self._remove_if_same(self.owner)
            except LockForeign:
                pass  # replaced meanwhile by something no run writes: not ours to remove
        for directory in self._created:  # a run that wrote nothing leaves no empty dirs behind
            try:
                os.rmdir(directory)
            except OSError:
                break

    def __enter__(self) -> OutputLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def _read(self) -> tuple[dict | None, float]:
        """(owner record, seconds since its heartbeat) of the lock file; (None, 0) when there is
        none.
        LockForeign when its path holds something that is not a regular file."""
        if os.path.islink(self.path) or files.classify(self.path) not in (
            files.REGULAR,
            files.MISSING,
        ):
            raise LockForeign(self.path, files.describe(self.path))
        try:
            age = time.time() - os.lstat(self.path).st_mtime
            text = read_bounded(self.path, 64 * 1024)
        except FileNotFoundError:
            return None, 0.0
        except (OSError, UnreadableFile):
            return {
                "pid": "unreadable"
            }, age  # not a lock file any run wrote: foreign, judged as stale
        try:
            owner = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            owner = {}  # being written right now, or cut short by a crash: judged by its age
        return (owner if isinstance(owner, dict) else {}), age

    def _is_stale(self, owner: dict, age: float) -> bool:
        """Stale: old, or its pid on this host is gone, or it records no pid a run could have (a
        foreign file)."""
        if age > self.stale_after_s:
            return True
        if owner and valid_pid(owner.get("pid")) is None:
            return True  # not written by a run (garbage, another tool's): no live run holds it
        if owner.get("host") == socket.gethostname() and valid_pid(owner.get("pid")):
            return not owner_alive(owner)
        return False

    def _remove_if_same(self, owner: dict) -> None:
        """Remove the lock file if it still holds `owner` (not a lock another run just took)."""
        current, _ = self._read()
        if current is not None and current.get("run_id") == owner.get("run_id"):
            try:
                os.remove(self.path)
            except FileNotFoundError:
                pass

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            try:
                os.utime(self.path)
            except OSError:
                pass
