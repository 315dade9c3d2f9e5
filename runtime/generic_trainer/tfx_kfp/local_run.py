"""A `Plan` run on this machine through kfp.local: each step a host process of this image's
`generic-trainer` (tfx_kfp/host_tasks.py), or, in docker mode (docker_tasks.using_image), a
container of the image (kfp.local's DockerRunner); kfp.local resolves every input, output and
condition.

Logs the plan's notices and not-run nodes first, each step as kfp.local starts and ends it, and
ends with a `StepFailed` naming the TFX node whose step failed.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from typing import Any

from generic_trainer.errors import TrainerError
from generic_trainer.tfx_dsl.steps import Plan
from generic_trainer.tfx_kfp import kfp_pipeline
from generic_trainer.tfx_kfp.component_source import components_for

log = logging.getLogger(__name__)

# The image recorded in the local run's task specs (host processes do not use it).
LOCAL_IMAGE = "generic-trainer:local"


class StepFailed(TrainerError):
    """A step of a locally run TFX pipeline failed (its own error was logged above)."""

    exit_code = 1


def log_plan(plan: Plan, tasks: dict[str, str]) -> None:
    """Log the notices, what does not run and why, and the steps that will.

    Args:
      plan: the plan.
      tasks: TFX node id -> the kfp.local task that runs it (kfp.local logs its start and end).
    """
    for notice in plan.notices:
        log.info("notice: %s", notice)
    for node in plan.not_run:
        log.warning("not run: %s (%s): %s", node.id, node.tfx_component, node.reason)
    for step in plan.steps:
        folded = f", also stands for {', '.join(step.folds)}" if step.folds else ""
        task = tasks.get(step.id, "?")
        log.info("step %s (%s%s) runs as kfp.local task %s", step.id, step.component, folded, task)


def _step_names(pipeline: Any) -> dict[str, str]:
    """kfp task name -> TFX node id (the task's display name)."""
    tasks = pipeline.pipeline_spec.root.dag.tasks
    names = {key: task.task_info.name for key, task in tasks.items()}
    for component in pipeline.pipeline_spec.components.values():  # tasks inside dsl.If
        if component.WhichOneof("implementation") == "dag":
            names.update({k: t.task_info.name for k, t in component.dag.tasks.items()})
    return names


def _runner(plan: Plan, image: str | None, timeout_s: float | None) -> Any:
    """kfp.local's set-up for the run: the image's containers (docker mode) or host processes."""
    if image:
        from generic_trainer.tfx_kfp import docker_tasks

        docker_tasks.check_engine(image)
        log.info("docker mode: each step a container of %s", image)
        return docker_tasks.docker_run(plan)
    from generic_trainer.tfx_kfp.host_tasks import host_runner

    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    return host_runner(plan.root, {"PATH": path}, timeout_s, enable_caching=plan.enable_cache)


def run_plan(plan: Plan, timeout_s: float | None = None) -> Any:
    """Run `plan` with kfp.local; every step a host process of `generic-trainer`, or in docker
    mode a container of the image.

    Args:
      plan: the plan (its root is kfp.local's pipeline root).
      timeout_s: each host process's time limit (None: none).

    Returns:
      kfp.local's pipeline task.

    Raises:
      StepFailed: a step failed; the message names its TFX node.
      UserInputError: docker mode with no docker engine, or a host path the containers
        cannot see.
    """
    from generic_trainer.tfx_kfp import docker_tasks
    from generic_trainer.tfx_kfp.local_conditions import named_outputs_in_conditions

    image = docker_tasks.image()
    pipeline = kfp_pipeline.pipeline_function(plan, components_for(image or LOCAL_IMAGE))
    names = _step_names(pipeline)
    log_plan(plan, {step: task for task, step in names.items()})
    runner = _runner(plan, image, timeout_s)
    log.info("running pipeline %s under kfp.local, root %s", plan.name, plan.root)
    with runner, named_outputs_in_conditions():
        try:
            return pipeline()
        except RuntimeError as error:
            text = re.sub(r"\x1b\[[0-9;]*m", "", str(error))  # kfp.local's colours
            found = re.findall(r"[Tt]ask(?: failed:)? '([^']+)'", text)
            task = found[-1] if found else ""
            step = names.get(task, task or "a step")
            raise StepFailed(f"step {step} failed ({text}); its log is above") from None
