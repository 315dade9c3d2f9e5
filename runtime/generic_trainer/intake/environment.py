"""The environment, read here at the edge and nowhere below: what the storage helpers need.

`storage_settings(environ)` turns $GENERIC_TRAINER_GCS_TIMEOUT, $STORAGE_EMULATOR_HOST and
$GENERIC_TRAINER_MINIO_ENDPOINT into the `StorageSettings` a request carries down. A malformed
timeout falls back to the default here; train and tune refuse it first (request.check_gcs_timeout,
exit 2).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from generic_trainer.artifacts.storage_settings import (
    DEFAULT_GCS_TIMEOUT,
    DEFAULT_MINIO_ENDPOINT,
    EMULATOR_ENV,
    GCS_TIMEOUT_ENV,
    MINIO_ENDPOINT_ENV,
    StorageSettings,
)


def storage_settings(environ: Mapping[str, str]) -> StorageSettings:
    """The storage settings of this process's environment."""
    try:
        seconds = float(environ.get(GCS_TIMEOUT_ENV) or DEFAULT_GCS_TIMEOUT)
    except ValueError:
        seconds = DEFAULT_GCS_TIMEOUT
    if not (math.isfinite(seconds) and seconds > 0):
        seconds = DEFAULT_GCS_TIMEOUT
    return StorageSettings(
        gcs_timeout=seconds,
        emulator_host=environ.get(EMULATOR_ENV) or None,
        minio_endpoint=environ.get(MINIO_ENDPOINT_ENV) or DEFAULT_MINIO_ENDPOINT,
    )
