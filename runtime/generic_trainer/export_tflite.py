"""The `export-tflite` verb: a trained model's serving signature as `<output>/Format-TFLite/model.tflite`.

    generic-trainer export-tflite --model DIR --output DIR [--examples DIR --schema FILE] [--eval-splits a,b]
        [--tflite-quantization none|dynamic|float16] [--tflite-tolerance X]

What `train --export-tflite` does after training, for a model already trained: the conversion and its
check against the SavedModel (tflite/export.py; on the eval examples when --examples is given, else on
random inputs), written to a private staging dir beside the output and published whole. `--output`
may be the model dir itself (then `Format-TFLite` lands beside `Format-Serving`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil

from generic_trainer.artifacts import outputs, storage
from generic_trainer.errors import UserInputError
from generic_trainer.intake import output_checks
from generic_trainer.intake.request import gcs_root as resolve_gcs_root
from generic_trainer.tflite import export as tflite_export
from generic_trainer.tflite import options as tflite_options

log = logging.getLogger(__name__)


def add_parser(sub, epilog: str) -> None:
    """The verb's flags (its own module, as `vertex-job`'s)."""
    p = sub.add_parser(
        "export-tflite",
        help="convert a trained model's serving_default to TFLite, checked against it",
        description="Convert the serving_default signature of a SavedModel (a train model dir or a SavedModel dir) "
        "to <output>/Format-TFLite/model.tflite with TFLite's built-in ops, after checking the TFLite "
        "interpreter gives the SavedModel's outputs on the eval examples (within a tolerance). A "
        "signature taking serialized tf.Examples becomes one taking the parsed features.",
        epilog=epilog,
    )
    g = p.add_argument_group("inputs")
    g.add_argument(
        "--model",
        metavar="DIR",
        required=True,
        help="a train model dir (DIR/Format-Serving) or a SavedModel dir",
    )
    g.add_argument(
        "--examples",
        metavar="DIR",
        help="examples in TFX layout to check the conversion on (without: random inputs)",
    )
    g.add_argument(
        "--schema",
        metavar="FILE_OR_DIR",
        help="tensorflow-metadata Schema: the feature types of the examples",
    )
    g.add_argument("--eval-splits", metavar="a,b", help="splits to check on (default eval)")
    g.add_argument(
        "--tflite-quantization",
        choices=tflite_options.QUANTIZATIONS,
        default="none",
        help="post-training quantization (default none)",
    )
    g.add_argument(
        "--tflite-tolerance",
        metavar="X",
        help="largest absolute output difference accepted (default 1e-4 for none, 0.05 for float16, "
        "0.1 for dynamic)",
    )
    o = p.add_argument_group("outputs")
    o.add_argument(
        "--output",
        metavar="DIR",
        required=True,
        help="Format-TFLite/ goes here (e.g. the model dir)",
    )
    r = p.add_argument_group("runtime")
    r.add_argument(
        "--gcs-root",
        metavar="DIR",
        help="where gs:// is mounted (default /gcs, or $GENERIC_TRAINER_GCS_ROOT)",
    )
    r.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))


def main(args: argparse.Namespace) -> int:
    """Run the verb from parsed flags; raises a TrainerError subclass on what the user must fix."""
    from generic_trainer.fit import inputs
    from generic_trainer.records.example_files import split_file_patterns

    gcs_root = resolve_gcs_root(vars(args))
    model = storage.local_path(args.model, gcs_root)
    saved_model = outputs.serving_model_path(model)
    if not os.path.isfile(os.path.join(saved_model, "saved_model.pb")):
        raise UserInputError(
            "--model",
            f"{args.model} holds no SavedModel (saved_model.pb in it or in its "
            f"{outputs.SERVING_DIR}/)",
        )
    options = tflite_options.check_options(True, args.tflite_quantization, args.tflite_tolerance)
    example_files: list[str] = []
    if args.examples:
        splits = [s for s in (args.eval_splits or "eval").split(",") if s]
        example_files = split_file_patterns(storage.local_path(args.examples, gcs_root), splits)
    elif args.schema or args.eval_splits:
        raise UserInputError(
            "--schema" if args.schema else "--eval-splits", "given without --examples"
        )
    schema = args.schema and storage.local_path(args.schema, gcs_root)
    if schema and not os.path.exists(schema):
        raise UserInputError("--schema", f"{args.schema} does not exist")
    schema_file = inputs.resolve_schema_file(schema) if schema else None
    output = os.path.normpath(storage.local_path(args.output, gcs_root))
    output_checks.check_writable("--output", output, "dir")
    output_checks.check_apart(
        [("--output", output)], [("--model", saved_model), ("--schema", schema)]
    )
    output_checks.check_writable("--output", os.path.dirname(os.path.abspath(output)), "dir")
    log.info(
        "export-tflite request: model=%s output=%s examples=%s splits=%s quantization=%s tolerance=%g",
        saved_model,
        output,
        args.examples,
        args.eval_splits or "eval",
        options.quantization,
        options.max_abs_diff,
    )
    with outputs.exclusive(output, "--output"):
        staging = storage.staging_dir_for(output)
        try:
            record = tflite_export.export(
                saved_model,
                os.path.join(staging, tflite_options.TFLITE_DIR),
                options,
                example_files,
                schema_file,
            )
            outputs.publish(
                os.path.join(staging, tflite_options.TFLITE_DIR),
                os.path.join(output, tflite_options.TFLITE_DIR),
            )
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    print(json.dumps({"tflite_model": os.path.join(output, record["path"]), **record}, indent=2))
    return 0
