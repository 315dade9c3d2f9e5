"""The request of `vertex-job`: a Vertex AI CustomJob of the trainer image, validated.

No Google Cloud library: the flags (vertex_options.VERTEX_JOB) are checked here, the production
group by vertex_production.py, the machines by vertex_machines.py and the container's arguments by
container_args.py (with the train/tune parser, reading no file).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from generic_trainer.artifacts.kfp_io import KfpOutputs
from generic_trainer.errors import UserInputError
from generic_trainer.intake.container_args import check_container_args, container_args
from generic_trainer.intake.vertex_options import (
    DEFAULT_MACHINE_TYPE,
    DEFAULT_REDUCTION_SERVER_MACHINE_TYPE,
    REDUCTION_SERVER_IMAGE,
)
from generic_trainer.intake.vertex_production import (
    MAX_ACCELERATORS,
    MAX_REPLICAS,
    count,
    production_options,
)

MAX_BOOT_DISK_GB = 65536  # the largest persistent disk


@dataclasses.dataclass(frozen=True)
class JobOptions:
    """Everything a Vertex CustomJob of the trainer needs, validated, and how to run it."""

    project: str
    region: str
    image: str
    base_output_dir: str
    container_args: tuple[str, ...]  # after the entrypoint: the verb, then its flags
    replica_count: int = 1
    machine_type: str = DEFAULT_MACHINE_TYPE
    accelerator_type: str | None = None
    accelerator_count: int = 0
    boot_disk_size_gb: int = 100
    service_account: str | None = None
    tensorboard: str | None = None
    display_name: str = "generic-trainer"
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    restart_job_on_worker_restart: bool = False
    # Production options (see vertex_production): scheduling, networking, encryption, pools.
    scheduling_strategy: str | None = None  # SPOT, FLEX_START, STANDARD, ON_DEMAND
    max_wait_duration: int | None = None  # seconds to wait for resources (FLEX_START)
    timeout: int | None = None  # seconds the job may run
    network: str | None = None
    reserved_ip_ranges: tuple[str, ...] = ()
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    encryption_spec_key_name: str | None = None
    persistent_resource_id: str | None = None
    chief_machine_type: str | None = None  # None: machine_type
    chief_accelerator_type: str | None = None
    chief_accelerator_count: int = 0
    reduction_server_count: int = 0
    reduction_server_machine_type: str = DEFAULT_REDUCTION_SERVER_MACHINE_TYPE
    reduction_server_image: str = REDUCTION_SERVER_IMAGE
    dry_run: bool = False  # print the create request, send nothing
    wait: bool = False  # block until the job ends

    @property
    def staging_bucket(self) -> str:
        """The bucket of the base output dir (the SDK wants one)."""
        return "gs://" + self.base_output_dir[len("gs://") :].split("/", 1)[0]


def _env(pairs: Sequence[str] | None) -> dict[str, str]:
    env = {}
    for pair in pairs or ():
        name, sep, value = pair.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise UserInputError("--env", f"expected NAME=VALUE, got {pair!r}")
        env[name] = value
    return env


def _required(values: Mapping[str, Any]) -> str:
    """The base output dir, once every required flag is given; raises naming the first missing."""
    for name in ("project", "region", "image", "base_output_dir"):
        if not values.get(name):
            raise UserInputError(f"--{name.replace('_', '-')}", "required")
    base = str(values["base_output_dir"])
    if not base.startswith("gs://") or len(base) <= len("gs://"):
        raise UserInputError("--base-output-dir", f"expected a gs:// URI, got {base!r}")
    return base.rstrip("/")


def _accelerators(values: Mapping[str, Any]) -> tuple[str | None, int]:
    """The workers' accelerator type and count per replica, checked."""
    accelerator_type = values.get("accelerator_type") or None
    accelerator_count = count(
        "--accelerator-count",
        values.get("accelerator_count"),
        1 if accelerator_type else 0,
        MAX_ACCELERATORS,
    )
    if not accelerator_type and accelerator_count:
        raise UserInputError(
            "--accelerator-count", "given without --accelerator-type (e.g. NVIDIA_TESLA_T4)"
        )
    return accelerator_type, accelerator_count


def _identity(values: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The job's service account and its Vertex AI TensorBoard (which needs the account)."""
    service_account = values.get("service_account") or None
    tensorboard = values.get("tensorboard") or None
    if tensorboard and not service_account:
        raise UserInputError(
            "--tensorboard",
            "Vertex AI TensorBoard needs --service-account (the job's identity "
            "must be allowed to write to the TensorBoard instance)",
        )
    return service_account, tensorboard


def build_vertex_job_request(
    values: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    kfp: KfpOutputs | None = None,
) -> JobOptions:
    """The vertex-job request from its raw values.

    Args:
        values: the flags' values (vertex_options.VERTEX_JOB).
        environ: unused: the job's environment is its --env.
        kfp: unused: the verb has no KFP component.

    Returns:
        The job's options, every flag and the container's arguments checked.

    Raises:
        UserInputError: a missing or malformed flag, or container arguments the container would
            refuse, named.
    """
    base = _required(values)
    replicas = count("--replica-count", values.get("replica_count"), 1, MAX_REPLICAS)
    accelerator_type, accelerator_count = _accelerators(values)
    service_account, tensorboard = _identity(values)
    args = container_args(values.get("container_args") or ())
    env = _env(values.get("env"))
    check_container_args(args, env)
    disk = count("--boot-disk-size-gb", values.get("boot_disk_size_gb"), 10, MAX_BOOT_DISK_GB)
    return JobOptions(
        project=str(values["project"]),
        region=str(values["region"]),
        image=str(values["image"]),
        base_output_dir=base,
        container_args=args,
        replica_count=replicas,
        machine_type=values.get("machine_type") or DEFAULT_MACHINE_TYPE,
        accelerator_type=accelerator_type,
        accelerator_count=accelerator_count,
        boot_disk_size_gb=disk,
        service_account=service_account,
        tensorboard=tensorboard,
        display_name=values.get("display_name") or f"generic-trainer-{args[0]}",
        env=env,
        restart_job_on_worker_restart=bool(values.get("restart_job_on_worker_restart")),
        dry_run=bool(values.get("dry_run")),
        wait=bool(values.get("wait")),
        **production_options(values, replicas, accelerator_type, accelerator_count),
    )
