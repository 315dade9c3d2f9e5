"""The inputs of resolve (TFX's Resolver: LatestBlessedModelStrategy, LatestArtifactStrategy),
each declared once:
flag, KFP component input, request check.

See options.py for how each `Option` becomes a flag, a component input and a request field.
"""

from __future__ import annotations

from generic_trainer.intake.common_options import common_groups
from generic_trainer.intake.options import (
    Component,
    Group,
    Option,
    Verb,
    output,
    output_value,
    value,
)
from generic_trainer.intake.request import one_of, text

STRATEGIES = ("latest_blessed_model", "latest_artifact")

RESOLVE_INPUTS = Group(
    "inputs",
    (
        Option(
            "records_dir",
            help="the pipeline's records dir (<pipeline_root>/generic-trainer-records/<name>), "
            "where evaluate, transform and push --records-dir record what they leave",
            metavar="DIR",
            param=value(str, "The pipeline's records dir, where the steps leave their records."),
        ),
        Option(
            "strategy",
            check=one_of(STRATEGIES, STRATEGIES[0]),
            help="what to resolve: latest_blessed_model (TFX's LatestBlessedModelStrategy) or "
            "latest_artifact (LatestArtifactStrategy: the latest --artifact-type recorded)",
            metavar="NAME",
            param=value(
                str, "What to resolve: latest_blessed_model or latest_artifact.", STRATEGIES[0]
            ),
        ),
        Option(
            "artifact_type",
            check=text(""),
            help="latest_artifact: the TFX artifact type to resolve (TransformCache, PushedModel)",
            metavar="TYPE",
            param=value(
                str, "latest_artifact: the TFX type to resolve (TransformCache, PushedModel).", ""
            ),
        ),
    ),
)

RESOLVE_OUTPUTS = Group(
    "outputs",
    (
        Option(
            "model_dir",
            help="a copy of the resolved model or artifact (or NOTHING_RESOLVED when there is "
            "none yet)",
            metavar="DIR",
            output="dir",
            published=True,
            param=output(
                "Model",
                "A copy of the resolved model or artifact, or NOTHING_RESOLVED (evaluate: no\n"
                "baseline; transform: no analyzer cache).",
                name="model",
            ),
        ),
        Option(
            "found",
            cli=False,
            param=output_value(bool, "True when something was resolved, for dsl.If."),
        ),
    ),
)

RESOLVE = Verb(
    "resolve",
    help="resolve the latest blessed model or artifact of earlier runs (TFX Resolver)",
    description=(
        "Read the records the pipeline's steps left (evaluate, transform and push "
        "--records-dir) and copy the latest model still there with its BLESSED blessing "
        "(latest_blessed_model), or the latest artifact of --artifact-type still there "
        "(latest_artifact), into the output; with none (a first run), write NOTHING_RESOLVED "
        "there, which evaluate reads as no baseline and transform as no analyzer cache. Run it "
        "uncached: it must see the records as they are."
    ),
    component=Component(
        "generic_resolver",
        "Resolves the latest blessed model or artifact of earlier runs (TFX Resolver: "
        "LatestBlessedModelStrategy, LatestArtifactStrategy).",
    ),
    groups=(RESOLVE_INPUTS, RESOLVE_OUTPUTS, *common_groups(cluster_timeout=False, training=False)),
)
