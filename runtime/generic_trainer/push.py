"""The `push` verb: a blessed model to a directory TF Serving watches (TFX's Pusher, filesystem destination).

As TFX's Pusher does: only a model the evaluator blessed (`--model-blessing` holds BLESSED) and, when
`--infra-blessing` is given, the infra-validator too (INFRA_BLESSED) is pushed; the version is the Unix time in
seconds; the model's SavedModel (its `Format-Serving` when it is a trainer model dir) is copied to
`<destination>/<version>/` with `saved_model.pb` last (TF Serving and others take that file as the sign that a
version is complete); a version dir that already exists is left alone (and reported as the push, as TFX does);
`pushed_model` (`--pushed-model-dir`) gets a copy of the pushed model and the metadata `pushed` (1|0),
`pushed_destination`, `pushed_version`. A model that is not blessed is a result, not a failure: exit 0, pushed 0,
the reasons logged and in the metadata.

Whole or not at all: the files are copied into a hidden sibling of the version dir (`.<version>.staging-*`,
which TF Serving ignores: not a number) and renamed into place in one step. On Cloud Storage FUSE (gs://), where
a directory rename copies object by object in no set order, the version dir is filled by renaming file by file,
`saved_model.pb` last, and removed again if that fails. TensorFlow is never imported.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import stat
import time
from collections.abc import Callable
from typing import Any

from generic_trainer.artifacts import outputs, storage
from generic_trainer.errors import OutputError, UserInputError
from generic_trainer.intake import push_options
from generic_trainer.intake.contract import VerbContract
from generic_trainer.intake.push_request import FLAG, PushRequest, build_push_request
from generic_trainer.judge.blessing import KINDS, read_verdict

log = logging.getLogger(__name__)

SAVED_MODEL = "saved_model.pb"


@dataclasses.dataclass
class PushResult:
    """Whether the model was pushed, where (pushed_destination, in the form the destination was given) and why not."""

    pushed: bool
    reasons: list[str]
    destination: str | None = None
    version: str | None = None
    files: int = 0
    size_bytes: int = 0
    existed: bool = False  # the version dir was there already and was left alone

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

    Only directories and regular files are pushed: a symbolic link or a device (which would copy what lies
    outside the model, or never end) is a UserInputError naming it.
    """
    dirs: list[str] = []
    files: list[str] = []
    for root, subdirs, names in os.walk(source):
        for name in sorted(subdirs) + sorted(names):
            path = os.path.join(root, name)
            mode = os.lstat(path).st_mode
            rel = os.path.relpath(path, source)
            if stat.S_ISDIR(mode):
                dirs.append(rel)
            elif stat.S_ISREG(mode):
                files.append(rel)
            else:
                kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"
                raise UserInputError(
                    "--model",
                    f"{path} is {kind}; a SavedModel to push holds directories and "
                    "regular files only",
                )
    if SAVED_MODEL not in files:
        raise UserInputError("--model", f"{source} holds no {SAVED_MODEL}")
    files.remove(SAVED_MODEL)
    return dirs, files + [SAVED_MODEL]


def _copy(source: str, dirs: list[str], files: list[str], target: str) -> int:
    """Copy the model's `dirs` and `files` (in order: saved_model.pb last) into `target`; returns the bytes."""
    size = 0
    os.makedirs(target, exist_ok=True)
    for rel in dirs:
        os.makedirs(os.path.join(target, rel), exist_ok=True)
    for rel in files:
        shutil.copyfile(os.path.join(source, rel), os.path.join(target, rel))
        size += os.path.getsize(os.path.join(target, rel))
    return size


def _publish_version(
    staging: str, target: str, dirs: list[str], files: list[str], on_gcs_fuse: bool
) -> bool:
    """Move the staged version into place; False when a version dir of that name appeared meanwhile."""
    if os.path.lexists(target):
        return False
    if not on_gcs_fuse:
        try:
            os.rename(staging, target)  # one step: a reader sees no version, or all of it
        except OSError:
            if os.path.lexists(target):
                return False
            raise
        return True
    try:
        os.mkdir(target)
    except FileExistsError:
        return False
    try:
        for rel in dirs:
            os.makedirs(os.path.join(target, rel), exist_ok=True)
        for rel in files:  # saved_model.pb last: a version without it is not loaded
            os.rename(os.path.join(staging, rel), os.path.join(target, rel))
    except OSError:
        shutil.rmtree(target, ignore_errors=True)
        raise
    return True


