"""The requests of the training verbs, train and tune: how raw inputs become them (fit/requests.py).

Both are a `FitRequest` (the inputs they share, as TFX's Trainer and Tuner share them: examples,
schema, transform graph, hyperparameters, custom config, steps and splits, checkpoints, metrics and
report), checked for both by one function (`_fit_fields`), plus their own fields. A train run adds
the program it runs: a `RunFnProgram` (a TFX-style module's run_fn) or a `TaskProgram` (a
generic_trainer.Task the runtime's own loop trains); a tune run its module's tuner_fn and the
search's outputs. The simple fields come from the checks declared in fit_options.py
(options.checked_fields); the rest, which depend on each other or on Vertex's AIP_* environment,
are resolved here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from generic_trainer.artifacts import bounded_parse, storage
from generic_trainer.artifacts.files import describe as describe_path
from generic_trainer.artifacts.kfp_io import KfpOutputs
from generic_trainer.errors import UserInputError
from generic_trainer.fit import cluster as cluster_lib
from generic_trainer.fit.requests import RunFnProgram, TaskProgram, TrainRequest, TuneRequest
from generic_trainer.intake import fit_options, options
from generic_trainer.intake.environment import storage_settings
from generic_trainer.intake.fit_values import custom_config, speed_fields, tune_values
from generic_trainer.intake.options import Verb
from generic_trainer.intake.paths import (
    checkpoint_dir,
    examples_dir,
    out_dir,
    split_patterns,
)
from generic_trainer.intake.request import (
    RawInputs,
    check_gcs_timeout,
    existing_path,
    keras_choice,
    module_file,
    raw_inputs,
)
from generic_trainer.intake.task_program import task_program
from generic_trainer.intake.values import (
    ints_from_floats,
)
from generic_trainer.tflite import options as tflite_options

TUNER_RESULTS_FILE = "tuner_results.json"
GPU_ENVIRON = ("PATH", "CUDA_VISIBLE_DEVICES")  # what fit/accelerator.detect reads


def load_hyperparameters(path: str, input_name: str = "--hyperparameters") -> dict[str, Any]:
    """Read a hyperparameters file, or the single file in a directory (TFX's
    best_hyperparameters.txt)."""
    if not os.path.exists(path):
        what = f"is {describe_path(path)}" if os.path.lexists(path) else "does not exist"
        raise UserInputError(input_name, f"{path} {what}")
    from generic_trainer.records import example_files

    path = example_files.one_file(path, input_name, usual="keras-tuner's best_hyperparameters.txt")
    value = bounded_parse.load_json(
        bounded_parse.read_text(path, input_name), input_name, where=f"{path} is "
    )
    if not isinstance(value, dict):
        raise UserInputError(
            input_name, f"{path} must hold a JSON object, got {type(value).__name__}"
        )
    return value


def _train_keras(
    values: Mapping[str, Any], environ: Mapping[str, str], gcs_root: str
) -> tuple[str, str]:
    """(keras3 or tf_keras, why) of a train run: --keras, else TF_USE_LEGACY_KERAS, else auto: Keras
    3 for the Task API, and for a run_fn module the tf.keras TFX would give it (keras_auto, from its
    source)."""
    keras, reason = keras_choice(values, environ)
    if keras != "auto":
        return keras, reason
    if values.get("task"):
        return "keras3", "--keras auto: the Task API runs Keras 3"
    from generic_trainer.fit import keras_auto

    return keras_auto.decide(str(values.get("module_file")), gcs_root, storage_settings(environ))


def _hyperparameters(raw: RawInputs) -> Mapping[str, Any] | None:
    """--hyperparameters: the JSON object of a file, or of the one file in a dir
    (best_hyperparameters.txt)."""
    path = existing_path("--hyperparameters", raw.values.get("hyperparameters"), raw.gcs_root)
    hyperparameters = load_hyperparameters(path) if path else None
    return ints_from_floats(hyperparameters) if raw.kfp and hyperparameters else hyperparameters


def _fit_inputs(
    values: Mapping[str, Any],
    environ: Mapping[str, str] | None,
    kfp: KfpOutputs | None,
    examples_required: bool,
) -> tuple[RawInputs, str]:
    """The first checks of train and tune: the raw inputs, $GENERIC_TRAINER_GCS_TIMEOUT, then
    --examples (its local path; "" when not required and not given)."""
    raw = raw_inputs(values, environ, kfp)
    check_gcs_timeout(raw.environ)
    return raw, examples_dir(values, raw.gcs_root) if examples_required or values.get(
        "examples"
    ) else ""


def _fit_fields(verb: Verb, raw: RawInputs, examples: str, checkpoint_dir: str) -> dict[str, Any]:
    """The one check of what train and tune share: FitRequest's fields, plus the other fields
    `verb`'s declaration checks (fit_options.py; train's run_fn and module_sha256 go to its
    program).

    --hyperparameters (a JSON file, or best_hyperparameters.txt's dir) and --custom-config (its
    secret key names checked) are read here; from KFP, whole numbers its JSON made floats are ints
    again.
    """
    return {
        "examples": examples,
        "checkpoint_dir": checkpoint_dir,
        "hyperparameters": _hyperparameters(raw),
        "custom_config": custom_config(raw),
        "gcs_root": raw.gcs_root,
        "kfp": raw.kfp,
        "storage": storage_settings(raw.environ),
        "cluster": cluster_lib.resolve(raw.environ),
        "gpu_environ": {k: raw.environ[k] for k in GPU_ENVIRON if k in raw.environ},
        **options.checked_fields(verb, raw),
    }


def build_train_request(
    values: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    kfp: KfpOutputs | None = None,
) -> TrainRequest:
    """Validate raw values (keyed by flag name, dashes as underscores) into a TrainRequest."""
    task = values.get("task") or None
    raw, examples_path = _fit_inputs(values, environ, kfp, examples_required=not task)
    environ, gcs_root = raw.environ, raw.gcs_root
    if not task:
        module_file(values)
    elif values.get("module_file"):
        raise UserInputError(
            "--task", "give either --task module:Class or --module-file (run_fn), not both"
        )
    model_dir, model_run_dir, model_run_copy_dir = _model_dirs(values, environ, gcs_root)
    checkpoints = checkpoint_dir(
        values, environ, gcs_root, os.path.join(model_run_copy_dir or model_run_dir, "checkpoints")
    )
    keras, keras_reason = _train_keras(values, environ, gcs_root)
    fields = _fit_fields(fit_options.TRAIN, raw, examples_path, checkpoints)
    sha, run_fn = fields.pop("module_sha256"), fields.pop("run_fn")
    speed = speed_fields(values)
    program = (
        task_program(values, gcs_root, keras, sha)
        if task
        else RunFnProgram(
            module_file=values["module_file"], run_fn=run_fn, module_sha256=sha, **speed
        )
    )
    extras = _model_extras(values)
    return TrainRequest(
        program=program,
        model_dir=model_dir,
        model_run_dir=model_run_dir,
        model_run_copy_dir=model_run_copy_dir,
        keras=keras,
        keras_reason=keras_reason,
        **extras,
        **fields,
        **_split_files(fields, program, extras["tflite"] is not None),
    )


def _split_files(
    fields: Mapping[str, Any], program: RunFnProgram | TaskProgram | None, tflite: bool
) -> dict[str, tuple[str, ...]]:
    """FitRequest's train_files and eval_files: --examples resolved once, for the splits the run
    reads (a run_fn module and tune: both, as TFX's FnArgs; a Task: those of its --mode, and the
    eval splits a TFLite export is checked on)."""
    from generic_trainer.task.config import TRAIN_MODES

    task = program if isinstance(program, TaskProgram) else None
    train = task is None or task.mode in TRAIN_MODES
    evals = task is None or task.mode != "train" or tflite
    examples = fields["examples"]
    return {
        "train_files": split_patterns(examples, fields["train_splits"]) if train else (),
        "eval_files": split_patterns(examples, fields["eval_splits"]) if evals else (),
    }


def _model_extras(values: Mapping[str, Any]) -> dict[str, Any]:
    """The serving container named in the model's metadata and the TFLite export asked for."""
    from generic_trainer.artifacts import serving_container

    image, accelerator, region = serving_container.check_options(
        values.get("serving_image"),
        values.get("serving_accelerator"),
        values.get("serving_image_region"),
    )
    tflite = tflite_options.check_options(
        values.get("export_tflite"),
        values.get("tflite_quantization"),
        values.get("tflite_tolerance"),
    )
    return {
        "serving_image": image,
        "serving_accelerator": accelerator,
        "serving_image_region": region,
        "tflite": tflite,
    }


