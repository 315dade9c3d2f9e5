"""What the runtime adds to a user's `model.compile` / `model.fit` calls without the module's help.

TFX modules return nothing from `run_fn`, yet the runtime owes KFP final metrics and a person
reading the log progress with rate and ETA; and speed options (`--jit-compile`,
`--steps-per-execution`, `--mixed-precision`) must reach models the runtime never sees. While
`run_fn` runs, `recording_fit()` wraps `Model.fit` of Keras 3 (and tf_keras when loaded) to add a
progress logger and keep the history, and `Model.compile` to apply compile defaults the module
did not set itself. The wrappers are removed when the block ends (`compat.model_methods` replaces
the methods; the wrappers' work is here).

`keras.callbacks.TensorBoard` overrides the batch hooks even with `update_freq='epoch'`, where
they write nothing but the train graph at the first batch: at every step they still call
`tf.summary.scalar` once per metric (no-ops without a default writer, but not free), and on a
thread-safe Keras backend an overridden batch-end hook also makes the loop synchronous. So the
per-epoch TensorBoard callback TFX modules add cost about a third of a small model's speed.
Inside the wrapped fit, such a callback has Keras' default (empty) batch hooks and writes the
graph at the first epoch end instead (`idle_batch_hooks`, through `compat.tensorboard_hooks`): the
same event files, no per-step cost.

On a one-GPU run under the default strategy the wrapped fit also ends the datasets it gets with
`prefetch_to_device` (`device_prefetch.py`); the speed options' compile defaults and
mixed-precision policy are `speed.py`'s.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from generic_trainer import compat
from generic_trainer.fit.device_prefetch import DevicePrefetch, is_dataset
from generic_trainer.fit.progress import fmt_eta
from generic_trainer.fit.speed import SpeedOptions, compile_wrapper, set_policy

__all__ = ["DevicePrefetch", "FitRecord", "SpeedOptions", "idle_batch_hooks", "recording_fit"]

log = logging.getLogger("generic_trainer.progress")


def process_uptime() -> float:
    """Seconds since this process started (Linux /proc; falls back to 0)."""
    try:
        import os

        with open("/proc/self/stat", encoding="ascii") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="ascii") as f:
            uptime = float(f.read().split()[0])
        return uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def _fmt_logs(logs: dict[str, Any] | None) -> str:
    parts = []
    for k, v in (logs or {}).items():
        try:
            parts.append(f"{k}={float(v):.4g}")
        except (TypeError, ValueError):
            continue
    return " ".join(parts)


class ProgressLog:
    """Callback body: periodic 'step s/S, rate, ETA' lines and one line per epoch; no progress
    bars."""

    # Keras 3 dispatches batch-end callbacks on a thread pool, off the training loop, only when
    # every
    # callback is async-safe; a plain fit() without callbacks gets that, so ours must not take it
    # away.
    async_safe = True

    def __init__(self, interval_s: float = 30.0):
        self.interval_s = interval_s
        self.first_step_logged = False
        self._lock = threading.Lock()

    def on_train_begin(self, logs=None):
        p = getattr(self, "params", {}) or {}
        self.epochs, self.steps = p.get("epochs") or 1, p.get("steps")
        self.epoch = 0
        self.run_start = time.monotonic()
        log.info(
            "training: %s epoch(s) of %s steps",
            self.epochs,
            self.steps if self.steps else "unknown",
        )

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch
        self.epoch_start = self.last_log = time.monotonic()
        self.step = 0

    def on_train_batch_end(self, batch, logs=None):
        with self._lock:  # dispatched asynchronously: calls may overlap or finish out of order
            self.step = max(self.step, batch + 1)
            now = time.monotonic()
            if not self.first_step_logged:
                self.first_step_logged = True
                log.info("first training step done (%.1f s after process start)", process_uptime())
            if now - self.last_log < self.interval_s:
                return
            self.last_log = now
        rate = self.step / max(now - self.epoch_start, 1e-9)
        left = ((self.steps or 0) - self.step) + (self.epochs - self.epoch - 1) * (self.steps or 0)
        eta = left / rate if self.steps else float("nan")
        of = f"/{self.steps}" if self.steps else ""
        log.info(
            "epoch %d/%d step %d%s  %.1f steps/s  ETA %s  %s",
            self.epoch + 1,
            self.epochs,
            self.step,
            of,
            rate,
            fmt_eta(eta),
            _fmt_logs(logs),
        )

    def on_epoch_end(self, epoch, logs=None):
        took = time.monotonic() - self.epoch_start
        log.info(
            "epoch %d/%d done in %.1f s (%.1f steps/s): %s",
            epoch + 1,
            self.epochs,
            took,
            self.step / max(took, 1e-9),
            _fmt_logs(logs),
        )


@dataclasses.dataclass
class FitRecord:
    """Histories of every fit() run inside the block, in call order."""

    histories: list[dict[str, list[float]]] = dataclasses.field(default_factory=list)
    epochs_run: int = 0
    steps_per_epoch: int | None = None

    def final_metrics(self) -> dict[str, float]:
        """The last logged values: eval metrics under their names, train metrics as
        `train_<name>`."""
        if not self.histories:
            return {}
        metrics: dict[str, float] = {}
        for key, values in self.histories[-1].items():
            if not values:
                continue
            try:
                value = float(values[-1])
            except (TypeError, ValueError):
                continue
            metrics[key[4:] if key.startswith("val_") else f"train_{key}"] = value
        return metrics

    @property
    def train_steps(self) -> int | None:
        return self.epochs_run * self.steps_per_epoch if self.steps_per_epoch else None


def _callback_for(model_cls: Any, interval_s: float) -> Any:
    base = sys.modules[model_cls.__module__.split(".")[0]].callbacks.Callback
    cls = type("GenericTrainerProgress", (ProgressLog, base), {})
    cb = cls.__new__(cls)
    base.__init__(cb)
    ProgressLog.__init__(cb, interval_s)
    return cb


_idle_logged = False


@contextlib.contextmanager
def idle_batch_hooks(callbacks: Sequence[Any]) -> Iterator[list[Any]]:
    """Within the block, TensorBoard callbacks whose batch hooks do nothing at their settings have
    Keras' default batch hooks (no per-step work; Keras sees no batch hook overridden) and write the
    train graph at the first epoch end (or train end) instead of the first batch end
    (`compat.tensorboard_hooks`). Yields the callbacks changed; the block's end restores them."""
    from generic_trainer.compat import tensorboard_hooks

    idle = tensorboard_hooks.IdleBatchHooks(callbacks)
    with compat.patched(idle if idle.changed else None) as applied:
        changed = idle.changed if applied else []
        if changed:
            global _idle_logged
            if not _idle_logged:
                _idle_logged = True
                log.info(
                    "TensorBoard callback with update_freq='epoch': its batch hooks do nothing at "
                    "these settings, so they are skipped and cost no time per step (the train "
                    "graph is written at the first epoch end)"
                )
        yield changed


