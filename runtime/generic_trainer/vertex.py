"""`generic-trainer vertex-job`: run the trainer image as a Vertex AI CustomJob, with no pipeline.

    generic-trainer vertex-job --project P --region R --image IMAGE --replica-count N \\
        --machine-type M [--accelerator-type T --accelerator-count K] --base-output-dir gs://B/run
        \\ [--service-account SA] [--dry-run] -- [train|tune] --examples gs://... --module-file
        gs://...

Worker pool 0 is the chief (1 replica); with N > 1, worker pool 1 holds the other N-1 workers.
Every replica runs the same image, command (`generic-trainer`) and args. Vertex hands each replica
a CLUSTER_SPEC, and with the base output dir sets AIP_MODEL_DIR / AIP_CHECKPOINT_DIR /
AIP_TENSORBOARD_LOG_DIR, which `train` uses when --model-dir etc. are left out.

Builds the job with google-cloud-aiplatform (`pip install 'generic-trainer[pipelines]'`; it is not
in the runtime image) and submits it, or with `--dry-run` prints the CustomJob that would be sent.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from generic_trainer.errors import UserInputError
from generic_trainer.intake.container_args import (
    check_container_args,
    container_args,
    loggable_args,
)
from generic_trainer.intake.vertex_options import (
    DEFAULT_MACHINE_TYPE,
    DEFAULT_REDUCTION_SERVER_MACHINE_TYPE,
    MAX_ACCELERATORS,
    MAX_REPLICAS,
    REDUCTION_SERVER_IMAGE,
    add_production_flags,
    count,
    production_options,
)

log = logging.getLogger(__name__)

ENTRYPOINT = "generic-trainer"
DRY_RUN_NAME = "DRY-RUN"
# Vertex AI's Reduction Server (worker pool 2): all-reduce for NCCL GPU workers.


@dataclasses.dataclass(frozen=True)
class JobOptions:
    """Everything a Vertex CustomJob of the trainer needs, validated."""

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
    # Production options (see production_options): scheduling, networking, encryption, pools.
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

    @property
    def staging_bucket(self) -> str:
        """The bucket of the base output dir (the SDK wants one)."""
        return "gs://" + self.base_output_dir[len("gs://") :].split("/", 1)[0]


MAX_BOOT_DISK_GB = 65536  # the largest persistent disk


def _env(pairs: Sequence[str] | None) -> dict[str, str]:
    env = {}
    for pair in pairs or ():
        name, sep, value = pair.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise UserInputError("--env", f"expected NAME=VALUE, got {pair!r}")
        env[name] = value
    return env


def options_from_args(ns: argparse.Namespace) -> JobOptions:
    """Validate the parsed `vertex-job` flags into JobOptions."""
    for flag in ("project", "region", "image", "base_output_dir"):
        if not getattr(ns, flag):
            raise UserInputError(f"--{flag.replace('_', '-')}", "required")
    if not ns.base_output_dir.startswith("gs://") or len(ns.base_output_dir) <= len("gs://"):
        raise UserInputError(
            "--base-output-dir", f"expected a gs:// URI, got {ns.base_output_dir!r}"
        )
    replicas = count("--replica-count", ns.replica_count, 1, MAX_REPLICAS)
    accelerator_count = count(
        "--accelerator-count",
        ns.accelerator_count,
        1 if ns.accelerator_type else 0,
        MAX_ACCELERATORS,
    )
    if not ns.accelerator_type and accelerator_count:
        raise UserInputError(
            "--accelerator-count", "given without --accelerator-type (e.g. NVIDIA_TESLA_T4)"
        )
    if ns.tensorboard and not ns.service_account:
        raise UserInputError(
            "--tensorboard",
            "Vertex AI TensorBoard needs --service-account (the job's identity "
            "must be allowed to write to the TensorBoard instance)",
        )
    args = container_args(ns.container_args)
    env = _env(ns.env)
    check_container_args(args, env)
    return JobOptions(
        project=ns.project,
        region=ns.region,
        image=ns.image,
        base_output_dir=ns.base_output_dir.rstrip("/"),
        container_args=args,
        replica_count=replicas,
        machine_type=ns.machine_type or DEFAULT_MACHINE_TYPE,
        accelerator_type=ns.accelerator_type or None,
        accelerator_count=accelerator_count,
        boot_disk_size_gb=count("--boot-disk-size-gb", ns.boot_disk_size_gb, 10, MAX_BOOT_DISK_GB),
        service_account=ns.service_account or None,
        tensorboard=ns.tensorboard or None,
        display_name=ns.display_name or f"generic-trainer-{args[0]}",
        env=env,
        restart_job_on_worker_restart=bool(ns.restart_job_on_worker_restart),
        **production_options(ns, replicas, ns.accelerator_type or None, accelerator_count),
    )


def worker_pool_specs(options: JobOptions) -> list[dict[str, Any]]:
    """Pool 0: the chief (1 replica); pool 1: the other replica_count-1 workers. Same machine, image
    and args."""
    machine: dict[str, Any] = {"machine_type": options.machine_type}
    if options.accelerator_type:
        machine["accelerator_type"] = options.accelerator_type
        machine["accelerator_count"] = options.accelerator_count
    container: dict[str, Any] = {
        "image_uri": options.image,
        "command": [ENTRYPOINT],
        "args": list(options.container_args),
    }
    if options.env:
        container["env"] = [{"name": k, "value": v} for k, v in options.env.items()]
    disk = {"boot_disk_type": "pd-ssd", "boot_disk_size_gb": options.boot_disk_size_gb}
    worker = {
        "machine_spec": machine,
        "replica_count": 1,
        "container_spec": container,
        "disk_spec": disk,
    }
    pools = [json.loads(json.dumps(worker))]
    if options.chief_machine_type:
        pools[0]["machine_spec"] = _machine_spec(
            options.chief_machine_type,
            options.chief_accelerator_type,
            options.chief_accelerator_count,
        )
    if options.replica_count > 1:
        pools.append({**json.loads(json.dumps(worker)), "replica_count": options.replica_count - 1})
    if options.reduction_server_count:
        pools.append(
            {
                "machine_spec": {"machine_type": options.reduction_server_machine_type},
                "replica_count": options.reduction_server_count,
                "container_spec": {"image_uri": options.reduction_server_image},
            }
        )
    return pools


def _machine_spec(
    machine_type: str, accelerator_type: str | None, accelerator_count: int
) -> dict[str, Any]:
    spec: dict[str, Any] = {"machine_type": machine_type}
    if accelerator_type:
        spec["accelerator_type"] = accelerator_type
        spec["accelerator_count"] = accelerator_count
    return spec


def submit_kwargs(options: JobOptions) -> dict[str, Any]:
    """Arguments of `CustomJob.submit` / `run` for these options."""
    kwargs: dict[str, Any] = {
        "restart_job_on_worker_restart": options.restart_job_on_worker_restart
    }
    if options.service_account:
        kwargs["service_account"] = options.service_account
    if options.tensorboard:
        kwargs["tensorboard"] = options.tensorboard
    if options.network:
        kwargs["network"] = options.network
    if options.timeout:
        kwargs["timeout"] = options.timeout
    if options.max_wait_duration is not None:
        kwargs["max_wait_duration"] = options.max_wait_duration
    if options.scheduling_strategy:
        from google.cloud.aiplatform.compat.types import custom_job

        kwargs["scheduling_strategy"] = custom_job.Scheduling.Strategy[options.scheduling_strategy]
    return kwargs


def _aiplatform():
    try:
        from google.cloud import aiplatform
    except ImportError:
        raise UserInputError(
            "vertex-job",
            "needs google-cloud-aiplatform, which the runtime image leaves out: run it where you "
            "launch jobs, after `pip install 'generic-trainer[pipelines]'` (or "
            "google-cloud-aiplatform)",
        ) from None
    return aiplatform


def build_job(options: JobOptions, credentials: Any = None) -> Any:
    """A `google.cloud.aiplatform.CustomJob` for `options` (nothing is sent yet)."""
    aiplatform = _aiplatform()
    from google.auth import exceptions as auth_exceptions

    try:
        job = aiplatform.CustomJob(
            display_name=options.display_name,
            worker_pool_specs=worker_pool_specs(options),
            base_output_dir=options.base_output_dir,
            staging_bucket=options.staging_bucket,
            project=options.project,
            location=options.region,
            credentials=credentials,
            labels=dict(options.labels) or None,
            encryption_spec_key_name=options.encryption_spec_key_name,
            persistent_resource_id=options.persistent_resource_id,
        )
    except auth_exceptions.DefaultCredentialsError as e:
        raise UserInputError(
            "GOOGLE_APPLICATION_CREDENTIALS",
            f"no Google Cloud credentials: run `gcloud auth "
            f"application-default login` or point it at a key "
            f"file ({e})",
        ) from None
    if options.reserved_ip_ranges:  # CustomJob.submit has no argument for them
        job.job_spec.reserved_ip_ranges.extend(options.reserved_ip_ranges)
    return job


class _RecordingJobClient:
    """Stands in for the Vertex job service in a dry run: keeps the request, sends nothing."""

    def __init__(self) -> None:
        self.request: dict[str, Any] | None = None

    def create_custom_job(self, parent: str, custom_job: Any, timeout: float | None = None) -> Any:
        from google.protobuf import json_format

        self.request = {
            "parent": parent,
            "customJob": json_format.MessageToDict(type(custom_job).pb(custom_job)),
        }
        created = type(custom_job).deserialize(type(custom_job).serialize(custom_job))
        created.name = f"{parent}/customJobs/{DRY_RUN_NAME}"
        return created


def dry_run(options: JobOptions) -> dict[str, Any]:
    """The create request `submit` would send (parent and CustomJob, as the REST API's JSON),
    sending nothing.

    The SDK's own submit runs, with its job service swapped for a recorder, so this is exactly
    what a real submission sends.
    """
    from google.auth.credentials import AnonymousCredentials

    job = build_job(options, credentials=AnonymousCredentials())
    recorder = _RecordingJobClient()
    job.api_client = recorder
    logging.disable(
        logging.INFO
    )  # the SDK's "CustomJob created ... View Custom Job" lines would name a fake job
    try:
        job.submit(**submit_kwargs(options))
    finally:
        logging.disable(logging.NOTSET)
    assert recorder.request is not None
    return recorder.request


def submit(options: JobOptions, wait: bool = False) -> Any:
    """Create the CustomJob on Vertex AI (and with `wait`, block until it ends); returns the job."""
    from google.api_core import exceptions as api_exceptions

    job = build_job(options)
    log.info(
        "submitting %s: %d replica(s) of %s on %s%s, args %s",
        options.display_name,
        options.replica_count,
        options.image,
        options.machine_type,
        f" + {options.accelerator_count}x {options.accelerator_type}"
        if options.accelerator_type
        else "",
        " ".join(loggable_args(options.container_args)),
    )
    try:
        if wait:
            job.run(sync=True, **submit_kwargs(options))
        else:
            job.submit(**submit_kwargs(options))
    except api_exceptions.GoogleAPICallError as e:
        raise UserInputError(
            "Vertex AI", f"creating the custom job failed: {type(e).__name__}: {e.message}"
        ) from None
    return job


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The `vertex-job` sub-command's parser."""
    p = sub.add_parser(
        "vertex-job",
        help="run the trainer image as a Vertex AI custom job (chief + workers)",
        description=__doc__.split("\n\n")[0]
        + " Worker pool 0 is the chief, pool 1 the other replicas; "
        "everything after `--` is passed to the container's generic-trainer.",
        epilog="Example: generic-trainer vertex-job --project my-proj --region us-central1 --image "
        "IMAGE "
        "--replica-count 2 --base-output-dir gs://my-bucket/runs/1 --dry-run -- --examples "
        "gs://my-bucket/data --module-file gs://my-bucket/module.py --train-steps 1000",
    )
    g = p.add_argument_group("job")
    g.add_argument("--project", help="Google Cloud project")
    g.add_argument("--region", help="Vertex AI region, e.g. us-central1")
    g.add_argument(
        "--image", help="the generic-trainer image (e.g. the one cloudbuild.yaml pushed)"
    )
    g.add_argument(
        "--replica-count",
        default="1",
        metavar="N",
        help="replicas: 1 chief + N-1 workers (default 1)",
    )
    g.add_argument(
        "--machine-type", default=DEFAULT_MACHINE_TYPE, help=f"default {DEFAULT_MACHINE_TYPE}"
    )
    g.add_argument("--accelerator-type", help="e.g. NVIDIA_TESLA_T4, NVIDIA_L4 (default: none)")
    g.add_argument(
        "--accelerator-count", metavar="K", help="accelerators per replica (default 1 with a type)"
    )
    g.add_argument("--boot-disk-size-gb", default="100", metavar="GB")
    g.add_argument(
        "--base-output-dir",
        metavar="GS_URI",
        help="gs:// dir; Vertex sets AIP_MODEL_DIR=<dir>/model, AIP_CHECKPOINT_DIR, "
        "AIP_TENSORBOARD_LOG_DIR",
    )
    g.add_argument("--service-account", metavar="EMAIL", help="the identity the replicas run as")
    g.add_argument(
        "--tensorboard",
        metavar="RESOURCE",
        help="Vertex AI TensorBoard (projects/P/locations/R/tensorboards/ID) to stream the logs to",
    )
    g.add_argument(
        "--display-name", help="job name in the console (default generic-trainer-<verb>)"
    )
    g.add_argument(
        "--env", action="append", metavar="NAME=VALUE", help="container environment (repeatable)"
    )
    g.add_argument(
        "--restart-job-on-worker-restart",
        action="store_true",
        help="restart the whole job when a worker restarts (multi-worker jobs resume from "
        "checkpoints)",
    )
    add_production_flags(p)
    r = p.add_argument_group("run")
    r.add_argument(
        "--dry-run", action="store_true", help="print the CustomJob request as JSON; submit nothing"
    )
    r.add_argument(
        "--wait",
        action="store_true",
        help="block until the job ends (default: return once created)",
    )
    r.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    p.add_argument(
        "container_args",
        nargs=argparse.REMAINDER,
        metavar="-- [train|tune] ARGS",
        help="the container's generic-trainer arguments (verb train when none is given)",
    )
    return p


def main(ns: argparse.Namespace) -> int:
    """Run the `vertex-job` verb from its parsed flags."""
    options = options_from_args(ns)
    if ns.dry_run:
        print(json.dumps(dry_run(options), indent=2, sort_keys=True))
        return 0
    job = submit(options, wait=ns.wait)
    print(json.dumps({"name": job.resource_name, "console": job._dashboard_uri()}, indent=2))
    return 0
