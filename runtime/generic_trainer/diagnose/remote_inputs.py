"""Whether each input train would read is there: local paths exist, gs:// / s3:// inputs can be
listed.

Train reads its inputs through the mount (`gs://b/x` at `/gcs/b/x`: Cloud Storage FUSE on Vertex AI
and KFP on GKE); only the module file is downloaded when it is not mounted. So a gs:// input is
listed through the mount when it is there, else through Cloud Storage's API (google-cloud-storage,
imported here only), which says whether it exists at all.
"""

from __future__ import annotations

import os

from generic_trainer.artifacts import storage
from generic_trainer.artifacts.storage_settings import StorageSettings
from generic_trainer.diagnose.report import Check, fail, ok
from generic_trainer.diagnose.request import Place

SHOWN = 3  # names shown of a listing
MOUNT_FIX = (
    "mount the bucket with Cloud Storage FUSE (Vertex AI and KFP on GKE mount gs:// at /gcs), "
    "or pass --gcs-root where it is mounted"
)


def input_check(place: Place, gcs_root: str, settings: StorageSettings) -> Check:
    """One input: listed through its local path (or mount), else through the store's API."""
    name = f"input {place.flag}"
    remote = storage.is_gcs_uri(place.value) or storage.is_s3_uri(place.value)
    if os.path.exists(place.local):
        where = f"mounted at {place.local}" if remote else place.local
        return ok(name, f"{place.value}: {where} ({_local_listing(place.local)})")
    if not remote:
        if (
            place.flag == "--module-file"
            and not place.value.endswith(".py")
            and os.sep not in place.value
        ):
            return ok(name, f"{place.value}: a dotted module name (imported from the Python path)")
        return fail(name, f"{place.value} does not exist", f"check {place.flag}")
    try:
        names = _list_remote(place.value, settings)
    except Exception as e:  # noqa: BLE001 - any client or network error is what the check reports
        detail = " ".join(str(e).split())[:300]
        return fail(
            name,
            f"{place.value} cannot be listed ({type(e).__name__}: {detail})",
            "check the URI, the credentials and the network"
            + (
                f" (the endpoint is {settings.gcs_endpoint})"
                if storage.is_gcs_uri(place.value)
                else ""
            ),
        )
    if not names:
        return fail(name, f"nothing at {place.value}", f"check {place.flag}")
    listed = f"{', '.join(names[:SHOWN])}{', ...' if len(names) > SHOWN else ''}"
    if place.flag == "--module-file":
        return ok(name, f"{place.value}: listed ({listed}); not mounted, train downloads it")
    return fail(
        name,
        f"{place.value} is in the store ({listed}) but not mounted at {place.local}: train reads "
        f"{place.flag} through the mount",
        MOUNT_FIX,
    )


def _local_listing(path: str) -> str:
    if not os.path.isdir(path):
        return f"a file of {os.path.getsize(path)} bytes"
    try:
        names = sorted(os.listdir(path))
    except OSError as e:
        return f"not listable: {e.strerror}"
    return f"{len(names)} entries" + (f": {', '.join(names[:SHOWN])}" if names else "")


def _list_remote(uri: str, settings: StorageSettings) -> list[str]:
    """Up to SHOWN + 1 object names at `uri` (the object itself, or under it as a folder)."""
    if storage.is_gcs_uri(uri):
        return _list_gcs(uri, settings)
    return _list_s3(uri, settings)


def _list_gcs(uri: str, settings: StorageSettings) -> list[str]:
    from google.api_core.retry import Retry
    from google.cloud import storage as gcs

    bucket, name = storage.split_gcs_uri(uri)
    client = gcs.Client.create_anonymous_client() if settings.emulator_host else gcs.Client()
    blobs = client.list_blobs(
        bucket,
        prefix=name,
        max_results=SHOWN + 1,
        timeout=settings.gcs_timeout,
        retry=Retry(timeout=settings.gcs_timeout),
    )
    return _under(name, [b.name for b in blobs])


def _list_s3(uri: str, settings: StorageSettings) -> list[str]:
    import boto3

    endpoint = settings.minio_endpoint if uri.startswith("minio://") else None
    bucket, key = storage.split_s3_uri(uri)
    listing = boto3.client("s3", endpoint_url=endpoint).list_objects_v2(
        Bucket=bucket, Prefix=key, MaxKeys=SHOWN + 1
    )
    return _under(key, [item["Key"] for item in listing.get("Contents", [])])


def _under(name: str, names: list[str]) -> list[str]:
    """The names that are `name` itself or lie under it as a folder (all of a bucket's for "")."""
    folder = name.rstrip("/") + "/"
    return [n for n in names if not name or n == name or n.startswith(folder)]
