"""TFX's runners on this image: `LocalDagRunner` and `BeamDagRunner` run the pipeline here through
kfp.local (local_run.py); `KubeflowV2DagRunner` writes the KFP v2 pipeline file kfp's compiler
makes of it (kfp_pipeline.py), for open-source KFP or Vertex AI Pipelines.

Each `run(pipeline)` first offers the pipeline to tfx_dsl's capture (`tfx-pipeline plan` and the
tests read pipelines without running them), then turns it into tfx_dsl's `Plan`.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from generic_trainer.tfx_dsl.steps import Plan
from generic_trainer.tfx_kfp import kfp_pipeline
from generic_trainer.tfx_kfp.component_source import components_for

log = logging.getLogger(__name__)

# This project's image (components/specs.py's DEFAULT_IMAGE): the compiled pipeline's default.
DEFAULT_IMAGE = "ghcr.io/generic-trainer/trainer:latest"
IMAGE_ENV = "GENERIC_TRAINER_IMAGE"


def project_image() -> str:
    """This project's image: $GENERIC_TRAINER_IMAGE, else DEFAULT_IMAGE (KubeflowV2DagRunner's
    default, and the image of `tfx-pipeline run --docker`)."""
    return os.environ.get(IMAGE_ENV) or DEFAULT_IMAGE


def _captured(runner: Any, pipeline: Any) -> bool:
    """Whether tfx_dsl's capture took the pipeline (a Plan, made by code, is never captured)."""
    if isinstance(pipeline, Plan):
        return False
    from generic_trainer.tfx_dsl import capture

    return capture.take(runner, pipeline)


def plan_of(pipeline: Any) -> Plan:
    """tfx_dsl's plan of a Pipeline (a `Plan` is taken as it is).

    Args:
      pipeline: the TFX Pipeline the file built, or a Plan.

    Returns:
      The Plan.
    """
    if isinstance(pipeline, Plan):
        return pipeline
    from generic_trainer.tfx_dsl import planning

    return planning.plan(pipeline)  # type: ignore[no-any-return]


class LocalDagRunner:
    """TFX's LocalDagRunner: the pipeline's steps run here, one host process each (or, with
    `tfx-pipeline run --docker`, one container of the image each)."""

    def __init__(self, config: Any = None, **kwargs: Any) -> None:
        self.config = config

    def run(self, pipeline: Any) -> Any:
        """Run the pipeline (or, while tfx_dsl captures, hand it back and run nothing).

        Args:
          pipeline: the TFX Pipeline.

        Returns:
          kfp.local's pipeline task (None when captured).
        """
        if _captured(self, pipeline):
            return None
        from generic_trainer.tfx_kfp import local_run

        return local_run.run_plan(plan_of(pipeline))


class BeamDagRunner(LocalDagRunner):
    """TFX's BeamDagRunner: here the same local run as LocalDagRunner (each step's Beam work
    runs on Beam's DirectRunner with the pipeline's beam_pipeline_args)."""


class KubeflowV2DagRunnerConfig:
    """TFX's KubeflowV2DagRunnerConfig: the image the compiled steps run (`default_image`)."""

    def __init__(
        self, default_image: str | None = None, display_name: str | None = None, **kwargs: Any
    ) -> None:
        self.default_image = default_image
        self.display_name = display_name
        self.kwargs = kwargs


class KubeflowV2DagRunner:
    """TFX's KubeflowV2DagRunner: writes the KFP v2 pipeline file (`output_dir/output_filename`,
    by default `<pipeline name>_pipeline.json` here) of this image's components."""

    def __init__(
        self,
        config: KubeflowV2DagRunnerConfig | None = None,
        output_dir: str | None = None,
        output_filename: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.config = config or KubeflowV2DagRunnerConfig()
        self.output_dir = output_dir
        self.output_filename = output_filename

    def image(self) -> str:
        """The image the steps run: the config's default_image, else this project's."""
        return self.config.default_image or project_image()

    def run(self, pipeline: Any) -> str | None:
        """Compile the pipeline with kfp's compiler (or, while captured, hand it back).

        Args:
          pipeline: the TFX Pipeline.

        Returns:
          The pipeline file written (None when captured).
        """
        if _captured(self, pipeline):
            return None
        plan = plan_of(pipeline)
        name = self.output_filename or f"{plan.name}_pipeline.json"
        output = os.path.join(self.output_dir or os.getcwd(), name)
        for node in plan.not_run:
            log.warning("not run: %s (%s): %s", node.id, node.tfx_component, node.reason)
        kfp_pipeline.compile_plan(plan, components_for(self.image()), output)
        log.info("wrote the KFP pipeline %s (image %s)", output, self.image())
        return output
