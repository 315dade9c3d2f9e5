"""The `tfx-pipeline` verb: a TFX pipeline file, unedited, on this image's components.

`run FILE [ARGS...]` runs the file as `python FILE ARGS...` would, with the `tfx` DSL in place
(tfx_dsl/capture.py); the runner it calls runs the pipeline here through kfp.local
(LocalDagRunner, BeamDagRunner) or writes the KFP v2 pipeline file (KubeflowV2DagRunner), with the
components built in-process from the verbs' declarations (intake/kfp_component.py); with
`--docker` the local runners run each step in this project's image (tfx_kfp/docker_tasks.py).
`plan FILE`
runs the file with the runners capturing instead, and prints each pipeline's plan. A step that
fails ends the run non-zero, naming the step.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import os
from collections.abc import Callable
from typing import Any

from generic_trainer.errors import UserInputError
from generic_trainer.intake import kfp_component, tfx_pipeline_options
from generic_trainer.intake.contract import VerbContract
from generic_trainer.intake.tfx_pipeline_options import (
    TfxPipelineRequest,
    build_tfx_pipeline_request,
)

log = logging.getLogger(__name__)


@dataclasses.dataclass
class TfxPipelineResult:
    """The pipelines the file handed to its runners (their plans, with `plan`)."""

    action: str
    plans: list[str] = dataclasses.field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """The printed summary."""
        return {"action": self.action, "pipelines": len(self.plans) or None}


def render(plan: Any) -> str:
    """A plan as text: tfx_dsl's rendering."""
    from generic_trainer.tfx_dsl import render as rendering

    return rendering.render_plan(plan)


def _require(*modules: str) -> None:
    """Refuse a run before the file runs when a library it needs is not installed."""

    def missing(module: str) -> bool:
        try:
            return importlib.util.find_spec(module) is None
        except ValueError:  # a module set to None in sys.modules: blocked
            return True

    absent = [module for module in modules if missing(module)]
    if absent:
        raise UserInputError(
            "tfx-pipeline run",
            f"needs {' and '.join(absent)}, which this environment lacks (the runtime image "
            "leaves kfp out): run pipeline files where you compile and launch pipelines, after "
            "`pip install 'generic-trainer[pipelines]'`",
        )


def run(
    request: TfxPipelineRequest,
    before_publish: Callable[[TfxPipelineResult], None] | None = None,
) -> TfxPipelineResult:
    """Run (or plan) the pipeline file.

    Args:
      request: the request.
      before_publish: called at the end (nothing is published: the steps publish their own).

    Returns:
      The result.
    """
    if request.action == "run":
        _require("kfp", *(("docker",) if request.docker else ()))
    # The steps choose their Keras as they do in their own containers (train: --keras auto, so
    # tf_keras for a TFX module, as TFX gives it), not the Keras 3 the CLI set for this process;
    # a TF_USE_LEGACY_KERAS the user set is kept. Empty reads as unset to the steps and as
    # Keras 3 to this process's TensorFlow.
    os.environ["TF_USE_LEGACY_KERAS"] = request.legacy_keras

    from generic_trainer.tfx_dsl import capture
    from generic_trainer.tfx_kfp import component_source, docker_tasks, runners

    result = TfxPipelineResult(request.action)
    image = request.docker_image or (runners.project_image() if request.docker else None)
    with (
        component_source.using(kfp_component.components_by_name),
        docker_tasks.using_image(image),
    ):
        taken = capture.run_pipeline_file(
            request.pipeline_file, request.pipeline_args, capture=request.action == "plan"
        )
    for call in taken:
        text = render(runners.plan_of(call.pipeline))
        result.plans.append(text)
        refusal = getattr(call.runner, "REFUSAL", "")
        note = f"(`tfx-pipeline run` refuses this runner: {refusal})\n" if refusal else ""
        print(f"{type(call.runner).__name__}:\n{note}{text}", flush=True)
    if before_publish is not None:
        before_publish(result)
    return result


def describe(r: TfxPipelineRequest) -> list[str]:
    """The log line saying what will run."""
    docker = " --docker" if r.docker else ""
    docker += f" --docker-image {r.docker_image}" if r.docker_image else ""
    line = f"tfx-pipeline {r.action}{docker} {r.pipeline_file} {' '.join(r.pipeline_args)}"
    return [line.rstrip()]


VERB: VerbContract[TfxPipelineRequest, TfxPipelineResult] = VerbContract(
    tfx_pipeline_options.TFX_PIPELINE,
    build_tfx_pipeline_request,
    describe,
    run,
    lambda request, result: ({}, None),
    lambda result: result.summary(),
)
