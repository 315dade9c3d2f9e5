"""The inputs of bulk-infer (TFX's BulkInferrer), each declared once: flag, KFP component input,
request check.

See options.py for how each `Option` becomes a flag, a component input and a request field.
"""

from __future__ import annotations

from generic_trainer.intake.common_options import common_groups
from generic_trainer.intake.data_options import BEAM
from generic_trainer.intake.options import Component, Group, Option, Verb, artifact, output, value

BULK_INFER_INPUTS = Group(
    "inputs",
    (
        Option(
            "model",
            help="the model: a train model dir (DIR/Format-Serving) or a SavedModel dir",
            metavar="DIR",
            param=artifact("Model", "The model (a trainer model: its Format-Serving SavedModel)."),
        ),
        Option(
            "examples",
            help="the examples to infer on, TFX layout: DIR/Split-<name>/* (gs:// allowed)",
            metavar="DIR",
            param=artifact("Dataset", "Examples in TFX layout: Split-<name>/*.gz of tf.Example."),
        ),
        Option(
            "data_splits",
            help="the splits to infer on (TFX's data_spec.example_splits; default: every split)",
            metavar="a,b",
            param=value(list, "The splits to infer on (default: every Split-<name>/).", None),
        ),
        Option(
            "model_blessing",
            help="the evaluator's blessing: when given, a model it did not bless infers nothing "
            "(exit 0); default: none, the model is used",
            metavar="DIR",
            param=artifact(
                "Artifact",
                "The evaluator's blessing: when given, a NOT_BLESSED model infers nothing.",
                None,
            ),
        ),
        Option(
            "model_spec",
            help='TFX\'s ModelSpec as JSON: {"model_signature_name": [...], "tag": [...]} '
            "(default: serving_default, tag serve)",
            metavar="JSON",
            param=value(
                str,
                'TFX\'s ModelSpec as JSON: {"model_signature_name": [...], "tag": [...]};\n'
                "empty: serving_default of the serve MetaGraph.",
                "",
            ),
        ),
        Option(
            "output_example_spec",
            help="TFX's OutputExampleSpec as JSON: which prediction becomes which feature of "
            "--output-examples (default: each output under its own name; a classifier's "
            "classes and scores, a regressor's outputs)",
            metavar="JSON",
            param=value(
                str,
                "TFX's OutputExampleSpec as JSON: which prediction becomes which feature of\n"
                "output_examples; empty: each output under its own name.",
                "",
            ),
        ),
    ),
)

BULK_INFER_OUTPUTS = Group(
    "outputs",
    (
        Option(
            "inference_result",
            help="where the PredictionLogs go (TFRecords, one per example; TFX's "
            "InferenceResult); give it, --output-examples or both",
            metavar="DIR",
            output="dir",
            published=True,
            param=output(
                "Artifact",
                "TFX's InferenceResult: prediction_logs-*.gz, TFRecords of PredictionLog, one per\n"
                "example; metadata: inferred 1|0, split_names, num_examples (or the reasons).",
            ),
        ),
        Option(
            "output_examples",
            help="also write the examples with their predictions added as features "
            "(Split-<name>/examples-*.gz; TFX's output_examples)",
            metavar="DIR",
            output="dir",
            published=True,
            param=output(
                "Dataset",
                "The examples with their predictions added (Split-<name>/examples-*.gz);\n"
                "metadata: split_names, num_examples per split.",
            ),
        ),
    ),
)

BULK_INFER = Verb(
    "bulk-infer",
    help="run a model on examples in bulk, on Apache Beam's RunInference (TFX BulkInferrer)",
    description="Run the model's serving_default (or the signatures of --model-spec) on every "
    "example of the chosen splits with Beam's RunInference and write TFRecords of TF Serving's "
    "PredictionLog, one per example, and, when asked, the examples with their predictions added as "
    "features. When --model-blessing is given and the evaluator did not bless the model, "
    "nothing is inferred, and that is a result, not a failure: exit 0 (inferred: 0).",
    component=Component(
        "generic_bulk_inferrer",
        "Runs a model on examples in bulk with Beam's RunInference (TFX BulkInferrer).",
    ),
    groups=(
        BULK_INFER_INPUTS,
        BULK_INFER_OUTPUTS,
        BEAM,
        *common_groups(cluster_timeout=False, training=False),
    ),
)
