"""The inputs train and tune share, declared once (TFX's Trainer and Tuner inputs: examples, module,
schema, transform graph, hyperparameters, custom config, steps and splits; the run identity KFP
fills). fit_options.py puts them in both verbs' declarations; see options.py for how an `Option`
becomes a flag, a component input and a request field.
"""

from __future__ import annotations

from generic_trainer.errors import UserInputError
from generic_trainer.intake.options import (
    Option,
    artifact,
    value,
)
from generic_trainer.intake.request import (
    RawInputs,
    existing,
    one_of,
    sha256,
    splits,
    step_count,
)

MODEL_FORMATS = ("savedmodel", "other")


def model_format(raw: RawInputs, flag: str, value: object) -> str:
    """--model-format: savedmodel or other (no TFLite export of a model that is no SavedModel)."""
    chosen = one_of(MODEL_FORMATS, "savedmodel")(raw, flag, value)
    if chosen == "other" and raw.values.get("export_tflite"):
        raise UserInputError(flag, "--export-tflite converts a SavedModel; other models have none")
    return chosen


# What TFX's train_args' keys fill (kfp_io spreads the parameter over them).
TRAIN_ARGS = {"num_steps": "train_steps", "splits": "train_splits"}


def training_inputs(function: Option) -> tuple[Option, ...]:
    """The inputs train and tune share (those of TFX's Trainer and Tuner), with the verb's
    `function` option after the module."""
    return (*_EXAMPLES_AND_MODULE, function, *_MODEL_INPUTS, *_STEPS_AND_CONFIG)


# The examples and the user's module.
_EXAMPLES_AND_MODULE = (
    Option(
        "examples",
        help="examples in TFX layout: DIR/Split-<name>/*.gz (gs:// allowed)",
        metavar="DIR",
        param=artifact(
            "Dataset",
            "Examples in TFX layout: Split-<name>/*.gz (gzipped TFRecords of tf.Example):\n"
            "the import step's, or Transform's transformed_examples (TFX's wiring, with\n"
            "the raw schema and the transform_graph).",
        ),
    ),
    Option(
        "module_file",
        help="user module: a .py file, a gs:// URI, or a dotted module name",
        metavar="PATH_OR_URI",
        param=value(
            str,
            "The user module: a .py path, a gs:// URI, or a dotted module name in the image.",
            "",
        ),
    ),
)
# The schema, the transform graph, the hyperparameters and the base model.
_MODEL_INPUTS = (
    Option(
        "module_sha256",
        check=sha256,
        help="refuse to run a module file whose sha256 differs",
        metavar="HEX",
        param=value(str, "Refuse to run a module file whose sha256 differs (empty: no check).", ""),
    ),
    Option(
        "schema",
        check=existing,
        help="tensorflow-metadata Schema (schema.pbtxt or its dir)",
        metavar="FILE_OR_DIR",
        param=artifact(
            "Artifact",
            "tensorflow-metadata Schema (schema.pbtxt or a dir holding one), "
            "fn_args.schema_path:\n"
            "the raw schema; with transform_graph, examples may follow its "
            "transformed_metadata.",
            None,
        ),
    ),
    Option(
        "transform_graph",
        check=existing,
        help="tensorflow-transform output dir (fn_args.transform_output)",
        metavar="DIR",
        param=artifact(
            "Artifact", "tensorflow-transform output dir, fn_args.transform_output.", None
        ),
    ),
    Option(
        "hyperparameters",
        help="JSON hyperparameters (keras-tuner best_hyperparameters.txt or its dir)",
        metavar="FILE_OR_DIR",
        param=artifact(
            "Artifact",
            "Tuner output (best_hyperparameters.txt or its dir), fn_args.hyperparameters.",
            None,
        ),
    ),
    Option(
        "base_model",
        check=existing,
        help="model to warm-start from (fn_args.base_model)",
        metavar="DIR",
        param=artifact("Model", "A model to warm-start from, fn_args.base_model.", None),
    ),
)
# The steps and splits (also as TFX's train_args / eval_args) and the custom config.
_STEPS_AND_CONFIG = (
    Option(
        "train_steps",
        check=step_count,
        help="training steps (fn_args.train_steps); 0 or unset: None",
        metavar="N",
    ),
    Option(
        "eval_steps",
        check=step_count,
        help="evaluation steps (fn_args.eval_steps)",
        metavar="N",
    ),
    Option(
        "train_splits",
        check=splits(("train",)),
        help="splits to train on (default train)",
        metavar="a,b",
    ),
    Option(
        "eval_splits",
        check=splits(("eval",)),
        help="splits to evaluate on (default eval)",
        metavar="a,b",
    ),
    Option(
        "custom_config",
        help="JSON object passed as fn_args.custom_config",
        metavar="JSON",
        param=value(
            dict,
            "JSON object passed as fn_args.custom_config (integral numbers arrive as ints).",
            None,
        ),
    ),
    # KFP gives steps and splits as TFX's train_args / eval_args; kfp_io spreads them over the
    # flags' names.
    Option(
        "train_args",
        cli=False,
        spread=TRAIN_ARGS,
        param=value(
            dict,
            '{"num_steps": N, "splits": ["train"]}; num_steps 0 or unset means '
            "fn_args.train_steps None.",
            None,
        ),
    ),
    Option(
        "eval_args",
        cli=False,
        spread={"num_steps": "eval_steps", "splits": "eval_splits"},
        param=value(dict, '{"num_steps": N, "splits": ["eval"]}.', None),
    ),
)


def run_identity() -> tuple[Option, ...]:
    """--run-id / --task-name: the components fill them from KFP's placeholders
    (components/specs.py)."""
    return (
        Option(
            "run_id",
            help=(
                "the pipeline run this is a task of (the components pass KFP's run uuid): the "
                "checkpoint dir "
                "(given or $AIP_CHECKPOINT_DIR) gets <run id>/<task name> appended, so retries of "
                "the task resume it and other runs never do"
            ),
            metavar="ID",
        ),
        Option(
            "task_name",
            help="the pipeline task's name (with --run-id; KFP fills it)",
            metavar="NAME",
        ),
    )
