"""The `push` verb: a blessed model to a directory TF Serving watches (TFX's Pusher, filesystem
destination).

As TFX's Pusher does: a model the evaluator did not bless (`--model-blessing` holds NOT_BLESSED) or,
when `--infra-blessing` is given, the infra-validator did not, is not pushed: exit 0, pushed 0, the
reasons logged and in the metadata. Without any blessing the model is pushed, with a warning that it
was not validated. The version is the Unix time in seconds; the model's SavedModel (its
`Format-Serving` when it is a trainer model dir) is copied to `<destination>/<version>/` with
`saved_model.pb` last (TF Serving and others take that file as the sign that a version is
complete). Where that version dir exists already (a push in the same second, anything else of that
name), the next free version is taken (TFX's Pusher skips the copy and reports the existing dir as
pushed; this push never reports a path it did not write). `pushed_model` (`--pushed-model-dir`) gets
a copy of the pushed model and the metadata `pushed` (1|0), `pushed_destination`, `pushed_version`.

Whole or not at all: the files are copied into a hidden sibling of the version dir
(`.<version>.staging-*`, which TF Serving ignores: not a number), removed however the push ends
(SIGTERM included; one a killed run left is swept by the next push holding the destination), and
renamed into place in one step. On Cloud Storage FUSE (gs://), where a directory rename copies
object by object in no set order, the version dir is filled by renaming file by file,
`saved_model.pb` last, and removed again if that fails. The model is read holding its model dir's
lock (train's), so a train cannot publish into it meanwhile; where it cannot be locked (a read-only
input), the files are checked unchanged after the copy instead. TensorFlow is never imported.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator
from typing import Any

from generic_trainer.artifacts import outputs, storage, tree
from generic_trainer.artifacts.staged import StagedDir
from generic_trainer.errors import OutputError, UserInputError
from generic_trainer.intake import push_options
from generic_trainer.intake.contract import VerbContract
from generic_trainer.intake.push_request import FLAG, PushRequest, build_push_request
from generic_trainer.judge.blessing import KINDS, read_verdict

log = logging.getLogger(__name__)

SAVED_MODEL = "saved_model.pb"


@dataclasses.dataclass
class PushResult:
    """Whether the model was pushed, where (pushed_destination, in the form the destination was
    given) and why not."""

    pushed: bool
    reasons: list[str]
    destination: str | None = None
    version: str | None = None
    files: int = 0
    size_bytes: int = 0

    def summary(self) -> dict[str, Any]:
        body: dict[str, Any] = {"pushed": int(self.pushed)}
        if self.pushed:
            body.update(pushed_destination=self.destination, pushed_version=self.version)
        else:
            body["reasons"] = self.reasons
        return body


def _not_blessed_reasons(request: PushRequest) -> list[str]:
    """Why the model may not be pushed, one line per blessing that says no (empty: it may)."""
    reasons = []
    for path, kind, flag in (
        (request.model_blessing, "model", "--model-blessing"),
        (request.infra_blessing, "infra", "--infra-blessing"),
    ):
        if not path:
            continue
        blessed, why = read_verdict(path, kind, flag)
        _, not_blessed_file, writer = KINDS[kind]
        if blessed:
            log.info("%s blessed the model (%s)", writer, path)
        else:
            reasons.append(
                f"{writer} did not bless the model ({path}: {not_blessed_file}"
                + (f": {'; '.join(why)}" if why else "")
                + ")"
            )
    return reasons


def model_files(source: str) -> tuple[list[str], list[str]]:
    """(directories, files) of the SavedModel at `source`, relative, `saved_model.pb` last.

    Only directories and regular files are pushed, walked iteratively within a bound of depth and
    entries (artifacts/tree.py): anything else is a UserInputError naming it and what it is.
    """
    found = tree.walk(source, "--model")
    if SAVED_MODEL not in found.files:
        raise UserInputError("--model", f"{source} holds no {SAVED_MODEL}")
    found.files.remove(SAVED_MODEL)
    return found.dirs, found.files + [SAVED_MODEL]


def _copy(source: str, dirs: list[str], files: list[str], target: str) -> int:
    """Copy the model's `dirs` and `files` (in order: saved_model.pb last) into `target`; returns
    the bytes."""
    size = 0
    os.makedirs(target, exist_ok=True)
    for rel in dirs:
        os.makedirs(os.path.join(target, rel), exist_ok=True)
    for rel in files:
        shutil.copyfile(os.path.join(source, rel), os.path.join(target, rel))
        size += os.path.getsize(os.path.join(target, rel))
    return size


def _archive(
    pushed_model_dir: str | None, source: str | None, dirs: list[str], files: list[str]
) -> None:
    """The PushedModel artifact: a copy of the pushed model (as TFX keeps one), or empty; published
    whole."""
    if not pushed_model_dir:
        return
    try:
        with StagedDir(pushed_model_dir) as stage:
            if source:
                _copy(source, dirs, files, stage.path)
            stage.publish()
    except OSError as e:
        raise OutputError(f"--pushed-model-dir: could not write {pushed_model_dir}: {e}") from e


def run(
    request: PushRequest, before_publish: Callable[[PushResult], None] | None = None
) -> PushResult:
    """Push the model when it is blessed; `before_publish(result)` runs before the version dir
    appears."""
    before_publish = before_publish or (lambda result: None)
    reasons = _not_blessed_reasons(request)
    if reasons:
        result = PushResult(pushed=False, reasons=reasons)
        _archive(request.pushed_model_dir, None, [], [])
        before_publish(result)
        log.warning("not pushed: %s", "; ".join(reasons))
        return result
    if not request.model_blessing and not request.infra_blessing:
        log.warning(
            "no blessing was given (--model-blessing, --infra-blessing): the model is pushed "
            "without validation, as TFX's Pusher does; consider an evaluate step"
        )
    with _model_held(request.model):
        source = outputs.serving_model_path(request.model)
        dirs, files = model_files(source)
        stamps = tree.fingerprint(source, [".", *files])
        result = _push(request, source, dirs, files, stamps, before_publish)
    if request.records_dir:  # only a pushed model is recorded (TFX's PushedModel)
        from generic_trainer.tfx_kfp import model_records

        uri = request.pushed_model_dir or os.path.join(request.push_destination, result.version)
        properties = {**kfp_metadata(request, result)["pushed_model"], "model": request.model}
        model_records.record_artifact(request.records_dir, "PushedModel", uri, properties)
    return result


def _push(
    request: PushRequest,
    source: str,
    dirs: list[str],
    files: list[str],
    stamps: dict[str, tree.Stamp | None],
    before_publish: Callable[[PushResult], None],
) -> PushResult:
    """Copy, check the model did not change meanwhile, archive, then publish the next free
    version."""
    version = _free_version(request.push_destination)
    staging = storage.staging_dir_for(os.path.join(request.push_destination, version))
    result = PushResult(pushed=True, reasons=[], files=len(files))
    started = time.monotonic()
    with storage.staging_removed_on_stop(staging, f"pushing {source}"):
        try:
            result.size_bytes = _copy(source, dirs, files, staging)
            _check_unchanged(source, stamps)
            _archive(request.pushed_model_dir, staging, dirs, files)
            _set_version(request, result, version)
            before_publish(result)
            published = storage.publish_version(
                staging, request.push_destination, int(version), dirs + files, request.on_gcs_fuse
            )
        except OSError as e:
            raise OutputError(
                f"{FLAG}: could not push the model to {request.push_destination}: {e}"
            ) from e
    if published != version:  # something else took the version meanwhile
        log.warning("version %s appeared meanwhile; pushed as version %s", version, published)
        _set_version(request, result, published)
        before_publish(result)
    log.info(
        "pushed %s to %s: %d files, %.1f MB in %.1f s (version %s, %s last)",
        source,
        result.destination,
        len(files),
        result.size_bytes / 1e6,
        time.monotonic() - started,
        result.version,
        SAVED_MODEL,
    )
    return result


def _free_version(destination: str) -> str:
    """The version to push as: now's timestamp, or the next free one (said in the log)."""
    now = int(time.time())
    version = storage.free_version(destination, now)
    if version != str(now):
        log.warning(
            "%s exists already (it was left alone): pushed as version %s, the next free one "
            "(TFX's Pusher would skip the copy and report that dir as pushed)",
            os.path.join(destination, str(now)),
            version,
        )
    return version