def _model_dirs(
    values: Mapping[str, Any], environ: Mapping[str, str], gcs_root: str
) -> tuple[str, str, str | None]:
    """--model-dir, --model-run-dir and the dir the logs are copied to at the end (or None).

    Vertex AI TensorBoard uploads AIP_TENSORBOARD_LOG_DIR while the job runs: the module logs
    there, and the logs are copied to the model-run dir given (the KFP artifact) at the end.
    """
    model_dir = out_dir(values.get("model_dir"), "AIP_MODEL_DIR", environ, gcs_root)
    if not model_dir:
        raise UserInputError(
            "--model-dir", "required (or set AIP_MODEL_DIR): where the serving model goes"
        )
    model_run_dir = out_dir(
        values.get("model_run_dir"), "AIP_TENSORBOARD_LOG_DIR", environ, gcs_root
    ) or os.path.join(model_dir, "logs")
    tensorboard_dir = out_dir(None, "AIP_TENSORBOARD_LOG_DIR", environ, gcs_root)
    if tensorboard_dir and tensorboard_dir != model_run_dir:
        return model_dir, tensorboard_dir, model_run_dir
    return model_dir, model_run_dir, None


def build_tune_request(
    values: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    kfp: KfpOutputs | None = None,
) -> TuneRequest:
    """Validate raw values (keyed by flag name, dashes as underscores) into a TuneRequest."""
    raw, examples_path = _fit_inputs(values, environ, kfp, examples_required=True)
    environ, gcs_root = raw.environ, raw.gcs_root
    module = module_file(values)
    best_dir = values.get("best_hyperparameters_dir")
    best_dir = os.path.normpath(storage.local_path(best_dir, gcs_root)) if best_dir else None
    if not best_dir:
        raise UserInputError(
            "--best-hyperparameters-dir",
            "required: where best_hyperparameters.txt goes (the trainer's --hyperparameters)",
        )
    results_file = values.get("tuner_results_file") or None
    if not results_file and values.get("tuner_results_dir"):
        results_file = os.path.join(values["tuner_results_dir"], TUNER_RESULTS_FILE)
    # Stable across restarts of the same job (same outputs): a re-run finds the search state again.
    checkpoints = checkpoint_dir(values, environ, gcs_root, best_dir + ".checkpoints")
    strategy, max_trials = tune_values(values, environ)
    fields = _fit_fields(fit_options.TUNE, raw, examples_path, checkpoints)
    return TuneRequest(
        module_file=module,
        best_hyperparameters_dir=best_dir,
        tuner_results_file=storage.local_path(results_file, gcs_root) if results_file else None,
        max_trials=max_trials,
        strategy=strategy,
        **fields,
        **_split_files(fields, None, tflite=False),
    )
