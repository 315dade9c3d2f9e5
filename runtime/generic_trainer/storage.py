"""Where things live: URIs to local paths, Cloud Storage downloads, whole-or-nothing publishing.

A leaf module: imports nothing of generic_trainer's, and google-cloud-storage only when a
download is asked for. KFP hands the container URIs; on Vertex `gs://b/x` is mounted at
`/gcs/b/x` (Cloud Storage FUSE). The mount root is a parameter so tests map it to a temp dir.
"""

from __future__ import annotations

import os
import shutil
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


def _gcs_client():  # pragma: no cover - trivial
    from google.cloud import storage

    if os.environ.get("STORAGE_EMULATOR_HOST"):
        return storage.Client.create_anonymous_client()
    return storage.Client()


def download_gcs(uri: str, dest_dir: str, siblings_suffix: str | None = None) -> str:
    """Download the object `uri` into `dest_dir` and return its local path.

    With `siblings_suffix` (e.g. ".py"), objects with that suffix in the same "folder" come too,
    so a module that imports a file next to it works. Raises FileNotFoundError when `uri` is absent.
    """
    from google.api_core import exceptions

    bucket_name, name = split_gcs_uri(uri)
    client = _gcs_client()
    bucket = client.bucket(bucket_name)
    os.makedirs(dest_dir, exist_ok=True)
    target = os.path.join(dest_dir, os.path.basename(name))
    try:
        bucket.blob(name).download_to_filename(target)
    except exceptions.NotFound as e:
        if os.path.exists(target):
            os.remove(target)
        raise FileNotFoundError(f"{uri} does not exist") from e
    if siblings_suffix:
        prefix = name.rpartition("/")[0]
        prefix = prefix + "/" if prefix else ""
        for blob in client.list_blobs(bucket_name, prefix=prefix, delimiter="/"):
            if blob.name != name and blob.name.endswith(siblings_suffix):
                blob.download_to_filename(os.path.join(dest_dir, os.path.basename(blob.name)))
    return target


# S3-compatible stores: s3:// (AWS S3, or any endpoint in $AWS_ENDPOINT_URL_S3 / $AWS_ENDPOINT_URL, which boto3
# reads itself) and minio:// (KFP's on-cluster MinIO, at $GENERIC_TRAINER_MINIO_ENDPOINT or KFP's default service).
S3_PREFIXES = ("s3://", "minio://")
MINIO_ENDPOINT_ENV = "GENERIC_TRAINER_MINIO_ENDPOINT"
DEFAULT_MINIO_ENDPOINT = "http://minio-service.kubeflow:9000"


def is_s3_uri(uri: str) -> bool:
    """An s3:// or minio:// URI."""
    return uri.startswith(S3_PREFIXES)


def split_s3_uri(uri: str) -> tuple[str, str]:
    """`s3://bucket/a/b` (or minio://) -> ("bucket", "a/b")."""
    bucket, _, key = uri.split("://", 1)[1].partition("/")
    return bucket, key


def download_s3(uri: str, dest_dir: str, siblings_suffix: str | None = None) -> str:
    """Download the object `uri` (s3:// or minio://) into `dest_dir` with boto3; returns its local path.

    With `siblings_suffix`, objects with that suffix in the same "folder" come too. Raises FileNotFoundError when
    `uri` is absent, ImportError when boto3 is not installed (the image leaves it out; see the README).
    """
    import boto3
    from botocore.exceptions import ClientError

    endpoint = None
    if uri.startswith("minio://"):
        endpoint = os.environ.get(MINIO_ENDPOINT_ENV) or DEFAULT_MINIO_ENDPOINT
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
