"""An output path checked writable before any work: probed by creating and removing a small file
where it goes (or in the nearest existing directory above it), which is what counts on read-only
mounts, immutable directories and Cloud Storage FUSE alike; a path under the gs:// mount root whose
bucket is not mounted there is refused. output_checks.py checks each output of a request with them.
"""

from __future__ import annotations

import os
import uuid

from generic_trainer.artifacts import files
from generic_trainer.errors import UserInputError


def check_mounted(flag: str, path: str, gcs_root: str | None) -> None:
    """UserInputError when `path` lies under the gs:// mount root but its bucket is not mounted
    there: the
    output would be written to this machine's own disk and lost when it ends (as a gs:// input is
    refused)."""
    if not gcs_root:
        return
    root, path = os.path.abspath(gcs_root), os.path.abspath(path)
    if not path.startswith(root + os.sep):
        return
    bucket = os.path.relpath(path, root).split(os.sep)[0]
    if not os.path.isdir(os.path.join(root, bucket)):
        mount = (
            f"{root} does not exist" if not os.path.isdir(root) else f"{root} holds no {bucket}/"
        )
        raise UserInputError(
            flag,
            f"gs://{bucket}/{os.path.relpath(path, os.path.join(root, bucket))} is not "
            f"mounted: Cloud Storage is read and written through {root} (Cloud Storage FUSE, "
            f"as on Vertex AI), and {mount}; an output written there would stay on this "
            "machine's disk and be lost. Mount the bucket there, or set --gcs-root "
            "(GENERIC_TRAINER_GCS_ROOT) to where it is mounted",
        )


def _nearest_existing(path: str) -> str:
    while not os.path.lexists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def _probe(directory: str) -> str | None:
    """None when a file can be created (and removed) in `directory`, else the reason."""
    probe = os.path.join(directory, f".write-check-{uuid.uuid4().hex[:12]}")
    try:
        fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.close(fd)
        os.remove(probe)
    except OSError as e:
        return e.strerror or str(e)
    return None


def check_writable(
    flag: str, path: str, kind: str, probed: dict[str, str | None] | None = None, why: str = ""
) -> None:
    """Raise UserInputError(flag) unless `path` (a "dir" or a "file") can be created or replaced."""
    probed = {} if probed is None else probed
    path = os.path.normpath(os.path.abspath(path))
    if kind == "dir" and os.path.islink(path):
        raise UserInputError(
            flag,
            f"{path} is {files.describe(path)}; an output dir is published by renaming it into "
            "place, which would replace the link: give the directory itself",
        )
    if os.path.exists(path):
        if kind == "dir" and not os.path.isdir(path):
            raise UserInputError(
                flag,
                f"{path} is {files.describe(path)}; expected a directory (or a path where "
                "one can be created)",
            )
        if kind == "file" and os.path.isdir(path):
            raise UserInputError(flag, f"{path} is a directory; expected a file path")
        if kind == "file" and files.not_replaceable(path):
            raise UserInputError(
                flag, f"{files.not_replaceable(path)}: give a file path (or a new one)"
            )
        if kind == "file" and not os.access(path, os.W_OK):
            raise UserInputError(flag, f"{path} exists and cannot be replaced (it is read-only)")
        directory = path if kind == "dir" else os.path.dirname(path)
    else:
        directory = _nearest_existing(os.path.dirname(path))
        if not os.path.isdir(directory):
            what = files.describe(directory)
            raise UserInputError(
                flag, f"cannot create {path}: {directory} is {what}, not a directory"
            )
    if directory not in probed:
        probed[directory] = _probe(directory)
    if probed[directory] is not None:
        where = "" if directory == path else f": cannot create files in {directory}"
        raise UserInputError(flag, f"{path} is not writable{where} ({probed[directory]}){why}")
