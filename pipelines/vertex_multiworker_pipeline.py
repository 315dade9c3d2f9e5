"""The trainer as a multi-worker Vertex AI custom job inside a Vertex AI pipeline, then evaluate,
infra-validate and, when blessed, upload to Vertex AI Model Registry.

Google Cloud Pipeline Components' `create_custom_training_job_from_component` wraps the trainer
component: the task runs as a Vertex CustomJob whose worker pool 0 is the chief (1 replica) and
worker pool 1 holds the other `replica_count - 1` workers, all with the same image, command and
machine (the chief's machine may differ: `chief_machine_type`); pool 2 can hold Reduction Server
replicas. Vertex gives every replica a CLUSTER_SPEC (and TF_CONFIG); generic-trainer picks
MultiWorkerMirroredStrategy from it, and only the chief writes the model and the executor output.
With `base_output_directory` Vertex sets AIP_MODEL_DIR / AIP_CHECKPOINT_DIR /
AIP_TENSORBOARD_LOG_DIR (the trainer keeps its checkpoints under AIP_CHECKPOINT_DIR/<run>/<task>);
`tensorboard` names a Vertex AI TensorBoard instance to stream the run to. The job options
(scheduling, network, encryption, pools) are those of `generic-trainer vertex-job`, checked the same
way before compiling.

Compile:
    python -m pipelines.vertex_multiworker_pipeline --output vertex_pipeline.yaml --replica-count 3
    \\
        --machine-type n1-standard-8 --accelerator-type NVIDIA_TESLA_T4 --accelerator-count 1 \\
        --base-output-directory gs://BUCKET/generic-trainer [--tensorboard
        projects/P/locations/R/tensorboards/ID] \\ [--scheduling-strategy SPOT --timeout 12h
        --network ... --label team=ml ...]
Then submit the YAML with google-cloud-aiplatform's PipelineJob (see README).
"""

# No `from __future__ import annotations`: kfp reads the pipeline function's annotations as types.
import argparse
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from generic_trainer.intake import vertex_options

from pipelines import components

PIPELINE_NAME = "generic-trainer-vertex-multiworker"
# vertex-job's production options, as custom_job_trainer's keywords.
PRODUCTION_OPTIONS = tuple(o.name for o in vertex_options.PRODUCTION.options)


def job_options(
    replica_count: int,
    machine_type: str,
    accelerator_type: str,
    accelerator_count: int,
    **production: Any,
) -> dict[str, Any]:
    """Validate the production options as `vertex-job` does (same errors); returns JobOptions
    fields (generic_trainer.intake.vertex_request).

    `production` holds flag-style values: durations like "12h", `label` as ["key=value", ...] (or a
    dict), `reserved_ip_range` as a list of names.
    """
    from generic_trainer.intake import vertex_production

    unknown = set(production) - set(PRODUCTION_OPTIONS)
    if unknown:
        raise TypeError(
            f"unknown job options {sorted(unknown)}; expected {', '.join(PRODUCTION_OPTIONS)}"
        )
    if isinstance(production.get("label"), Mapping):
        production["label"] = [f"{k}={v}" for k, v in production["label"].items()]
    values = {"machine_type": machine_type, **production}
    return vertex_production.production_options(
        values,
        replica_count,
        accelerator_type or None,
        accelerator_count if accelerator_type else 0,
    )


