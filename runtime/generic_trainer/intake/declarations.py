"""Every verb's declaration with a KFP component, in `--help` order, and what is derived from all of them.

The face (cli.py) hands each verb's own derived parts down (its artifact maps to kfp_io, its outputs
to output_checks); `ARTIFACTS` is the union, for a caller that parses an executor input of any verb.
"""

from __future__ import annotations

from generic_trainer.artifacts.kfp_io import ArtifactMaps
from generic_trainer.intake import (
    example_gen_options,
    fit_options,
    judge_options,
    push_options,
    transform_options,
)
from generic_trainer.intake.options import Verb, artifact_maps

DECLARATIONS: tuple[Verb, ...] = (
    fit_options.TRAIN,
    fit_options.TUNE,
    judge_options.EVALUATE,
    judge_options.INFRA_VALIDATE,
    example_gen_options.IMPORT_EXAMPLES,
    transform_options.TRANSFORM,
    push_options.PUSH,
)
# The artifact maps of every component (the verbs agree on each artifact name they share).
ARTIFACTS: ArtifactMaps = artifact_maps(*DECLARATIONS)
