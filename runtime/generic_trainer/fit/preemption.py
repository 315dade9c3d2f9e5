"""SIGTERM, the preemption notice of Vertex AI and Kubernetes, turned into a checkpoint and exit
143.

`WATCHER.install()` puts a SIGTERM handler in place (Python runs it in the main thread, between
bytecodes). While a checkpointing callback is inside `fit` (`WATCHER.deferred()`), the handler only
records the request: the callback then saves a checkpoint after the current step, on every worker
at the same step, and raises `Preempted`. Anywhere else (reading data, exporting) the handler raises
`Preempted` at once, as does a second SIGTERM. The CLI turns `Preempted` into exit code 143
(128 + SIGTERM), which Vertex and Kubernetes treat as "restart me"; the restarted run resumes.

TensorFlow's coordination service installs its own SIGTERM handler when a multi-worker strategy
starts, so install (again) after the strategy exists.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator

from generic_trainer.errors import Preempted

log = logging.getLogger(__name__)


class Watcher:
    """Records SIGTERM; raises `Preempted` unless a checkpointing callback will act on it."""

    def __init__(self) -> None:
        self.requested = False
        self.where = ""  # a phrase for the message: where a restart resumes from
        self._defer = 0
        self._previous = None
        self._installed = False

    def install(self, where: str = "") -> None:
        """Handle SIGTERM from now on (main thread only; elsewhere a no-op)."""
        if threading.current_thread() is not threading.main_thread():
            return
        if where:
            self.where = where
        previous = signal.signal(signal.SIGTERM, self._handle)
        if not self._installed:
            self._previous = previous
            self._installed = True

    def uninstall(self) -> None:
        """Put the handler that was there before `install` back, and forget any request."""
        if self._installed and threading.current_thread() is threading.main_thread():
            signal.signal(
                signal.SIGTERM, self._previous if self._previous is not None else signal.SIG_DFL
            )
        self._installed = False
        self._previous = None
        self.requested = False
        self._defer = 0

    def _handle(self, signum, frame) -> None:
        if self.requested or not self._defer:
            self.requested = True
            raise self.error("SIGTERM received outside training steps; nothing more was saved")
        self.requested = True
        log.warning(
            "SIGTERM received: saving a checkpoint after the current step, then exiting (code 143)"
        )

    def error(self, what: str) -> Preempted:
        """The `Preempted` error for this run, saying where a restart resumes from."""
        where = f"; a restart resumes from {self.where}" if self.where else ""
        return Preempted(f"preempted: {what}{where}")

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """Within the block SIGTERM only sets `requested`: the caller saves and raises."""
        self._defer += 1
        try:
            yield
        finally:
            self._defer = max(0, self._defer - 1)

    def enter(self) -> None:
        """Start deferring (for callbacks, whose begin and end are separate calls)."""
        self._defer += 1

    def leave(self) -> None:
        self._defer = max(0, self._defer - 1)

    def reset_deferral(self) -> None:
        """Stop deferring whatever is still open (a fit that raised never reached its train end)."""
        self._defer = 0

    def raise_if_requested(self, what: str = "SIGTERM received") -> None:
        if self.requested:
            raise self.error(what)


WATCHER = Watcher()