def custom_job_trainer(
    replica_count: int = 2,
    machine_type: str = "n1-standard-4",
    accelerator_type: str = "",
    accelerator_count: int = 1,
    base_output_directory: str = "",
    tensorboard: str = "",
    service_account: str = "",
    restart_job_on_worker_restart: bool = False,
    image: str | None = None,
    **production: Any,
) -> Any:
    """The trainer component wrapped as a Vertex CustomJob of `replica_count` replicas (chief +
    workers).

    `production`: vertex-job's scheduling, network, encryption and pool options (see
    PRODUCTION_OPTIONS).
    """
    from google_cloud_pipeline_components.v1.custom_job import (
        create_custom_training_job_from_component,
    )

    if replica_count < 1:
        raise ValueError(f"replica_count must be >= 1, got {replica_count}")
    opts = job_options(
        replica_count, machine_type, accelerator_type, accelerator_count, **production
    )
    kwargs: dict[str, Any] = {}
    if opts.get("timeout"):
        kwargs["timeout"] = f"{opts['timeout']}s"
    if opts.get("max_wait_duration") is not None:
        kwargs["max_wait_duration"] = f"{opts['max_wait_duration']}s"
    if opts.get("scheduling_strategy"):
        kwargs["strategy"] = opts["scheduling_strategy"]
    if opts.get("persistent_resource_id"):
        kwargs["persistent_resource_id"] = opts["persistent_resource_id"]
    job = create_custom_training_job_from_component(
        trainer_for_custom_job(image),
        display_name="generic-trainer",
        replica_count=replica_count,
        machine_type=machine_type,
        accelerator_type=accelerator_type,
        accelerator_count=accelerator_count if accelerator_type else 0,
        base_output_directory=base_output_directory,
        tensorboard=tensorboard,
        service_account=service_account,
        restart_job_on_worker_restart=restart_job_on_worker_restart,
        network=opts.get("network") or "",
        reserved_ip_ranges=list(opts.get("reserved_ip_ranges") or ()) or None,
        labels=dict(opts.get("labels") or {}) or None,
        encryption_spec_key_name=opts.get("encryption_spec_key_name") or "",
        **kwargs,
    )
    _set_pools(job, opts)
    return job


def trainer_for_custom_job(image: str | None = None) -> Any:
    """The trainer component without its `strategy` input, which GCPC's wrapper would merge with the
    custom job's own `strategy` (Vertex's scheduling strategy: STANDARD, SPOT, FLEX_START). The
    trainer then runs with its default
    tf.distribute strategy, auto: MultiWorkerMirroredStrategy from the CLUSTER_SPEC Vertex sets."""
    import yaml
    from google.protobuf import json_format
    from kfp import components as kfp_components

    spec = json_format.MessageToDict(components.trainer(image).pipeline_spec)
    for component in spec["components"].values():
        component["inputDefinitions"]["parameters"].pop("strategy")
    spec["root"]["inputDefinitions"]["parameters"].pop("strategy")
    for task in spec["root"]["dag"]["tasks"].values():
        task["inputs"]["parameters"].pop("strategy")
    return kfp_components.load_component_from_text(yaml.safe_dump(spec))


def _set_pools(job: Any, opts: Mapping[str, Any]) -> None:
    """The chief's own machine (pool 0) and Reduction Server replicas (pool 2), which GCPC's wrapper
    does not offer:
    set in the wrapped component's default worker_pool_specs."""
    if not opts.get("chief_machine_type") and not opts.get("reduction_server_count"):
        return
    pools = job.component_spec.inputs["worker_pool_specs"].default
    if opts.get("chief_machine_type"):
        machine = {"machine_type": opts["chief_machine_type"]}
        if opts.get("chief_accelerator_type"):
            machine.update(
                accelerator_type=opts["chief_accelerator_type"],
                accelerator_count=opts["chief_accelerator_count"],
            )
        pools[0]["machine_spec"] = machine
    if opts.get("reduction_server_count"):
        pools.append(
            {
                "machine_spec": {"machine_type": opts["reduction_server_machine_type"]},
                "replica_count": opts["reduction_server_count"],
                "container_spec": {"image_uri": opts["reduction_server_image"]},
            }
        )


