"""The declaration of `vertex-job`: a verb without a KFP component (see options.py).

Its flags describe a Vertex AI CustomJob of the trainer image ("job"), its scheduling, network,
encryption and extra pools ("scheduling, network, encryption and pools": `PRODUCTION`, which the
Vertex pipeline's command line takes too, pipelines/vertex_multiworker_pipeline.py), how it is run
("run") and, after `--`, the container's own arguments. vertex_request.py builds its request from
them; vertex_production.py checks the production group.
"""

from __future__ import annotations

import argparse

from generic_trainer.intake.options import Group, Option, Verb

DEFAULT_MACHINE_TYPE = "n1-standard-4"
SCHEDULING_STRATEGIES = ("STANDARD", "SPOT", "FLEX_START", "ON_DEMAND")
# Vertex AI's Reduction Server (worker pool 2): all-reduce for NCCL GPU workers.
REDUCTION_SERVER_IMAGE = "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"
DEFAULT_REDUCTION_SERVER_MACHINE_TYPE = "n1-highcpu-16"

JOB = Group(
    "job",
    (
        Option("project", help="Google Cloud project"),
        Option("region", help="Vertex AI region, e.g. us-central1"),
        Option("image", help="the generic-trainer image (e.g. the one cloudbuild.yaml pushed)"),
        Option(
            "replica_count",
            default="1",
            metavar="N",
            help="replicas: 1 chief + N-1 workers (default 1)",
        ),
        Option(
            "machine_type", default=DEFAULT_MACHINE_TYPE, help=f"default {DEFAULT_MACHINE_TYPE}"
        ),
        Option("accelerator_type", help="e.g. NVIDIA_TESLA_T4, NVIDIA_L4 (default: none)"),
        Option(
            "accelerator_count",
            metavar="K",
            help="accelerators per replica (default 1 with a type)",
        ),
        Option("boot_disk_size_gb", default="100", metavar="GB"),
        Option(
            "base_output_dir",
            metavar="GS_URI",
            help="gs:// dir; Vertex sets AIP_MODEL_DIR=<dir>/model, AIP_CHECKPOINT_DIR, "
            "AIP_TENSORBOARD_LOG_DIR",
        ),
        Option("service_account", metavar="EMAIL", help="the identity the replicas run as"),
        Option(
            "tensorboard",
            metavar="RESOURCE",
            help="Vertex AI TensorBoard (projects/P/locations/R/tensorboards/ID) to stream the "
            "logs to",
        ),
        Option("display_name", help="job name in the console (default generic-trainer-<verb>)"),
        Option(
            "env",
            action="append",
            metavar="NAME=VALUE",
            help="container environment (repeatable)",
        ),
        Option(
            "restart_job_on_worker_restart",
            action="store_true",
            help="restart the whole job when a worker restarts (multi-worker jobs resume from "
            "checkpoints)",
        ),
    ),
)

_SCHEDULING = (
    Option(
        "scheduling_strategy",
        metavar="STRATEGY",
        help=f"{', '.join(SCHEDULING_STRATEGIES)}: SPOT runs on Spot VMs (cheaper, preemptible: "
        "the trainer resumes from its backup); FLEX_START waits for scarce GPUs (see "
        "--max-wait-duration)",
    ),
    Option(
        "max_wait_duration",
        metavar="DURATION",
        help="how long the job may wait for its machines, e.g. 2h (0: no limit; Vertex default "
        "1 day)",
    ),
    Option(
        "timeout",
        metavar="DURATION",
        help="the job's longest run, e.g. 3600, 90m, 12h, 7d (Vertex default 7 days)",
    ),
)
_NETWORK = (
    Option(
        "network",
        metavar="NAME",
        help="VPC network to peer with: projects/PROJECT_NUMBER/global/networks/NAME",
    ),
    Option(
        "reserved_ip_range",
        action="append",
        metavar="NAME",
        help="reserved IP range of --network to deploy in (repeatable)",
    ),
    Option("label", action="append", metavar="KEY=VALUE", help="job label (repeatable)"),
    Option(
        "encryption_spec_key_name",
        metavar="KMS_KEY",
        help="CMEK: projects/P/locations/REGION/keyRings/R/cryptoKeys/K (in the job's region)",
    ),
    Option(
        "persistent_resource_id", metavar="ID", help="run on this Vertex AI persistent resource"
    ),
)
_POOLS = (
    Option(
        "chief_machine_type",
        metavar="TYPE",
        help="worker pool 0's machine (default --machine-type)",
    ),
    Option(
        "chief_accelerator_type",
        metavar="TYPE",
        help="pool 0's accelerator (default the workers'; 'none' for a CPU chief)",
    ),
    Option(
        "chief_accelerator_count", metavar="K", help="pool 0's accelerators (default the workers')"
    ),
    Option(
        "reduction_server_count",
        metavar="N",
        help="Reduction Server replicas in worker pool 2 (GPU workers, --replica-count >= 2)",
    ),
    Option(
        "reduction_server_machine_type",
        metavar="TYPE",
        help=f"their machine (default {DEFAULT_REDUCTION_SERVER_MACHINE_TYPE})",
    ),
    Option("reduction_server_image", metavar="IMAGE", help=f"default {REDUCTION_SERVER_IMAGE}"),
    Option(
        "allow_unknown_machine_type",
        action="store_true",
        help="skip the check of machine types and accelerators against the known families",
    ),
)
# vertex-job's production options (vertex_production.production_options checks them).
PRODUCTION = Group("scheduling, network, encryption and pools", _SCHEDULING + _NETWORK + _POOLS)

RUN = Group(
    "run",
    (
        Option(
            "dry_run",
            action="store_true",
            help="print the CustomJob request as JSON; submit nothing",
        ),
        Option(
            "wait",
            action="store_true",
            help="block until the job ends (default: return once created)",
        ),
        Option("log_level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR")),
        Option(
            "container_args",
            positional=True,
            nargs=argparse.REMAINDER,
            metavar="-- [train|tune] ARGS",
            help="the container's generic-trainer arguments (verb train when none is given)",
        ),
    ),
)

VERTEX_JOB = Verb(
    "vertex-job",
    help="run the trainer image as a Vertex AI custom job (chief + workers)",
    description="`generic-trainer vertex-job`: run the trainer image as a Vertex AI CustomJob, "
    "with no pipeline. Worker pool 0 is the chief, pool 1 the other replicas; everything after "
    "`--` is passed to the container's generic-trainer.",
    groups=(JOB, PRODUCTION, RUN),
    epilog="Example: generic-trainer vertex-job --project my-proj --region us-central1 --image "
    "IMAGE --replica-count 2 --base-output-dir gs://my-bucket/runs/1 --dry-run -- --examples "
    "gs://my-bucket/data --module-file gs://my-bucket/module.py --train-steps 1000",
)
