"""The declaration and request of `tfx-pipeline`: a verb without a KFP component (see options.py).

`generic-trainer tfx-pipeline run FILE [ARGS...]` runs a TFX pipeline file (its runners run the
pipeline here, or compile it); `tfx-pipeline plan FILE [ARGS...]` prints what each node becomes.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from generic_trainer.artifacts.kfp_io import KfpOutputs
from generic_trainer.errors import UserInputError
from generic_trainer.intake.common_options import common_groups
from generic_trainer.intake.options import Group, Option, Verb

ACTIONS = ("run", "plan")

PIPELINE = Group(
    "pipeline",
    (
        Option(
            "action",
            positional=True,
            choices=ACTIONS,
            help="run: run the file (its runner runs the pipeline here or compiles it); plan: "
            "print what each node becomes, running nothing",
        ),
        Option("pipeline_file", positional=True, metavar="FILE", help="the TFX pipeline file"),
        Option(
            "pipeline_args",
            positional=True,
            nargs=argparse.REMAINDER,
            metavar="ARGS",
            help="the file's own arguments (absl flags)",
        ),
    ),
)

DOCKER = Group(
    "docker",
    (
        Option(
            "docker",
            action="store_true",
            help="LocalDagRunner and BeamDagRunner run each step in this project's image with "
            "kfp.local's DockerRunner (needs a docker engine) instead of as a host process; the "
            "image: --docker-image, else $GENERIC_TRAINER_IMAGE, else "
            "ghcr.io/generic-trainer/trainer:latest",
        ),
        Option(
            "docker_image",
            metavar="IMAGE",
            help="the image --docker runs the steps in, as the docker engine names it (implies "
            "--docker)",
        ),
    ),
    description="Host paths the steps read (module files, data) are mounted read-only at the "
    "same path, push destinations read-write; the containers run as this user.",
)

TFX_PIPELINE = Verb(
    "tfx-pipeline",
    help="run or plan a TFX pipeline file (tfx.v1 DSL) on this image's components",
    description=(
        "Run a TFX pipeline file unedited: LocalDagRunner and BeamDagRunner run its steps here "
        "through kfp.local (one generic-trainer process per step), KubeflowV2DagRunner writes the "
        "KFP v2 pipeline file of this image's components. `plan` prints what each node becomes "
        "(a step, folded into one, or not run and why) and runs nothing. With --docker each "
        "local step runs in this project's image instead (kfp.local's DockerRunner)."
    ),
    groups=(PIPELINE, DOCKER, common_groups(cluster_timeout=False, training=False)[1]),
)


@dataclasses.dataclass(frozen=True)
class TfxPipelineRequest:
    """What to do with which pipeline file, and its arguments; docker: the steps' image when
    local runs run them in containers (None: host processes)."""

    action: str
    pipeline_file: str
    pipeline_args: tuple[str, ...] = ()
    docker: bool = False
    docker_image: str | None = None
    legacy_keras: str = ""  # TF_USE_LEGACY_KERAS as the user set it ("": unset), for the steps


def build_tfx_pipeline_request(
    values: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    kfp: KfpOutputs | None = None,
) -> TfxPipelineRequest:
    """Validate raw values into a TfxPipelineRequest.

    Args:
      values: the raw values (flags).
      environ: the environment (os.environ by default): its TF_USE_LEGACY_KERAS, read before
        the CLI sets its own, is what the steps get.
      kfp: unused (no component).

    Returns:
      The request.
    """
    action = values.get("action")
    if action not in ACTIONS:
        raise UserInputError("ACTION", f"expected one of {', '.join(ACTIONS)}, got {action!r}")
    path = values.get("pipeline_file")
    if not isinstance(path, str) or not os.path.isfile(path):
        raise UserInputError("FILE", f"expected a TFX pipeline file (.py), got {path!r}")
    image = values.get("docker_image")
    if image is not None and (not isinstance(image, str) or not image.strip()):
        raise UserInputError("--docker-image", f"expected an image name, got {image!r}")
    environ = os.environ if environ is None else environ
    return TfxPipelineRequest(
        action,
        os.path.abspath(path),
        tuple(values.get("pipeline_args") or ()),
        docker=bool(values.get("docker")) or image is not None,
        docker_image=image,
        legacy_keras=environ.get("TF_USE_LEGACY_KERAS", ""),
    )