def _set_version(request: PushRequest, result: PushResult, version: str) -> None:
    result.version, result.destination = version, f"{request.destination_uri}/{version}"


@contextlib.contextmanager
def _model_held(model: str) -> Iterator[None]:
    """Hold the lock of the model dir (train's output lock) while the model is read, so no train
    publishes into it meanwhile; where it cannot be taken (a read-only input), go on without it:
    `_check_unchanged` tells a model that changed while it was copied."""
    directory = os.path.dirname(model) if os.path.basename(model) == outputs.SERVING_DIR else model
    lock, held = storage.OutputLock(directory), True
    try:
        lock.acquire()
    except storage.LockHeld as e:
        raise UserInputError(
            "--model",
            f"{directory} is being written by another run ({storage.describe_owner(e.owner)}, "
            f"lock file {e.lock_path}); push it once that run has ended",
        ) from None
    except storage.LockForeign as e:
        raise UserInputError("--model", f"{directory} cannot be locked for reading: {e}") from None
    except OSError as e:
        log.info("--model: %s cannot be locked (%s); checked unchanged after the copy", model, e)
        held = False
    try:
        yield
    finally:
        if held:
            lock.release()


def _check_unchanged(source: str, stamps: dict[str, tree.Stamp | None]) -> None:
    """UserInputError when files of the model changed while they were copied (nothing is pushed)."""
    changed = tree.changed(source, stamps)
    if changed:
        raise UserInputError(
            "--model",
            f"{len(changed)} file(s) of {source} changed while they were copied (e.g. "
            f"{changed[0]}): another run wrote the model meanwhile; nothing was pushed, push again",
        )


def kfp_metadata(request: PushRequest, result: PushResult) -> dict[str, dict[str, Any]]:
    """Metadata of the pushed_model artifact: TFX's PushedModel properties (pushed 1|0, destination,
    version)."""
    metadata: dict[str, Any] = {"pushed": int(result.pushed)}
    if result.pushed:
        metadata.update(pushed_destination=result.destination, pushed_version=result.version)
    else:
        metadata["reasons"] = "; ".join(result.reasons)
    return {"pushed_model": metadata}


def describe(r: PushRequest) -> list[str]:
    """The log lines saying what this push will do."""
    return [
        f"push request: model={r.model} model_blessing={r.model_blessing} "
        f"infra_blessing={r.infra_blessing} "
        f"push_destination={r.destination_uri} pushed_model_dir={r.pushed_model_dir}"
    ]


VERB: VerbContract[PushRequest, PushResult] = VerbContract(
    push_options.PUSH,
    build_push_request,
    describe,
    run,
    lambda request, result: (kfp_metadata(request, result), None),
    lambda result: result.summary(),
    lock_outputs=True,
)
