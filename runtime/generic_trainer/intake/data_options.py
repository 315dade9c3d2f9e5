"""The Beam options both data verbs share, declared once: flag, KFP component input, request check
(import-examples' own are in example_gen_options.py, transform's in transform_options.py).

See options.py for how each `Option` becomes a flag, a component input and a request field.
"""

from __future__ import annotations

from generic_trainer.intake.options import Group, Option, value

BEAM = Group(
    "beam",
    (
        Option(
            "beam_pipeline_args",
            help=(
                "Beam pipeline options, passed through (give them after '=' in one quoted string, "
                "e.g. "
                "--beam-pipeline-args='--runner=DataflowRunner --project=P --region=R "
                "--temp_location=gs://B/tmp'); default: the DirectRunner here with one worker per "
                "CPU core"
            ),
            metavar="'ARGS'",
            action="append",
            param=value(
                list,
                (
                    'Beam options, e.g. ["--runner=DataflowRunner", "--project=P", "--region=R",\n'
                    '"--temp_location=gs://B/tmp"]; default: the DirectRunner in the container.'
                ),
                None,
            ),
        ),
    ),
)
