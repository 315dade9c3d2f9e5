"""Where things live: URIs to local paths, Cloud Storage downloads, whole-or-nothing publishing,
locks.

Imports only `files` of generic_trainer's (atomic writes, bounded reads), and google-cloud-storage
only when a download is asked for. Every local path it gives is absolute, so a `run_fn` that changes
the working directory cannot move the outputs. KFP hands the container URIs; on Vertex `gs://b/x` is
mounted at `/gcs/b/x` (Cloud Storage FUSE). The mount root is a parameter so tests map it to a temp
dir.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import threading
import uuid
from collections.abc import Iterator

from generic_trainer.artifacts.files import write_file_atomic  # noqa: F401 (callers use storage's)
from generic_trainer.artifacts.lock_owner import describe_owner  # noqa: F401 (as above)
from generic_trainer.artifacts.output_lock import (  # noqa: F401 (as above)
    LockForeign,
    LockHeld,
    OutputLock,
)
from generic_trainer.errors import OutputError, Preempted

DEFAULT_MOUNT_ROOTS = {"gs://": "/gcs", "s3://": "/s3", "minio://": "/minio", "oci://": "/oci"}


def is_gcs_uri(uri: str) -> bool:
    return uri.startswith("gs://")


def local_path(uri: str, gcs_root: str = "/gcs") -> str:
    """The absolute local path of `uri` as kfp's `Artifact.path` gives it (`gs://b/x` ->
    `<gcs_root>/b/x`)."""
    for prefix, root in DEFAULT_MOUNT_ROOTS.items():
        if uri.startswith(prefix):
            root = gcs_root if prefix == "gs://" else root
            return os.path.abspath(os.path.join(root, uri[len(prefix) :]))
    return os.path.abspath(uri)


def split_gcs_uri(uri: str) -> tuple[str, str]:
    """`gs://bucket/a/b` -> ("bucket", "a/b")."""
    bucket, _, name = uri[len("gs://") :].partition("/")
    return bucket, name


# S3-compatible stores: s3:// (AWS S3, or any endpoint in $AWS_ENDPOINT_URL_S3 / $AWS_ENDPOINT_URL,
# which boto3
# reads itself) and minio:// (KFP's on-cluster MinIO, at $GENERIC_TRAINER_MINIO_ENDPOINT or KFP's
# default service).
S3_PREFIXES = ("s3://", "minio://")


def is_s3_uri(uri: str) -> bool:
    """An s3:// or minio:// URI."""
    return uri.startswith(S3_PREFIXES)


def split_s3_uri(uri: str) -> tuple[str, str]:
    """`s3://bucket/a/b` (or minio://) -> ("bucket", "a/b")."""
    bucket, _, key = uri.split("://", 1)[1].partition("/")
    return bucket, key


def staging_dir_for(final_dir: str) -> str:
    """A fresh, private sibling of `final_dir` to write into before publishing it whole.

    It lies outside `final_dir` (so nothing written into it can reach the published tree through
    `..`) and on the same file system (so publishing is a rename). `remove_stale_staging` finds
    the ones a killed run left behind by their prefix.
    """
    parent, base = os.path.split(os.path.normpath(os.path.abspath(final_dir)))
    return os.path.join(parent, f".{base}.staging-{uuid.uuid4().hex[:12]}")


def remove_stale_staging(final_dir: str) -> list[str]:
    """Remove the staging siblings of `final_dir` (and a `<final_dir>/.staging` of older versions).

    Call it only while holding `final_dir`'s lock (`OutputLock`): then no other run is writing
    one, so every one found was left by a run that died. Returns what was removed.
    """
    parent, base = os.path.split(os.path.normpath(os.path.abspath(final_dir)))
    prefix = f".{base}.staging-"
    found = [os.path.join(parent, n) for n in _listdir(parent) if n.startswith(prefix)]
    legacy = os.path.join(final_dir, ".staging")
    found += [legacy] if os.path.isdir(legacy) else []
    # staging of what is published into final_dir (push's `.<version>.staging-*`)
    found += [os.path.join(final_dir, n) for n in _listdir(final_dir) if _INNER_STAGING.match(n)]
    for path in found:
        shutil.rmtree(path, ignore_errors=True)
    return found


_INNER_STAGING = re.compile(r"\.[^/]+\.staging-[0-9a-f]{12}(\.old)?\Z")


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100


_RENAME_NOREPLACE = 1


def exchange_dirs(a: str, b: str) -> bool:
    """Swap two directories in one atomic step (Linux `renameat2(RENAME_EXCHANGE)`).

    Returns False when the system or the file system cannot (not Linux, FUSE file systems such
    as Cloud Storage FUSE, old kernels); then nothing was changed.
    """
    return _renameat2(a, b, _RENAME_EXCHANGE)


