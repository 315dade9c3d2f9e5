"""The inputs of train and tune, each declared once: its flag, its KFP component input, its request
check.

A verb's `Verb` lists its groups in `--help` order; see options.py for how each `Option` becomes a
flag, a component input and a request field.
"""

from __future__ import annotations

import argparse

from generic_trainer.errors import UserInputError
from generic_trainer.fit.accelerator import ACCELERATORS
from generic_trainer.intake import options
from generic_trainer.intake.common_options import common_groups
from generic_trainer.intake.options import (
    Component,
    Group,
    Option,
    Verb,
    artifact,
    output,
    output_value,
    value,
)
from generic_trainer.intake.request import (
    TUNE_STRATEGIES,
    RawInputs,
    duration,
    existing,
    one_of,
    output_file,
    sha256,
    splits,
    step_count,
    text,
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


def _training_inputs(function: Option) -> tuple[Option, ...]:
    """The inputs train and tune share (those of TFX's Trainer and Tuner), with the verb's
    `function` option."""
    return (
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
        function,
        Option(
            "module_sha256",
            check=sha256,
            help="refuse to run a module file whose sha256 differs",
            metavar="HEX",
            param=value(
                str, "Refuse to run a module file whose sha256 differs (empty: no check).", ""
            ),
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


def _run_identity() -> tuple[Option, ...]:
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
        *_run_identity(),
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

TRAIN_SERVING = Group(
    "serving",
    description="the container Vertex AI Model Registry serves the model with (KFP metadata)",
    options=(
        Option(
            "serving_image",
            help="serving container image (default: Vertex's prebuilt TF Serving image for this "
            "TensorFlow)",
            metavar="IMAGE",
            param=value(
                str,
                (
                    "The serving container the model artifact names for Vertex AI Model Registry "
                    "(its\n"
                    "containerSpec metadata); empty: Vertex's prebuilt TF Serving image for the "
                    "TensorFlow version."
                ),
                "",
            ),
        ),
        Option(
            "model_format",
            check=model_format,
            help=(
                "savedmodel (default: run_fn must export a SavedModel with serving_default, "
                "checked); other: publish what run_fn wrote (a scikit-learn model.pkl, ...) "
                "unchecked"
            ),
            choices=MODEL_FORMATS,
            param=value(
                str,
                "savedmodel (run_fn's SavedModel is checked for serving_default) or other (what\n"
                "run_fn wrote to serving_model_dir is published whole, unchecked: TFX's "
                "scikit-learn\n"
                "module's model.pkl).",
                "savedmodel",
            ),
        ),
        Option(
            "serving_accelerator",
            help="prebuilt image variant (default cpu)",
            choices=("cpu", "gpu"),
            param=value(str, "cpu or gpu: which prebuilt image (tf2-cpu or tf2-gpu).", "cpu"),
        ),
        Option(
            "serving_image_region",
            help="multi-region of the prebuilt image (default us)",
            choices=("us", "europe", "asia"),
            param=value(str, "us, europe or asia: the prebuilt image's multi-region.", "us"),
        ),
    ),
)

TRAIN_TFLITE = Group(
    "TFLite",
    description="also write <model-dir>/Format-TFLite/model.tflite, checked against the "
    "SavedModel on the eval examples",
    options=(
        Option(
            "export_tflite",
            help=(
                "convert serving_default to TFLite (chief only; a model that cannot convert ends "
                "the run with exit 4, publishing nothing and keeping the checkpoints for a retry)"
            ),
            action=argparse.BooleanOptionalAction,
            param=value(
                bool,
                (
                    "Also write <model>/Format-TFLite/model.tflite (TFLite built-in ops), checked "
                    "against the\n"
                    "SavedModel on the eval examples; the model's metadata records its size, "
                    "quantization and "
                    "the\nlargest output difference. A model that cannot convert fails the task "
                    "and publishes "
                    "nothing;\nthe checkpoints are kept, so a retry resumes from them."
                ),
                False,
            ),
        ),
        Option(
            "tflite_quantization",
            help="post-training quantization (default none)",
            choices=("none", "dynamic", "float16"),
            param=value(
                str,
                "none, dynamic or float16 (post-training quantization of the TFLite model).",
                "none",
            ),
        ),
        Option(
            "tflite_tolerance",
            help=(
                "largest absolute output difference from the SavedModel accepted (default 1e-4 for "
                "none, 0.05 for float16, 0.1 for dynamic)"
            ),
            metavar="X",
            param=value(
                float,
                (
                    "Largest absolute output difference from the SavedModel accepted; unset: 1e-4 "
                    "for\nnone, 0.05 for float16, 0.1 for dynamic."
                ),
                None,
            ),
        ),
    ),
)

CACHE_CHOICES = ("auto", "memory", "off")  # records/example_dataset.py's cache modes
ACCELERATOR_CHECK = one_of(ACCELERATORS, "auto")
ACCELERATOR_PARAM = value(
    str,
    (
        "auto: every GPU of the machine, failing before training when TensorFlow cannot use\n"
        "them; gpu: fail without one; cpu: train on the CPU on purpose."
    ),
    "auto",
)

TRAIN_SPEED = Group(
    "speed",
    description="applied to every model.compile in the module that does not set them itself",
    options=(
        Option(
            "mixed_precision",
            help="Keras global dtype policy while run_fn runs: compute in 16 bits, variables in "
            "float32",
            choices=("mixed_float16", "mixed_bfloat16"),
            param=value(
                str,
                (
                    "Keras global dtype policy while run_fn runs: mixed_float16 or mixed_bfloat16 "
                    "(empty:\nthe module's own)."
                ),
                "",
            ),
        ),
        Option(
            "jit_compile",
            help=(
                "compile train/eval steps with XLA, or not (model.compile(jit_compile=...)); "
                "default: Keras' auto (off on CPU and under a tf.distribute strategy)"
            ),
            action=argparse.BooleanOptionalAction,
            param=value(
                bool,
                "Compile train/eval steps with XLA (model.compile(jit_compile=...)); unset: Keras' "
                "default.",
                None,
            ),
        ),
        Option(
            "cache_examples",
            check=one_of(CACHE_CHOICES, "auto"),
            choices=CACHE_CHOICES,
            help=(
                "keep the decompressed records of the data accessor's datasets in memory after the "
                "first epoch (auto: when they fit, see the docs; memory: always; off: never)"
            ),
            param=value(
                str,
                (
                    "auto, memory or off: keep the data accessor's decompressed records in memory "
                    "after\nthe first epoch (auto: when they fit)."
                ),
                "auto",
            ),
        ),
        Option(
            "steps_per_execution",
            help=(
                "batches run per tf.function call (model.compile(steps_per_execution=N)); "
                "callbacks then see every N-th batch"
            ),
            metavar="N",
            param=value(
                int,
                "Batches per tf.function call (model.compile(steps_per_execution=N)); 0: "
                "the\nmodule's own.",
                0,
            ),
        ),
    ),
)

TRAIN = Verb(
    "train",
    help="train a model with a user's run_fn (TFX Trainer compatible)",
    description="Run the user's run_fn(fn_args) under a tf.distribute strategy and publish the "
    "serving model to <model-dir>/Format-Serving.",
    component=Component(
        "generic_trainer",
        "Trains a TensorFlow/Keras model with the run_fn of a TFX-style module "
        "file (TFX Trainer compatible).",
        run_identity=True,
    ),
    groups=(
        Group(
            "inputs",
            _training_inputs(
                Option(
                    "run_fn",
                    check=text("run_fn"),
                    help="function to call in the module (default run_fn)",
                    metavar="NAME",
                    param=value(str, "The function to call in the module.", "run_fn"),
                )
            ),
        ),
        TRAIN_TASK,
        TRAIN_OUTPUTS,
        TRAIN_SERVING,
        TRAIN_TFLITE,
        TRAIN_SPEED,
        *common_groups(
            checks={
                "strategy": text("auto"),
                "cluster_timeout": duration(),
                "accelerator": ACCELERATOR_CHECK,
            },
            params={
                "keras": value(
                    str,
                    "What tf.keras means for the module: auto, keras3 or tf_keras (unset: auto, "
                    "the tf.keras TFX\ngives the module: tf_keras when it imports tfx, "
                    "tensorflow_transform "
                    "or tfx_bsl,\nelse Keras 3; a set TF_USE_LEGACY_KERAS decides instead).",
                    None,
                ),
                "strategy": value(
                    str,
                    "tf.distribute strategy: auto, default, one_device, mirrored or "
                    "multi_worker_mirrored.",
                    "auto",
                ),
                "cluster_timeout": value(
                    float,
                    "Multi-worker: seconds to wait for every replica to connect before failing "
                    "(default 900).",
                    None,
                ),
                "accelerator": ACCELERATOR_PARAM,
            },
        ),
    ),
)

TUNE_OUTPUTS = Group(
    "outputs",
    (
        Option(
            "best_hyperparameters_dir",
            help="where best_hyperparameters.txt goes (keras-tuner HyperParameters config as JSON)",
            metavar="DIR",
            output="dir",
            published=True,
            param=output(
                "Artifact",
                "Dir holding best_hyperparameters.txt (keras-tuner config JSON), for the trainer.",
                name="best_hyperparameters",
            ),
        ),
        Option(
            "tuner_results_file",
            help="write every completed trial here, best first (TFX's tuner_results.json)",
            metavar="FILE",
            output="file",
            param=output(
                "Artifact",
                "Every trial: tuner_results.json, a list of {trial_id, score, **values}.",
                name="tuner_results",
                fills="tuner_results_dir",
            ),
        ),
        Option(
            "checkpoint_dir",
            help=(
                "checkpoints, stable across restarts (default $AIP_CHECKPOINT_DIR, else "
                "<best-hyperparameters-dir>.checkpoints); with --run-id, under DIR/<run id>/<task "
                "name>"
            ),
            metavar="DIR",
            output="dir",
            param=value(
                str,
                (
                    "Base dir of the search state (keras-tuner's trials); the run's are under\n"
                    "<checkpoint_dir>/<pipeline run uuid>/<task name>, so a retried task resumes "
                    "its own search and two\n"
                    "runs never share one. Empty: $AIP_CHECKPOINT_DIR the same way, else beside "
                    "best_hyperparameters."
                ),
                "",
            ),
        ),
        *_run_identity(),
        Option(
            "metrics_file",
            check=output_file,
            help="write the best score and trial counts here as flat JSON",
            metavar="FILE",
            output="file",
            param=output("Metrics", "The best trial's score.", name="metrics", fills=""),
        ),
        Option(
            "report_file",
            check=output_file,
            help="write an HTML report of the run here",
            metavar="FILE",
            output="file",
            param=output(
                "HTML",
                "HTML report of the search: trials table and score per trial.",
                name="report",
            ),
        ),
    ),
)

TUNE = Verb(
    "tune",
    help="search hyperparameters with a user's tuner_fn (TFX Tuner compatible)",
    description="Run the keras-tuner search the user's tuner_fn(fn_args) returns (TunerFnResult), "
    "resumably "
    "(a re-run continues it) and in parallel over the replicas of TF_CONFIG/CLUSTER_SPEC, and "
    "write <best-hyperparameters-dir>/best_hyperparameters.txt for `train --hyperparameters`.",
    component=Component(
        "generic_tuner",
        "Searches hyperparameters with the tuner_fn of a TFX-style module file "
        "(TFX Tuner compatible).",
        run_identity=True,
    ),
    groups=(
        Group(
            "inputs",
            options.replace(
                _training_inputs(
                    Option(
                        "tuner_fn",
                        check=text("tuner_fn"),
                        help="function to call in the module (default tuner_fn)",
                        metavar="NAME",
                        param=value(
                            str,
                            "The function to call in the module; returns TunerFnResult(tuner, "
                            "fit_kwargs).",
                            "tuner_fn",
                        ),
                    )
                ),
                # the tuner's own wording; module_file is required (there is no Task API to give
                # instead)
                module_file={
                    "param": value(
                        str,
                        "The user module: a .py path, a gs:// URI, or a dotted module name in "
                        "the image.",
                    )
                },
                hyperparameters={
                    "param": artifact(
                        "Artifact", "Base hyperparameters, fn_args.hyperparameters.", None
                    )
                },
                base_model={
                    "param": artifact(
                        "Model", "A model to warm-start trials from, fn_args.base_model.", None
                    )
                },
                train_args={"param": value(dict, '{"num_steps": N, "splits": ["train"]}.', None)},
            ),
        ),
        Group(
            "search",
            (
                Option(
                    "max_trials",
                    help="override the tuner's max_trials (0 or unset: the tuner_fn's own)",
                    metavar="N",
                    param=value(int, "Override the tuner's max_trials (0: the tuner_fn's own).", 0),
                ),
            ),
        ),
        TUNE_OUTPUTS,
        *common_groups(
            TUNE_STRATEGIES,
            cluster_timeout=False,
            checks={"accelerator": ACCELERATOR_CHECK},
            params={
                "strategy": value(
                    str,
                    "tf.distribute strategy of each trial: auto, default, one_device or mirrored.",
                    "auto",
                ),
                "accelerator": ACCELERATOR_PARAM,
            },
        ),
        Group(
            "cluster",
            (
                Option(
                    "worker_timeout",
                    check=duration(600.0),
                    help=(
                        "the chief gives up when a worker running a trial is silent this long, and "
                        "workers when the chief is unreachable this long (default 600)"
                    ),
                    metavar="SECONDS",
                    param=value(
                        float,
                        "Distributed tuning: seconds the chief waits for a silent worker before "
                        "failing.",
                        600.0,
                    ),
                ),
            ),
        ),
    ),
)
