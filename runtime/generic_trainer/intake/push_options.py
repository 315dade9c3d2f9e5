"""The inputs of push (TFX's Pusher, filesystem destination), each declared once: flag, KFP
component input, request check.

See options.py for how each `Option` becomes a flag, a component input and a request field.
"""

from __future__ import annotations

from generic_trainer.intake.common_options import common_groups
from generic_trainer.intake.evaluate_outputs import records_dir
from generic_trainer.intake.options import Component, Group, Option, Verb, artifact, output, value

PUSH_INPUTS = Group(
    "inputs",
    (
        Option(
            "model",
            help="the model to push: a train model dir (DIR/Format-Serving) or a SavedModel dir",
            metavar="DIR",
            param=artifact(
                "Model",
                "The model to push (a trainer model: its Format-Serving SavedModel is pushed).",
            ),
        ),
        Option(
            "model_blessing",
            help=(
                "the evaluator's blessing: a NOT_BLESSED model is not pushed; without it the "
                "model is pushed unvalidated (as TFX's Pusher), with a warning"
            ),
            metavar="DIR",
            param=artifact(
                "Artifact",
                "The evaluator's blessing: a NOT_BLESSED model is not pushed (optional, as TFX's).",
                None,
            ),
        ),
        Option(
            "infra_blessing",
            help="the infra-validator's blessing: when given, the model must also be INFRA_BLESSED",
            metavar="DIR",
            param=artifact(
                "Artifact",
                "The infra-validator's blessing: when given, the model must also be INFRA_BLESSED.",
                None,
            ),
        ),
        Option(
            "push_destination",
            help=(
                "where TF Serving (or another server) watches for versions: a directory or gs:// "
                "URI; the model "
                "goes to <destination>/<Unix seconds>/. TFX's PushDestination as JSON "
                '({"filesystem": {"base_directory": ...}}) works too'
            ),
            metavar="DIR_OR_GS_URI",
            output="dir",
            param=value(
                str,
                (
                    "A directory or gs:// URI TF Serving watches; the model goes to "
                    "<destination>/<Unix "
                    "seconds>/\n(or TFX's PushDestination as JSON: "
                    '{"filesystem": {"base_directory": ...}}).'
                ),
            ),
        ),
    ),
)

PUSH_OUTPUTS = Group(
    "outputs",
    (
        Option(
            "pushed_model_dir",
            help="a copy of the pushed SavedModel for the record (TFX's PushedModel artifact); "
            "default: none",
            metavar="DIR",
            output="dir",
            published=True,
            param=output(
                "Artifact",
                (
                    "TFX's PushedModel: a copy of the pushed SavedModel; metadata pushed 1|0, "
                    "pushed_destination,\npushed_version (and the reasons when not pushed)."
                ),
                name="pushed_model",
            ),
        ),
        Option(
            "records_dir",
            check=records_dir,
            help="when pushed, record the pushed model here for a later run's resolve "
            "(TFX's PushedModel, LatestArtifactStrategy); default: no record",
            metavar="DIR",
            param=value(
                str,
                "When pushed, record the pushed model here for a later run's resolver (the\n"
                "tfx-pipeline verb sets <pipeline_root>/generic-trainer-records/<name>).",
                None,
            ),
        ),
    ),
)

PUSH = Verb(
    "push",
    help="push a blessed model to a directory TF Serving watches (TFX Pusher)",
    description=(
        "Unless a blessing given says no (the evaluator's NOT_BLESSED, the infra-validator's "
        "INFRA_NOT_BLESSED), copy the model's SavedModel to <push-destination>/<version>/ "
        "(version: Unix seconds; where that version exists, the next free one), saved_model.pb "
        "last, whole or not at all. A model that is not blessed is not pushed, and that is a "
        "result, not a failure: the exit code is 0 (pushed: 0)."
    ),
    component=Component(
        "generic_pusher",
        "Pushes a blessed model to a filesystem or gs:// destination for TF Serving (TFX Pusher).",
    ),
    groups=(PUSH_INPUTS, PUSH_OUTPUTS, *common_groups(cluster_timeout=False, training=False)),
)
