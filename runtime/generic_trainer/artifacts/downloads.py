"""Downloads of a user's file from object storage: Cloud Storage (google-cloud-storage, one retry
deadline for the whole operation, $GENERIC_TRAINER_GCS_TIMEOUT) and S3 / MinIO (boto3), each with
the .py files beside it when asked. The libraries load only when a download is asked for.
"""

from __future__ import annotations

import os
import time

from generic_trainer.artifacts.storage import split_gcs_uri, split_s3_uri
from generic_trainer.artifacts.storage_settings import (
    DEFAULT_SETTINGS,
    GCS_TIMEOUT_ENV,
    StorageSettings,
)


class GcsUnavailable(OSError):
    """Cloud Storage did not answer within the retry deadline (refused, unreachable, or kept
    failing)."""


def _gcs_client(settings: StorageSettings):  # pragma: no cover - trivial
    from google.cloud import storage

    if settings.emulator_host:
        return storage.Client.create_anonymous_client()
    return storage.Client()


class _Deadline:
    """One retry deadline shared by every request of an operation (google-cloud-storage's own is 120
    s each)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def kwargs(self) -> dict:
        from google.cloud.storage.retry import DEFAULT_RETRY

        left = max(0.1, self.end - time.monotonic())
        return {"retry": DEFAULT_RETRY.with_timeout(left), "timeout": left}


def download_gcs(
    uri: str,
    dest_dir: str,
    siblings_suffix: str | None = None,
    settings: StorageSettings = DEFAULT_SETTINGS,
) -> str:
    """Download the object `uri` into `dest_dir` and return its local path.

    With `siblings_suffix` (e.g. ".py"), objects with that suffix in the same "folder" come too,
    so a module that imports a file next to it works. Raises FileNotFoundError when `uri` is absent,
    GcsUnavailable (naming the endpoint) when Cloud Storage does not answer within
    `settings.gcs_timeout`.
    """
    from google.api_core import exceptions

    bucket_name, name = split_gcs_uri(uri)
    deadline = _Deadline(settings.gcs_timeout)
    os.makedirs(dest_dir, exist_ok=True)
    target = os.path.join(dest_dir, os.path.basename(name))
    try:
        client = _gcs_client(settings)
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
            for blob in client.list_blobs(
                bucket_name, prefix=prefix, delimiter="/", **deadline.kwargs()
            ):
                if blob.name != name and blob.name.endswith(siblings_suffix):
                    blob.download_to_filename(
                        os.path.join(dest_dir, os.path.basename(blob.name)), **deadline.kwargs()
                    )
    except (
        exceptions.RetryError,
        exceptions.ServiceUnavailable,
        ConnectionError,
        TimeoutError,
    ) as e:
        raise GcsUnavailable(_unavailable_message(e, deadline.seconds, settings)) from None
    except Exception as e:
        if type(e).__module__.startswith(("requests", "urllib3")):  # connection errors not retried
            raise GcsUnavailable(_unavailable_message(e, deadline.seconds, settings)) from None
        raise
    return target


def _unavailable_message(error: BaseException, seconds: float, settings: StorageSettings) -> str:
    cause = error.cause if getattr(error, "cause", None) is not None else error
    detail = " ".join(str(cause).split())[:300]
    return (
        f"Cloud Storage at {settings.gcs_endpoint} did not answer within {seconds:g} s "
        f"({type(cause).__name__}: "
        f"{detail}); check the endpoint and network, or set {GCS_TIMEOUT_ENV} to wait longer"
    )


def download_s3(
    uri: str,
    dest_dir: str,
    siblings_suffix: str | None = None,
    settings: StorageSettings = DEFAULT_SETTINGS,
) -> str:
    """Download the object `uri` (s3:// or minio://) into `dest_dir` with boto3; returns its local
    path.

    With `siblings_suffix`, objects with that suffix in the same "folder" come too. Raises
    FileNotFoundError when `uri` is absent, ImportError when boto3 is not installed (the image
    leaves it out; see the README).
    """
    import boto3
    from botocore.exceptions import ClientError

    endpoint = settings.minio_endpoint if uri.startswith("minio://") else None
    client = boto3.client("s3", endpoint_url=endpoint)
    bucket, key = split_s3_uri(uri)
    os.makedirs(dest_dir, exist_ok=True)
    target = os.path.join(dest_dir, os.path.basename(key))
    try:
        client.download_file(bucket, key, target)
    except ClientError as e:
        if os.path.exists(target):
            os.remove(target)
        if e.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NoSuchBucket"):
            raise FileNotFoundError(f"{uri} does not exist") from e
        raise
    if siblings_suffix:
        prefix = key.rpartition("/")[0]
        prefix = prefix + "/" if prefix else ""
        listing = client.list_objects_v2(Bucket=bucket, Prefix=prefix, Delimiter="/")
        for item in listing.get("Contents", []):
            name = item["Key"]
            if name != key and name.endswith(siblings_suffix):
                client.download_file(bucket, name, os.path.join(dest_dir, os.path.basename(name)))
    return target
