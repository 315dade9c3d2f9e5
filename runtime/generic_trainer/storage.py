"""Where things live: URIs to local paths, Cloud Storage downloads, whole-or-nothing publishing.

A leaf module: imports nothing of generic_trainer's, and google-cloud-storage only when a
download is asked for. KFP hands the container URIs; on Vertex `gs://b/x` is mounted at
`/gcs/b/x` (Cloud Storage FUSE). The mount root is a parameter so tests map it to a temp dir.
"""

from __future__ import annotations

import math
import os
import shutil
import time
import uuid

DEFAULT_MOUNT_ROOTS = {"gs://": "/gcs", "s3://": "/s3", "minio://": "/minio", "oci://": "/oci"}


def is_gcs_uri(uri: str) -> bool:
    return uri.startswith("gs://")


def local_path(uri: str, gcs_root: str = "/gcs") -> str:
    """The local path of `uri` as kfp's `Artifact.path` gives it (`gs://b/x` -> `<gcs_root>/b/x`)."""
    for prefix, root in DEFAULT_MOUNT_ROOTS.items():
        if uri.startswith(prefix):
            root = gcs_root if prefix == "gs://" else root
            return os.path.join(root, uri[len(prefix):])
    return uri


def split_gcs_uri(uri: str) -> tuple[str, str]:
    """`gs://bucket/a/b` -> ("bucket", "a/b")."""
    bucket, _, name = uri[len("gs://"):].partition("/")
    return bucket, name


GCS_TIMEOUT_ENV = "GENERIC_TRAINER_GCS_TIMEOUT"
DEFAULT_GCS_TIMEOUT = 20.0  # seconds a Cloud Storage operation retries before it fails
DEFAULT_GCS_ENDPOINT = "https://storage.googleapis.com"


class GcsUnavailable(OSError):
    """Cloud Storage did not answer within the retry deadline (refused, unreachable, or kept failing)."""


def gcs_timeout() -> float:
    """Seconds a Cloud Storage operation may take, retries included: $GENERIC_TRAINER_GCS_TIMEOUT or 20.

    The request check (request.py) refuses a malformed value with exit 2; here it falls back to the default.
    """
    try:
        seconds = float(os.environ.get(GCS_TIMEOUT_ENV) or DEFAULT_GCS_TIMEOUT)
    except ValueError:
        return DEFAULT_GCS_TIMEOUT
    return seconds if math.isfinite(seconds) and seconds > 0 else DEFAULT_GCS_TIMEOUT


def gcs_endpoint() -> str:
    """The Cloud Storage endpoint the client talks to (the emulator's when STORAGE_EMULATOR_HOST is set)."""
    return os.environ.get("STORAGE_EMULATOR_HOST") or DEFAULT_GCS_ENDPOINT


def _gcs_client():  # pragma: no cover - trivial
    from google.cloud import storage

    if os.environ.get("STORAGE_EMULATOR_HOST"):
        return storage.Client.create_anonymous_client()
    return storage.Client()


class _Deadline:
    """One retry deadline shared by every request of an operation (google-cloud-storage's own is 120 s each)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def kwargs(self) -> dict:
        from google.cloud.storage.retry import DEFAULT_RETRY

        left = max(0.1, self.end - time.monotonic())
        return {"retry": DEFAULT_RETRY.with_timeout(left), "timeout": left}


def download_gcs(uri: str, dest_dir: str, siblings_suffix: str | None = None) -> str:
    """Download the object `uri` into `dest_dir` and return its local path.

    With `siblings_suffix` (e.g. ".py"), objects with that suffix in the same "folder" come too,
    so a module that imports a file next to it works. Raises FileNotFoundError when `uri` is absent,
    GcsUnavailable (naming the endpoint) when Cloud Storage does not answer within `gcs_timeout()`.
    """
    from google.api_core import exceptions

    bucket_name, name = split_gcs_uri(uri)
    deadline = _Deadline(gcs_timeout())
    os.makedirs(dest_dir, exist_ok=True)
    target = os.path.join(dest_dir, os.path.basename(name))
    try:
        client = _gcs_client()
        bucket = client.bucket(bucket_name)
        try:
            bucket.blob(name).download_to_filename(target, **deadline.kwargs())
        except exceptions.NotFound as e:
            if os.path.exists(target):
                os.remove(target)
            raise FileNotFoundError(f"{uri} does not exist") from e
        if siblings_suffix:
            prefix = name.rpartition("/")[0]
            prefix = prefix + "/" if prefix else ""
            for blob in client.list_blobs(bucket_name, prefix=prefix, delimiter="/", **deadline.kwargs()):
                if blob.name != name and blob.name.endswith(siblings_suffix):
                    blob.download_to_filename(os.path.join(dest_dir, os.path.basename(blob.name)),
                                              **deadline.kwargs())
    except (exceptions.RetryError, exceptions.ServiceUnavailable, ConnectionError, TimeoutError) as e:
        raise GcsUnavailable(_unavailable_message(e, deadline.seconds)) from None
    except Exception as e:
        if type(e).__module__.startswith(("requests", "urllib3")):  # connection errors not retried
            raise GcsUnavailable(_unavailable_message(e, deadline.seconds)) from None
        raise
    return target


def _unavailable_message(error: BaseException, seconds: float) -> str:
    cause = error.cause if getattr(error, "cause", None) is not None else error
    detail = " ".join(str(cause).split())[:300]
    return (f"Cloud Storage at {gcs_endpoint()} did not answer within {seconds:g} s ({type(cause).__name__}: "
            f"{detail}); check the endpoint and network, or set {GCS_TIMEOUT_ENV} to wait longer")


def staging_dir_for(final_dir: str) -> str:
    """A fresh sibling of `final_dir` to write into before publishing it whole."""
    parent, base = os.path.split(os.path.normpath(final_dir))
    return os.path.join(parent, f".{base}.staging-{uuid.uuid4().hex[:8]}")


def publish_dir(staging: str, final_dir: str) -> None:
    """Move a finished `staging` dir to `final_dir`, replacing an older one.

    The rename is atomic on a local file system; readers never see a half-written directory.
    """
    final_dir = os.path.normpath(final_dir)
    if os.path.exists(final_dir):
        trash = staging_dir_for(final_dir) + ".old"
        os.rename(final_dir, trash)
        os.rename(staging, final_dir)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        os.makedirs(os.path.dirname(final_dir) or ".", exist_ok=True)
        os.rename(staging, final_dir)


def write_file_atomic(path: str, text: str) -> None:
    """Write `text` to `path` through a temporary sibling and a rename."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp-{uuid.uuid4().hex[:8]}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
