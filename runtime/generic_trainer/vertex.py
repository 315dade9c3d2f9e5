"""`generic-trainer vertex-job`: run the trainer image as a Vertex AI CustomJob, with no pipeline.

    generic-trainer vertex-job --project P --region R --image IMAGE --replica-count N \\
        --machine-type M [--accelerator-type T --accelerator-count K] \\
        --base-output-dir gs://B/run [--service-account SA] [--dry-run] \\
        -- [train|tune] --examples gs://... --module-file gs://...

Worker pool 0 is the chief (1 replica); with N > 1, worker pool 1 holds the other N-1 workers.
Every replica runs the same image, command (`generic-trainer`) and args. Vertex hands each replica
a CLUSTER_SPEC, and with the base output dir sets AIP_MODEL_DIR / AIP_CHECKPOINT_DIR /
AIP_TENSORBOARD_LOG_DIR, which `train` uses when --model-dir etc. are left out.

A `VerbContract` without a KFP component: its flags are declared in `intake/vertex_options.py`,
its request (`JobOptions`) built by `intake/vertex_request.py`. Builds the job with
google-cloud-aiplatform (`pip install 'generic-trainer[pipelines]'`; it is not in the runtime
image) and submits it, or with `--dry-run` prints the CustomJob that would be sent.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from generic_trainer.errors import UserInputError
from generic_trainer.intake.container_args import loggable_args
from generic_trainer.intake.contract import VerbContract
from generic_trainer.intake.vertex_options import REDUCTION_SERVER_IMAGE, VERTEX_JOB
from generic_trainer.intake.vertex_request import JobOptions, build_vertex_job_request

__all__ = ["REDUCTION_SERVER_IMAGE", "VERB", "JobOptions", "loggable_args"]

log = logging.getLogger(__name__)

ENTRYPOINT = "generic-trainer"
DRY_RUN_NAME = "DRY-RUN"
# What the verb prints: the create request (--dry-run) or the created job's name and console URL.
JobResult = dict[str, Any]


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


def describe(options: JobOptions) -> list[str]:
    """The log line that says which job will be created (the container's secrets masked)."""
    accelerators = (
        f" + {options.accelerator_count}x {options.accelerator_type}"
        if options.accelerator_type
        else ""
    )
    return [
        f"{'dry run (nothing is sent)' if options.dry_run else 'submitting'} "
        f"{options.display_name}: {options.replica_count} replica(s) of {options.image} on "
        f"{options.machine_type}{accelerators}, args "
        + " ".join(loggable_args(options.container_args))
    ]


def run(
    options: JobOptions, before_publish: Callable[[JobResult], None] | None = None
) -> JobResult:
    """Send the job (or with --dry-run, record what would be sent).

    Args:
        options: the built request.
        before_publish: unused: the verb has no KFP component and publishes nothing.

    Returns:
        The create request (dry run) or the created job's `name` and `console` URL.

    Raises:
        UserInputError: google-cloud-aiplatform missing, no credentials, or Vertex AI refused
            the job.
    """
    if options.dry_run:
        return json.loads(json.dumps(dry_run(options), sort_keys=True))
    job = submit(options, wait=options.wait)
    return {"name": job.resource_name, "console": job._dashboard_uri()}


VERB: VerbContract[JobOptions, JobResult] = VerbContract(
    VERTEX_JOB,
    build_vertex_job_request,
    describe,
    run,
    lambda options, result: ({}, None),
    lambda result: result,
)
