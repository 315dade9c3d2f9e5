"""How the runtime reaches remote storage: read once from the environment at the edge
(intake/environment.py) and handed down to the storage helpers, which read no environment."""

from __future__ import annotations

import dataclasses

GCS_TIMEOUT_ENV = "GENERIC_TRAINER_GCS_TIMEOUT"
DEFAULT_GCS_TIMEOUT = 20.0  # seconds a Cloud Storage operation retries before it fails
DEFAULT_GCS_ENDPOINT = "https://storage.googleapis.com"
EMULATOR_ENV = "STORAGE_EMULATOR_HOST"
MINIO_ENDPOINT_ENV = "GENERIC_TRAINER_MINIO_ENDPOINT"
DEFAULT_MINIO_ENDPOINT = "http://minio-service.kubeflow:9000"


@dataclasses.dataclass(frozen=True)
class StorageSettings:
    """Seconds a Cloud Storage download may retry, the Cloud Storage emulator (anonymous client) if
    any,
    and the endpoint of minio:// URIs."""

    gcs_timeout: float = DEFAULT_GCS_TIMEOUT
    emulator_host: str | None = None
    minio_endpoint: str = DEFAULT_MINIO_ENDPOINT

    @property
    def gcs_endpoint(self) -> str:
        """The Cloud Storage endpoint the client talks to (the emulator's when there is one)."""
        return self.emulator_host or DEFAULT_GCS_ENDPOINT


DEFAULT_SETTINGS = (
    StorageSettings()
)  # the defaults, for a caller with no environment of its own (tests)
