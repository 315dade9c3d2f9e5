"""What `doctor` checks, resolved at the edge (intake/doctor_request.py builds it; nothing below
reads the environment)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from generic_trainer.artifacts.storage_settings import StorageSettings
from generic_trainer.fit.cluster import PREFETCH_ENV

# The environment variables the checks read: GPUs (PATH for nvidia-smi, CUDA_VISIBLE_DEVICES), the
# library path, the cluster, prefetching to the GPU.
ENVIRONMENT = (
    "PATH",
    "CUDA_VISIBLE_DEVICES",
    "LD_LIBRARY_PATH",
    "TF_CONFIG",
    "CLUSTER_SPEC",
    PREFETCH_ENV,
)


@dataclasses.dataclass(frozen=True)
class Place:
    """An input or output of train as given: its flag, the value (a path or URI) and its local
    path."""

    flag: str
    value: str
    local: str


@dataclasses.dataclass(frozen=True)
class DoctorRequest:
    """What `train` with the same flags would read, and how doctor reports it."""

    module_file: str | None
    task: str | None
    keras: str  # as asked: auto, keras3 or tf_keras
    keras_reason: str  # why (the flag, TF_USE_LEGACY_KERAS)
    strategy: str
    accelerator: str
    inputs: tuple[Place, ...]
    outputs: tuple[Place, ...]
    gcs_root: str
    environ: Mapping[str, str]  # ENVIRONMENT's variables that are set
    storage: StorageSettings
    site_packages: str | None  # where the CUDA libraries are looked for (None: TensorFlow's)
    flag_problems: tuple[str, ...] = ()  # what train's own checks say of the flags' values
    json: bool = False
