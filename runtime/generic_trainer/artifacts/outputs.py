"""Checks what the user's code left behind and publishes it whole.

A run holds its output directory exclusively (`exclusive`: a lock beside it, stale staging of
dead runs removed). A serving model must exist, load, and have a `serving_default` signature
before it is moved from the run's private staging directory (a sibling of the model dir, never
inside it) to `<model-dir>/Format-Serving`. Metrics go out as a flat JSON file and as
TensorBoard scalars under the model run.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from generic_trainer.artifacts import files, run_record, storage, tree
from generic_trainer.errors import OutputError, UserInputError

log = logging.getLogger(__name__)

SERVING_DIR = "Format-Serving"
EVAL_DIR = "Format-TFMA"


def _has_saved_model(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "saved_model.pb")) or os.path.isfile(
        os.path.join(path, "saved_model.pbtxt")
    )


def serving_model_path(model_dir: str) -> str:
    """The SavedModel inside a model artifact: TFX layout `Format-Serving`, or the dir itself."""
    inner = os.path.join(model_dir, SERVING_DIR)
    return inner if os.path.isdir(inner) else model_dir


def validate_serving_model(path: str, what: str = "run_fn") -> dict[str, Any]:
    """Load the SavedModel at `path`; return its signature names, or raise OutputError saying what
    is wrong."""
    if not os.path.isdir(path) or not os.listdir(path):
        raise OutputError(
            f"{what} wrote no model: {path} is empty. Export the serving model to "
            "fn_args.serving_model_dir (e.g. model.export(fn_args.serving_model_dir) or "
            "tf.saved_model.save(...))."
        )
    if not _has_saved_model(path):
        found = sorted(os.listdir(path))[:10]
        raise OutputError(
            f"{what} wrote {found} to {path}, but no SavedModel (saved_model.pb). A Keras '.keras' "
            "file cannot be served: use model.export(dir) or tf.saved_model.save(model, dir)."
        )
    import tensorflow as tf

    try:
        loaded = tf.saved_model.load(path)
    except Exception as e:
        raise OutputError(
            f"the SavedModel {what} wrote at {path} does not load: {type(e).__name__}: {e}"
        ) from e
    signatures = sorted(loaded.signatures.keys())
    if "serving_default" not in signatures:
        raise OutputError(
            f"the SavedModel at {path} has no 'serving_default' signature (it has "
            f"{signatures or 'none'}); export one, e.g. "
            "keras.export.ExportArchive.add_endpoint('serving_default', ...)."
        )
    fn = loaded.signatures["serving_default"]
    inputs = {k: f"{v.dtype.name}{v.shape}" for k, v in fn.structured_input_signature[1].items()}
    outputs = {k: f"{v.dtype.name}{v.shape}" for k, v in fn.structured_outputs.items()}
    return {"signatures": signatures, "serving_inputs": inputs, "serving_outputs": outputs}


@contextlib.contextmanager
def exclusive(directory: str, flag: str) -> Iterator[None]:
    """Hold `directory` for this run: a second run on it fails at once (UserInputError naming `flag`
    and the run holding it). Inside, staging left by runs that died is removed."""
    lock = storage.OutputLock(directory)
    if (
        run_record.active()
    ):  # supervised: the run lives as long as its supervising parent, which releases it
        lock.owner["pid"] = run_record.supervisor_pid()
    try:
        taken_over = lock.acquire()
    except storage.LockHeld as e:
        raise UserInputError(
            flag,
            (
                f"{directory} is in use by another run: {storage.describe_owner(e.owner)}, last "
                f"heartbeat {e.age_s:.0f} s ago (lock file {e.lock_path}). Wait for that run to "
                f"end or give another {flag}. "
                f"(A run that died releases it by itself: at once when it ran on this host, else "
                f"{lock.stale_after_s:.0f} s after its last heartbeat.)"
            ),
        ) from None
    except storage.LockForeign as e:
        raise UserInputError(flag, f"{directory} cannot be locked: {e}") from None
    except OSError as e:  # the lock file beside the dir cannot be created (a read-only parent)
        raise UserInputError(
            flag,
            f"{directory} cannot be locked: could not create {lock.path} ({e.strerror or e}); "
            "a run holds its output dir by a lock file beside it",
        ) from None
    run_record.note("held", directory, lock=lock.path, run_id=lock.owner["run_id"])
    try:
        for owner in taken_over:
            log.warning("%s: took over %s", flag, owner)
        for path in storage.remove_stale_staging(directory):
            log.info("%s: removed %s, left by a run that did not finish", flag, path)
        yield
    finally:
        lock.release()
        run_record.note("released", directory)


@contextlib.contextmanager
def exclusive_all(
    dirs: Sequence[tuple[str | None, str]], new: Sequence[str] = ()
) -> Iterator[None]:
    """Hold every local directory of `dirs` ((path, flag), ...; None and gs:// URIs skipped) for
    this run, as `exclusive` does. Those whose flag is in `new` must still be absent or empty once
    held (a run that finished meanwhile wrote it: UserInputError rather than replacing its
    output)."""
    with contextlib.ExitStack() as stack:
        for directory, flag in dirs:
            if directory and not storage.is_gcs_uri(directory):
                stack.enter_context(exclusive(directory, flag))
                if flag in new and os.path.isdir(directory) and os.listdir(directory):
                    raise UserInputError(
                        flag,
                        f"{directory} was written by another run meanwhile; give a new "
                        "directory (outputs are written whole, never over an older one)",
                    )
        yield


def metric_name(key: Any) -> str:
    """A metric's name as logs and files show it: control characters (newline, NUL, ...) escaped, so
    a name cannot start a forged log line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(key))