def _end_fit(callbacks: list) -> None:
    """Undo what a backup callback patched for this fit (`checkpointing.BackupCallback.end_fit`)."""
    from generic_trainer.fit.checkpointing import BackupCallback

    for callback in callbacks:
        if isinstance(callback, BackupCallback):
            callback.end_fit()


def _fit_wrapper(
    record: FitRecord, interval_s: float, prefetch: DevicePrefetch | None = None
) -> Any:
    def make(original: Any, model_cls: type) -> Any:
        def fit(self, *args, **kwargs):
            kwargs.setdefault("verbose", 0)
            args, kwargs = (prefetch or DevicePrefetch(None)).apply(args, kwargs)
            if "shuffle" not in kwargs and is_dataset(args[0] if args else kwargs.get("x")):
                kwargs["shuffle"] = (
                    False  # Keras ignores it for a tf.data.Dataset but warns on every fit otherwise
                )
            kwargs["callbacks"] = list(kwargs.get("callbacks") or []) + [
                _callback_for(model_cls, interval_s)
            ]
            try:
                with idle_batch_hooks(kwargs["callbacks"]):
                    history = original(self, *args, **kwargs)
            finally:  # a fit that raised: the backup's resume patches are undone all the same
                _end_fit(kwargs["callbacks"])
            if history is not None and getattr(history, "history", None) is not None:
                record.histories.append({k: list(v) for k, v in history.history.items()})
                record.epochs_run += len(next(iter(history.history.values()), []))
                record.steps_per_epoch = (getattr(history, "params", None) or {}).get("steps")
            return history

        fit.__wrapped__ = original
        return fit

    return make


@contextlib.contextmanager
def recording_fit(
    keras_mode: str = "keras3",
    interval_s: float = 30.0,
    speed: SpeedOptions | None = None,
    prefetch_device: str | None = None,
) -> Iterator[FitRecord]:
    """Within the block, every Model.fit logs progress and leaves its history in the yielded record
    (its datasets prefetched to `prefetch_device` when given: `DevicePrefetch`), and every
    Model.compile gets `speed`'s defaults for arguments the caller did not pass
    (`compat.model_methods`)."""
    from generic_trainer.compat import model_methods

    record = FitRecord()
    compile_defaults = (speed or SpeedOptions()).compile_defaults()
    wrappers = {"fit": _fit_wrapper(record, interval_s, DevicePrefetch(prefetch_device))}
    if compile_defaults:
        wrappers["compile"] = compile_wrapper(compile_defaults)
    restore_policy = set_policy(keras_mode, (speed or SpeedOptions()).mixed_precision)
    try:
        with compat.patched(model_methods.ModelMethods(keras_mode, wrappers)):
            yield record
    finally:
        restore_policy()
