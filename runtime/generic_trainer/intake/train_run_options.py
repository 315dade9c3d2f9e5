"""train's Task API group and its outputs group (the model, its run dir, metrics, report,
checkpoints), declared once; fit_options.py puts them in train's declaration (see options.py).
"""

from __future__ import annotations

from generic_trainer.intake.fit_input_options import run_identity
from generic_trainer.intake.options import (
    Group,
    Option,
    output,
    output_value,
    value,
)
from generic_trainer.intake.request import (
    output_file,
)

TRAIN_TASK = Group(
    "Task API",
    description="train a generic_trainer.Task with the runtime's own loop instead of a run_fn",
    options=(
        Option(
            "task",
            help="the Task class: a .py file, gs:// URI or dotted module, then :Class (replaces "
            "--module-file)",
            metavar="MODULE:CLASS",
            param=value(
                str,
                (
                    'The Task API instead of a run_fn module: "module:Class" (module a .py path, '
                    "gs:// URI or\n"
                    "dotted name); the runtime's own loop trains it. Give either task or "
                    "module_file."
                ),
                "",
            ),
        ),
        Option(
            "experiment",
            help="a registered experiment config (default: the Task's defaults)",
            metavar="NAME",
            param=value(str, "A registered experiment name for the task (its default config).", ""),
        ),
        Option(
            "config_file",
            help="YAML/JSON experiment overrides, applied in order (repeatable)",
            metavar="FILE",
            action="append",
            param=value(
                list,
                (
                    "YAML/JSON files (paths or gs:// URIs) of experiment overrides for the task, "
                    "applied in\norder before config."
                ),
                None,
            ),
        ),
        Option(
            "config",
            help="inline YAML/JSON overrides (the KFP 'config' parameter), after --config-file",
            metavar="YAML",
            param=value(
                str,
                (
                    "YAML or JSON overrides of the task's experiment config, e.g. \"trainer: "
                    "{train_steps: "
                    '500}".'
                ),
                "",
            ),
        ),
        Option(
            "params_override",
            help="last overrides, e.g. "
            "trainer.train_steps=500,task.train_data.global_batch_size=64",
            metavar="a.b=c,...",
            param=value(
                str,
                (
                    "Last overrides of the task's experiment config, e.g.\n"
                    '"trainer.train_steps=500,task.train_data.global_batch_size=64".'
                ),
                "",
            ),
        ),
        Option(
            "mode",
            help="what the loop does (default train_and_eval)",
            choices=("train", "eval", "train_and_eval", "continuous_eval"),
            param=value(
                str,
                "The task loop's mode: train, eval, train_and_eval (default) or continuous_eval.",
                "",
            ),
        ),
    ),
)

TRAIN_OUTPUTS = Group(
    "outputs",
    (
        Option(
            "model_dir",
            help="model output; serving model at DIR/Format-Serving (default $AIP_MODEL_DIR)",
            metavar="DIR",
            output="dir",
            published=True,
            param=output(
                "Model",
                "The trained model; the serving SavedModel is at <model>/Format-Serving.",
                name="model",
            ),
        ),
        Option(
            "model_run_dir",
            help="TensorBoard logs and run outputs (default $AIP_TENSORBOARD_LOG_DIR, else "
            "DIR/logs)",
            metavar="DIR",
            output="dir",
            param=output(
                "Artifact", "TensorBoard logs of the run (fn_args.model_run_dir).", name="model_run"
            ),
        ),
        Option(
            "checkpoint_dir",
            help=(
                "checkpoints, stable across restarts (default $AIP_CHECKPOINT_DIR, else "
                "<model-run-dir>/checkpoints); with --run-id, under DIR/<run id>/<task name>"
            ),
            metavar="DIR",
            output="dir",
            param=value(
                str,
                (
                    "Base dir of the checkpoints (a gs:// URI on Vertex); the run's are under\n"
                    "<checkpoint_dir>/<pipeline run uuid>/<task name>, so a retried task resumes "
                    "its own and two runs\n"
                    "never share one. Empty: $AIP_CHECKPOINT_DIR the same way, else inside the "
                    "model_run artifact."
                ),
                "",
            ),
        ),
        *run_identity(),
        Option(
            "metrics_file",
            check=output_file,
            help="write the final eval metrics here as flat JSON",
            metavar="FILE",
            output="file",
            param=output(
                "Metrics", "The final evaluation and training metrics.", name="metrics", fills=""
            ),
        ),
        Option(
            "report_file",
            check=output_file,
            help="write an HTML report of the run here",
            metavar="FILE",
            output="file",
            param=output(
                "HTML",
                "HTML report of the run: loss and metric curves, resolved inputs, strategy, "
                "metrics.",
                name="report",
            ),
        ),
        # Output parameters: what a dsl.importer of google.UnmanagedContainerModel needs (Vertex AI
        # Model Registry).
        Option(
            "serving_model_uri",
            cli=False,
            param=output_value(
                str,
                (
                    "The SavedModel's URI (<model>/Format-Serving), for a dsl.importer of\n"
                    "google.UnmanagedContainerModel in front of GCPC's ModelUploadOp."
                ),
            ),
        ),
        Option(
            "serving_container_image",
            cli=False,
            param=output_value(
                str, "The serving container image (the model artifact's containerSpec.imageUri)."
            ),
        ),
        Option(
            "instance_schema_uri",
            cli=False,
            param=output_value(
                str,
                (
                    "OpenAPI schema of one serving_default instance "
                    "(<model>/schemata/instance.yaml),\n"
                    "Vertex's predictSchemata.instanceSchemaUri; empty when the signature's shapes "
                    "are unknown."
                ),
            ),
        ),
        Option(
            "prediction_schema_uri",
            cli=False,
            param=output_value(
                str, "The same for one prediction (<model>/schemata/prediction.yaml)."
            ),
        ),
    ),
)