def rename_no_replace(a: str, b: str) -> None:
    """Rename `a` to `b` in one step, never over anything at `b` (FileExistsError then): Linux's
    RENAME_NOREPLACE; where it is missing, a plain rename after the caller's check."""
    if not _renameat2(a, b, _RENAME_NOREPLACE):
        os.rename(a, b)


def _renameat2(a: str, b: str, flags: int) -> bool:
    """Linux `renameat2(a, b, flags)`: True when done, False when not supported here (nothing
    changed); OSError otherwise (FileExistsError: `b` exists, with RENAME_NOREPLACE)."""
    import ctypes

    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    result = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), flags)
    if result == 0:
        return True
    errno = ctypes.get_errno()
    if errno in (22, 38, 95, 18):  # EINVAL, ENOSYS, EOPNOTSUPP, EXDEV: not supported here
        return False
    raise OSError(errno, os.strerror(errno), b)


def publish_dir(staging: str, final_dir: str) -> None:
    """Move a finished `staging` dir to `final_dir`, replacing an older one.

    A reader of `final_dir` sees the complete old or the complete new directory: a new one is
    renamed into place, and an old one is swapped with the new in one atomic step where the file
    system can (local disks on Linux); the old one is then deleted from where the new one was.
    Where it cannot (Cloud Storage FUSE renames a directory object by object), the old one is
    renamed away and the new one renamed in, and a reader can find no directory in between.
    """
    final_dir = os.path.normpath(final_dir)
    if not os.path.exists(final_dir):
        os.makedirs(os.path.dirname(final_dir) or ".", exist_ok=True)
        os.rename(staging, final_dir)
        return
    if exchange_dirs(staging, final_dir):
        shutil.rmtree(staging, ignore_errors=True)  # the old directory, now at the staging path
        return
    trash = staging_dir_for(final_dir) + ".old"
    os.rename(final_dir, trash)
    os.rename(staging, final_dir)
    shutil.rmtree(trash, ignore_errors=True)


MAX_VERSION_TRIES = 1000


def publish_version(
    staging: str, destination: str, first: int, entries: list[str], rename_files: bool
) -> str:
    """Rename the finished `staging` dir to `<destination>/<v>` for the first version v >= `first`
    that is free (nothing there, not even a dangling symlink); returns v.

    `entries`: the staged dirs then files, relative, `saved_model.pb` last: where a directory cannot
    be renamed in one step (`rename_files`: Cloud Storage FUSE renames a directory object by object,
    in no set order), they move one by one in that order.
    Call it holding the destination's lock, so no other push takes the same version meanwhile.
    """
    for version in range(first, first + MAX_VERSION_TRIES):
        target = os.path.join(destination, str(version))
        if os.path.lexists(target):
            continue
        if rename_files and _fill_version(staging, target, entries):
            return str(version)
        if not rename_files:
            try:  # one step: a reader sees no version, or all of it; never over what is there
                rename_no_replace(staging, target)
                return str(version)
            except OSError:
                if not os.path.lexists(target):
                    raise
    raise OutputError(
        f"{destination}: versions {first} to {first + MAX_VERSION_TRIES - 1} all exist; nothing "
        "was pushed"
    )


def _fill_version(staging: str, target: str, entries: list[str]) -> bool:
    """Make `target` and move the staged `entries` into it in order; False when it appeared
    first."""
    try:
        os.mkdir(target)
    except FileExistsError:
        return False
    try:
        for rel in entries:
            source = os.path.join(staging, rel)
            if os.path.isdir(source) and not os.path.islink(source):
                os.makedirs(os.path.join(target, rel), exist_ok=True)
            else:
                os.rename(source, os.path.join(target, rel))
    except OSError:
        shutil.rmtree(target, ignore_errors=True)
        raise
    return True


@contextlib.contextmanager
def staging_removed_on_stop(staging: str, what: str) -> Iterator[None]:
    """Within the block `staging` (a partial copy) is removed however the block ends, SIGTERM
    included: the signal raises Preempted (exit 143) naming `what`, and the copy goes with it."""
    previous = None
    if threading.current_thread() is threading.main_thread():

        def stop(signum: int, frame: object) -> None:
            raise Preempted(
                f"SIGTERM received while {what}; the partial copy {staging} was removed and "
                "nothing was published"
            )

        previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def free_version(destination: str, first: int) -> str:
    """The first version >= `first` with nothing at `<destination>/<version>` (not even a dangling
    symlink)."""
    version = first
    while os.path.lexists(os.path.join(destination, str(version))):
        version += 1
    return str(version)