def _archive(
    pushed_model_dir: str | None, source: str | None, dirs: list[str], files: list[str]
) -> None:
    """The PushedModel artifact: a copy of the pushed model (as TFX keeps one), or empty; published whole."""
    if not pushed_model_dir:
        return
    staging = storage.staging_dir_for(pushed_model_dir)
    try:
        if source:
            _copy(source, dirs, files, staging)
        else:
            os.makedirs(staging)
        storage.publish_dir(staging, pushed_model_dir)
    except OSError as e:
        raise OutputError(f"--pushed-model-dir: could not write {pushed_model_dir}: {e}") from e
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def run(
    request: PushRequest, before_publish: Callable[[PushResult], None] | None = None
) -> PushResult:
    """Push the model when it is blessed; `before_publish(result)` runs before the version dir appears."""
    before_publish = before_publish or (lambda result: None)
    reasons = _not_blessed_reasons(request)
    if reasons:
        result = PushResult(pushed=False, reasons=reasons)
        _archive(request.pushed_model_dir, None, [], [])
        before_publish(result)
        log.warning("not pushed: %s", "; ".join(reasons))
        return result
    source = outputs.serving_model_path(request.model)
    dirs, files = model_files(source)
    version = str(int(time.time()))
    target = os.path.join(request.push_destination, version)
    destination = f"{request.destination_uri}/{version}"
    result = PushResult(
        pushed=True, reasons=[], destination=destination, version=version, files=len(files)
    )
    if os.path.lexists(target):
        return _left_alone(request, result, source, dirs, files, before_publish)
    staging = storage.staging_dir_for(target)
    try:
        started = time.monotonic()
        result.size_bytes = _copy(source, dirs, files, staging)
        _archive(request.pushed_model_dir, source, dirs, files)
        before_publish(result)
        if not _publish_version(staging, target, dirs, files, request.on_gcs_fuse):
            result.existed = True
            log.warning(
                "%s appeared while the model was copied; it was left alone (as TFX's Pusher does)",
                target,
            )
            return result
    except OSError as e:
        raise OutputError(f"{FLAG}: could not push the model to {target}: {e}") from e
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log.info(
        "pushed %s to %s: %d files, %.1f MB in %.1f s (version %s, %s last)",
        source,
        destination,
        len(files),
        result.size_bytes / 1e6,
        time.monotonic() - started,
        version,
        SAVED_MODEL,
    )
    return result


def _left_alone(
    request: PushRequest,
    result: PushResult,
    source: str,
    dirs: list[str],
    files: list[str],
    before_publish: Callable[[PushResult], None],
) -> PushResult:
    """TFX's Pusher: a version dir that exists is not touched, and the push is reported with its destination."""
    result.existed = True
    _archive(request.pushed_model_dir, source, dirs, files)
    before_publish(result)
    log.warning(
        "%s already exists; it was left alone and nothing was copied (as TFX's Pusher does)",
        result.destination,
    )
    return result


def kfp_metadata(request: PushRequest, result: PushResult) -> dict[str, dict[str, Any]]:
    """Metadata of the pushed_model artifact: TFX's PushedModel properties (pushed 1|0, destination, version)."""
    metadata: dict[str, Any] = {"pushed": int(result.pushed)}
    if result.pushed:
        metadata.update(pushed_destination=result.destination, pushed_version=result.version)
    else:
        metadata["reasons"] = "; ".join(result.reasons)
    return {"pushed_model": metadata}


def describe(r: PushRequest) -> list[str]:
    """The log lines saying what this push will do."""
    return [
        f"push request: model={r.model} model_blessing={r.model_blessing} infra_blessing={r.infra_blessing} "
        f"push_destination={r.destination_uri} pushed_model_dir={r.pushed_model_dir}"
    ]


VERB: VerbContract[PushRequest, PushResult] = VerbContract(
    push_options.PUSH,
    build_push_request,
    describe,
    run,
    lambda request, result: (kfp_metadata(request, result), None),
    lambda result: result.summary(),
)
