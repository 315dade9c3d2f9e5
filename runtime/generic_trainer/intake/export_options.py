"""The declaration of `export-tflite`: a verb without a KFP component (see options.py).

Its flags convert a trained model's serving signature to TFLite, checked against the SavedModel
(`tflite/export.py`); `export_request.py` builds its request from them.
"""

from __future__ import annotations

from generic_trainer.intake.common_options import common_groups
from generic_trainer.intake.options import Group, Option, Verb
from generic_trainer.tflite.options import QUANTIZATIONS

INPUTS = Group(
    "inputs",
    (
        Option(
            "model",
            metavar="DIR",
            required=True,
            help="a train model dir (DIR/Format-Serving) or a SavedModel dir",
        ),
        Option(
            "examples",
            metavar="DIR",
            help="examples in TFX layout to check the conversion on (without: random inputs)",
        ),
        Option(
            "schema",
            metavar="FILE_OR_DIR",
            help="tensorflow-metadata Schema: the feature types of the examples",
        ),
        Option("eval_splits", metavar="a,b", help="splits to check on (default eval)"),
        Option(
            "tflite_quantization",
            choices=QUANTIZATIONS,
            default="none",
            help="post-training quantization (default none)",
        ),
        Option(
            "tflite_tolerance",
            metavar="X",
            help="largest absolute output difference accepted (default 1e-4 for none, 0.05 for "
            "float16, 0.1 for dynamic)",
        ),
    ),
)

OUTPUTS = Group(
    "outputs",
    (
        Option(
            "output",
            metavar="DIR",
            required=True,
            help="Format-TFLite/ goes here (e.g. the model dir)",
            output="dir",
            published=True,
        ),
    ),
)

EXPORT_TFLITE = Verb(
    "export-tflite",
    help="convert a trained model's serving_default to TFLite, checked against it",
    description="Convert the serving_default signature of a SavedModel (a train model dir or a "
    "SavedModel dir) to <output>/Format-TFLite/model.tflite with TFLite's built-in ops, after "
    "checking the TFLite interpreter gives the SavedModel's outputs on the eval examples (within a "
    "tolerance). A signature taking serialized tf.Examples becomes one taking the parsed features.",
    groups=(INPUTS, OUTPUTS, common_groups(training=False)[1]),
)