def build_pipeline(evaluate: bool = True, **job_options: Any) -> Any:
    """The pipeline function; `job_options` go to custom_job_trainer (replica_count, machine_type,
    ...).

    With `evaluate` (default) the trained model is evaluated against `eval_config`, infra-validated,
    and uploaded to Vertex AI Model Registry when blessed and `model_display_name` is given.
    """
    from kfp import dsl
    from kfp.dsl import Artifact, Dataset

    from pipelines.penguin_pipeline import upload_if_blessed

    image = job_options.get("image")
    trainer_job = custom_job_trainer(**job_options)
    evaluator_op = components.evaluator(image) if evaluate else None
    infra_validator_op = components.infra_validator(image) if evaluate else None

    @dsl.pipeline(
        name=PIPELINE_NAME,
        description="Train with generic-trainer as a multi-worker Vertex AI custom job.",
    )
    def vertex_multiworker_pipeline(
        examples_uri: str,
        schema_uri: str,
        module_file: str,
        train_args: dict = {"num_steps": 1000},  # noqa: B006 - KFP pipeline parameter defaults
        eval_args: dict = {"num_steps": 50},  # noqa: B006
        custom_config: dict = {},  # noqa: B006
        location: str = "us-central1",
        eval_config: dict = {},  # noqa: B006 - required when the pipeline evaluates (see the README)
        model_display_name: str = "",
    ):
        examples = dsl.importer(artifact_uri=examples_uri, artifact_class=Dataset, reimport=False)
        schema = dsl.importer(artifact_uri=schema_uri, artifact_class=Artifact, reimport=False)
        trainer = trainer_job(
            examples=examples.output,
            schema=schema.output,
            module_file=module_file,
            train_args=train_args,
            eval_args=eval_args,
            custom_config=custom_config,
            location=location,
        )
        if evaluator_op is None:
            return
        evaluator = evaluator_op(
            model=trainer.outputs["model"],
            examples=examples.output,
            schema=schema.output,
            eval_config=eval_config,
        )
        validated = infra_validator_op(
            model=trainer.outputs["model"],
            examples=examples.output,
            model_blessing=evaluator.outputs["blessing"],
        )
        upload_if_blessed(validated.outputs["blessed"], trainer, model_display_name, location)

    return vertex_multiworker_pipeline


def compile_pipeline(output: str, **job_options: Any) -> str:
    """Compile the pipeline to `output` (YAML); returns the path."""
    from kfp import compiler

    compiler.Compiler().compile(build_pipeline(**job_options), output)
    return output


def main(argv: Sequence[str] | None = None) -> int:
    from generic_trainer.errors import UserInputError
    from generic_trainer.intake import options

    parser = argparse.ArgumentParser(
        prog="python -m pipelines.vertex_multiworker_pipeline", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--output", default="vertex_multiworker_pipeline.yaml", help="compiled pipeline YAML"
    )
    parser.add_argument(
        "--replica-count", type=int, default=2, help="replicas: 1 chief + N-1 workers"
    )
    parser.add_argument("--machine-type", default="n1-standard-4")
    parser.add_argument(
        "--accelerator-type", default="", help="e.g. NVIDIA_TESLA_T4 (default: none)"
    )
    parser.add_argument("--accelerator-count", type=int, default=1, help="accelerators per replica")
    parser.add_argument(
        "--base-output-directory", default="", help="gs:// dir for AIP_MODEL_DIR etc."
    )
    parser.add_argument("--tensorboard", default="", help="Vertex AI TensorBoard resource name")
    parser.add_argument("--service-account", default="")
    parser.add_argument(
        "--restart-job-on-worker-restart",
        action="store_true",
        help="restart the whole job when a worker restarts (it resumes from its checkpoints)",
    )
    parser.add_argument(
        "--no-evaluate",
        dest="evaluate",
        action="store_false",
        help="train only: no evaluator, infra-validator or Model Registry upload",
    )
    parser.add_argument(
        "--image", help="compile the trainer for this image (default: the checked-in YAML)"
    )
    options.add_group(parser, vertex_options.PRODUCTION)
    args = parser.parse_args(argv)
    production = {
        k: getattr(args, k) for k in PRODUCTION_OPTIONS if getattr(args, k) not in (None, False)
    }
    try:
        print(
            compile_pipeline(
                args.output,
                evaluate=args.evaluate,
                replica_count=args.replica_count,
                machine_type=args.machine_type,
                accelerator_type=args.accelerator_type,
                accelerator_count=args.accelerator_count,
                base_output_directory=args.base_output_directory,
                tensorboard=args.tensorboard,
                service_account=args.service_account,
                restart_job_on_worker_restart=args.restart_job_on_worker_restart,
                image=args.image,
                **production,
            )
        )
    except UserInputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
