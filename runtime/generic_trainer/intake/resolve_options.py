"""The inputs of resolve (TFX's Resolver with LatestBlessedModelStrategy), each declared once:
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
from generic_trainer.intake.request import one_of

STRATEGIES = ("latest_blessed_model",)

RESOLVE_INPUTS = Group(
    "inputs",
    (
        Option(
            "records_dir",
            help="the pipeline's records dir (<pipeline_root>/generic-trainer-records/<name>), "
            "where evaluate --records-dir records each model it blesses",
            metavar="DIR",
            param=value(str, "The pipeline's records dir, where evaluators record blessings."),
        ),
        Option(
            "strategy",
            check=one_of(STRATEGIES, STRATEGIES[0]),
            help="what to resolve: latest_blessed_model (TFX's LatestBlessedModelStrategy)",
            metavar="NAME",
            param=value(str, "What to resolve: latest_blessed_model.", STRATEGIES[0]),
        ),
    ),
)

RESOLVE_OUTPUTS = Group(
    "outputs",
    (
        Option(
            "model_dir",
            help="a copy of the resolved model (or NOTHING_RESOLVED when there is none yet)",
            metavar="DIR",
            output="dir",
            published=True,
            param=output(
                "Model",
                "A copy of the resolved model, or NOTHING_RESOLVED (evaluate: no baseline).",
                name="model",
            ),
        ),
        Option(
            "found",
            cli=False,
            param=output_value(bool, "True when a model was resolved, for dsl.If."),
        ),
    ),
)

RESOLVE = Verb(
    "resolve",
    help="resolve the latest blessed model of earlier runs (TFX Resolver)",
    description=(
        "Read the records the pipeline's evaluators left (evaluate --records-dir) and copy the "
        "latest model still there with its BLESSED blessing into the output; with none (a first "
        "run), write NOTHING_RESOLVED there, which evaluate reads as no baseline. Run it "
        "uncached: it must see the records as they are."
    ),
    component=Component(
        "generic_resolver",
        "Resolves the latest blessed model of earlier runs (TFX Resolver, "
        "LatestBlessedModelStrategy).",
    ),
    groups=(RESOLVE_INPUTS, RESOLVE_OUTPUTS, *common_groups(cluster_timeout=False, training=False)),
)
