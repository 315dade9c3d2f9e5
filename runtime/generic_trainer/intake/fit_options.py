"""The inputs of train and tune, each declared once: its flag, its KFP component input, its request
check.

A verb's `Verb` lists its groups in `--help` order; see options.py for how each `Option` becomes a
flag, a component input and a request field.
"""

from __future__ import annotations

from generic_trainer.intake import options
from generic_trainer.intake.common_options import common_groups
from generic_trainer.intake.fit_input_options import (
    run_identity,
    training_inputs,
)
from generic_trainer.intake.options import (
    Component,
    Group,
    Option,
    Verb,
    artifact,
    output,
    value,
)
from generic_trainer.intake.request import (
    TUNE_STRATEGIES,
    duration,
    output_file,
    text,
)
from generic_trainer.intake.train_extra_options import (
    ACCELERATOR_CHECK,
    ACCELERATOR_PARAM,
    TRAIN_SERVING,
    TRAIN_SPEED,
    TRAIN_TFLITE,
)
from generic_trainer.intake.train_run_options import TRAIN_OUTPUTS, TRAIN_TASK

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
            training_inputs(
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
        *run_identity(),
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
                training_inputs(
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