def scalar_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The numeric scalars of `metrics` (what KFP's Metrics artifact and the JSON file carry), names
    escaped (`metric_name`); values that are not numbers are left out with a warning naming them."""
    out, dropped = {}, []
    for key, value in metrics.items():
        try:
            number = float(value.numpy() if hasattr(value, "numpy") else value)
        except (TypeError, ValueError, OverflowError):
            dropped.append(metric_name(key))
            continue
        out[metric_name(key)] = number
    if dropped:
        log.warning(
            "metrics that are not single numbers are left out of the metrics file and KFP's "
            "metrics: %s",
            ", ".join(dropped),
        )
    return out


def write_metrics_file(path: str, metrics: Mapping[str, Any]) -> None:
    """Every verb's metrics file: strict JSON, keys sorted (NaN / infinity written as null, with a
    warning naming the metric, nested ones too); a write that fails is exit 4 naming `path`
    (files.write_file_atomic)."""
    files.write_file_atomic(
        path, files.dumps_strict(dict(metrics), "metric", indent=2, sort_keys=True) + "\n"
    )


def write_tensorboard_scalars(log_dir: str, metrics: Mapping[str, float], step: int) -> None:
    """Final metrics as TensorBoard scalars under `<log_dir>/final`, so every run has them.

    A write that fails (a full disk) is OutputError (exit 4) naming the directory; the event file it
    left is removed.
    """
    import tensorflow as tf

    final = os.path.join(log_dir, "final")
    before = set(files.listdir(final))
    try:
        writer = tf.summary.create_file_writer(final)
        with writer.as_default():
            for key, value in metrics.items():
                tf.summary.scalar(key, value, step=step)
        writer.close()
    except (OSError, tf.errors.OpError) as e:
        for name in set(files.listdir(final)) - before:
            with contextlib.suppress(OSError):
                os.remove(os.path.join(final, name))
        detail = getattr(e, "message", None) or getattr(e, "strerror", None) or str(e)
        raise OutputError(f"could not write the TensorBoard summaries in {final}: {detail}") from e


def copy_model_run(model_run_dir: str, copy_dir: str | None) -> None:
    """Copy the TensorBoard logs written live (Vertex's AIP_TENSORBOARD_LOG_DIR) into the model-run
    artifact.

    Both the run_fn path and the Task path call it last among the chief's outputs; nothing when
    `copy_dir` is None (the logs were written to the model-run artifact itself).
    """
    if not copy_dir:
        return
    found = tree.walk(model_run_dir, "--model-run-dir", lenient=True)  # iterative, bounded
    os.makedirs(copy_dir, exist_ok=True)
    for rel in found.dirs:
        os.makedirs(os.path.join(copy_dir, rel), exist_ok=True)
    for rel in found.files:
        shutil.copyfile(os.path.join(model_run_dir, rel), os.path.join(copy_dir, rel))
    if found.skipped:
        log.warning(
            "TensorBoard logs: left out of the copy (not a directory or regular file, or beyond "
            "the walk's bounds): %s",
            ", ".join(found.skipped[:5]) + (" ..." if len(found.skipped) > 5 else ""),
        )
    log.info("TensorBoard logs copied from %s to %s", model_run_dir, copy_dir)
