"""Command line: `generic-trainer <verb> [flags]` or `generic-trainer <verb> --executor-input JSON`.

Parses flags (or KFP's executor input) into one request, sets what must be decided before
TensorFlow is imported (which Keras `tf.keras` means), runs the verb, and turns errors into
one clear message and an exit code. `--help` and argument errors never import TensorFlow.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence

from generic_trainer import output_checks
from generic_trainer.cluster import STRATEGIES
from generic_trainer.errors import TrainerError
from generic_trainer.request import TUNE_STRATEGIES

log = logging.getLogger("generic_trainer")

EPILOG = "Exit codes: 0 ok, 2 bad input, 3 user code failed, 4 bad outputs, 5 cluster failure, 143 preempted."


def _add_common(p: argparse.ArgumentParser, strategies: tuple[str, ...] = STRATEGIES,
                cluster_timeout: bool = True, training: bool = True) -> None:
    g = p.add_argument_group("KFP")
    g.add_argument("--executor-input", metavar="JSON",
                   help="KFP executor input ('{{$}}'): every input and output is read from it")
    g.add_argument("--executor-output-file", metavar="FILE",
                   help="where to write the executor output (default: outputs.outputFile of the executor input)")
    r = p.add_argument_group("runtime")
    if training:  # evaluate and infra-validate run no user code and no strategy
        r.add_argument("--keras", choices=("keras3", "tf_keras"), default=None,
                       help="what tf.keras means for the user's module: Keras 3 (default) or legacy tf_keras "
                            "(default tf_keras when TF_USE_LEGACY_KERAS=1 is set; decided before TensorFlow loads)")
        r.add_argument("--strategy", default=None, choices=strategies,
                       help="tf.distribute strategy; auto (default) matches GPUs" + (
                           " and TF_CONFIG/CLUSTER_SPEC" if "multi_worker_mirrored" in strategies else "")
                       + "; any other value wins over a Task config's runtime.distribution_strategy")
    if cluster_timeout and training:
        r.add_argument("--cluster-timeout", type=_seconds_flag, metavar="SECONDS",
                       help="multi-worker: fail (exit 5) when the replicas have not all connected within this "
                            "time (default 900)")
    r.add_argument("--gcs-root", metavar="DIR",
                   help="where gs:// is mounted (default /gcs, or $GENERIC_TRAINER_GCS_ROOT)")
    r.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))


def _seconds_flag(text: str) -> float:
    """argparse type of a flag in seconds: request.seconds' check, its message as argparse's error."""
    from generic_trainer.errors import UserInputError
    from generic_trainer.request import seconds

    try:
        return seconds("", text)
    except UserInputError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix(": ")) from None


def _add_inputs(p: argparse.ArgumentParser, fn_flag: str, fn_default: str) -> None:
    """The inputs train and tune share (those of TFX's Trainer and Tuner), with the verb's function flag."""
    g = p.add_argument_group("inputs")
    g.add_argument("--examples", metavar="DIR", help="examples in TFX layout: DIR/Split-<name>/*.gz (gs:// allowed)")
    g.add_argument("--module-file", metavar="PATH_OR_URI",
                   help="user module: a .py file, a gs:// URI, or a dotted module name")
    g.add_argument(fn_flag, metavar="NAME", help=f"function to call in the module (default {fn_default})")
    g.add_argument("--module-sha256", metavar="HEX", help="refuse to run a module file whose sha256 differs")
    g.add_argument("--schema", metavar="FILE_OR_DIR", help="tensorflow-metadata Schema (schema.pbtxt or its dir)")
    g.add_argument("--transform-graph", metavar="DIR",
                   help="tensorflow-transform output dir (fn_args.transform_output)")
    g.add_argument("--hyperparameters", metavar="FILE_OR_DIR",
                   help="JSON hyperparameters (keras-tuner best_hyperparameters.txt or its dir)")
    g.add_argument("--base-model", metavar="DIR", help="model to warm-start from (fn_args.base_model)")
    g.add_argument("--train-steps", metavar="N", help="training steps (fn_args.train_steps); 0 or unset: None")
    g.add_argument("--eval-steps", metavar="N", help="evaluation steps (fn_args.eval_steps)")
    g.add_argument("--train-splits", metavar="a,b", help="splits to train on (default train)")
    g.add_argument("--eval-splits", metavar="a,b", help="splits to evaluate on (default eval)")
    g.add_argument("--custom-config", metavar="JSON", help="JSON object passed as fn_args.custom_config")


def _add_run_outputs(o, checkpoint_default: str, metrics: str) -> None:
    """Output flags train and tune share."""
    o.add_argument("--checkpoint-dir", metavar="DIR",
                   help="checkpoints, stable across restarts (default $AIP_CHECKPOINT_DIR, else "
                        f"{checkpoint_default}); with --run-id, under DIR/<run id>/<task name>")
    o.add_argument("--run-id", metavar="ID",
                   help="the pipeline run this is a task of (the components pass KFP's run uuid): the checkpoint dir "
                        "(given or $AIP_CHECKPOINT_DIR) gets <run id>/<task name> appended, so retries of the task "
                        "resume it and other runs never do")
    o.add_argument("--task-name", metavar="NAME", help="the pipeline task's name (with --run-id; KFP fills it)")
    o.add_argument("--metrics-file", metavar="FILE", help=f"write {metrics} here as flat JSON")
    o.add_argument("--report-file", metavar="FILE", help="write an HTML report of the run here")


def _add_train(sub) -> None:
    p = sub.add_parser(
        "train", help="train a model with a user's run_fn (TFX Trainer compatible)",
        description="Run the user's run_fn(fn_args) under a tf.distribute strategy and publish the "
                    "serving model to <model-dir>/Format-Serving.", epilog=EPILOG)
    _add_inputs(p, "--run-fn", "run_fn")
    t = p.add_argument_group("Task API", "train a generic_trainer.Task with the runtime's own loop instead of a run_fn")
    t.add_argument("--task", metavar="MODULE:CLASS",
                   help="the Task class: a .py file, gs:// URI or dotted module, then :Class (replaces --module-file)")
    t.add_argument("--experiment", metavar="NAME", help="a registered experiment config (default: the Task's defaults)")
    t.add_argument("--config-file", metavar="FILE", action="append",
                   help="YAML/JSON experiment overrides, applied in order (repeatable)")
    t.add_argument("--config", metavar="YAML",
                   help="inline YAML/JSON overrides (the KFP 'config' parameter), after --config-file")
    t.add_argument("--params-override", metavar="a.b=c,...",
                   help="last overrides, e.g. trainer.train_steps=500,task.train_data.global_batch_size=64")
    t.add_argument("--mode", choices=("train", "eval", "train_and_eval", "continuous_eval"),
                   help="what the loop does (default train_and_eval)")
    o = p.add_argument_group("outputs")
    o.add_argument("--model-dir", metavar="DIR", help="model output; serving model at DIR/Format-Serving "
                                                       "(default $AIP_MODEL_DIR)")
    o.add_argument("--model-run-dir", metavar="DIR", help="TensorBoard logs and run outputs "
                                                          "(default $AIP_TENSORBOARD_LOG_DIR, else DIR/logs)")
    _add_run_outputs(o, "<model-run-dir>/checkpoints", "the final eval metrics")
    _add_serving(p)
    _add_tflite(p)
    _add_speed(p)
    _add_common(p)


def _add_tflite(p: argparse.ArgumentParser) -> None:
    """TFLite export beside the SavedModel (see tflite_export)."""
    t = p.add_argument_group("TFLite", "also write <model-dir>/Format-TFLite/model.tflite, checked against the "
                                       "SavedModel on the eval examples")
    t.add_argument("--export-tflite", action="store_true", default=None,
                   help="convert serving_default to TFLite (chief only; a model that cannot convert ends the run "
                        "with exit 4 after the SavedModel is published)")
    t.add_argument("--tflite-quantization", choices=("none", "dynamic", "float16"),
                   help="post-training quantization (default none)")
    t.add_argument("--tflite-tolerance", metavar="X",
                   help="largest absolute output difference from the SavedModel accepted (default 1e-4 for none, "
                        "0.05 for float16, 0.1 for dynamic)")


def _add_serving(p: argparse.ArgumentParser) -> None:
    """The serving container the model artifact names for Vertex AI Model Registry (see serving_container)."""
    s = p.add_argument_group("serving", "the container Vertex AI Model Registry serves the model with (KFP metadata)")
    s.add_argument("--serving-image", metavar="IMAGE",
                   help="serving container image (default: Vertex's prebuilt TF Serving image for this TensorFlow)")
    s.add_argument("--serving-accelerator", choices=("cpu", "gpu"), help="prebuilt image variant (default cpu)")
    s.add_argument("--serving-image-region", choices=("us", "europe", "asia"),
                   help="multi-region of the prebuilt image (default us)")


def _add_speed(p: argparse.ArgumentParser) -> None:
    """Speed options applied to the module's own model.compile (its explicit arguments win)."""
    s = p.add_argument_group("speed", "applied to every model.compile in the module that does not set them itself")
    s.add_argument("--mixed-precision", choices=("mixed_float16", "mixed_bfloat16"),
                   help="Keras global dtype policy while run_fn runs: compute in 16 bits, variables in float32")
    s.add_argument("--jit-compile", action=argparse.BooleanOptionalAction, default=None,
                   help="compile train/eval steps with XLA, or not (model.compile(jit_compile=...)); default: "
                        "Keras' auto (off on CPU and under a tf.distribute strategy)")
    s.add_argument("--steps-per-execution", metavar="N",
                   help="batches run per tf.function call (model.compile(steps_per_execution=N)); "
                        "callbacks then see every N-th batch")


def _add_tune(sub) -> None:
    p = sub.add_parser(
        "tune", help="search hyperparameters with a user's tuner_fn (TFX Tuner compatible)",
        description="Run the keras-tuner search the user's tuner_fn(fn_args) returns (TunerFnResult), resumably "
                    "(a re-run continues it) and in parallel over the replicas of TF_CONFIG/CLUSTER_SPEC, and "
                    "write <best-hyperparameters-dir>/best_hyperparameters.txt for `train --hyperparameters`.",
        epilog=EPILOG)
    _add_inputs(p, "--tuner-fn", "tuner_fn")
    p.add_argument_group("search").add_argument(
        "--max-trials", metavar="N", help="override the tuner's max_trials (0 or unset: the tuner_fn's own)")
    o = p.add_argument_group("outputs")
    o.add_argument("--best-hyperparameters-dir", metavar="DIR",
                   help="where best_hyperparameters.txt goes (keras-tuner HyperParameters config as JSON)")
    o.add_argument("--tuner-results-file", metavar="FILE",
                   help="write every completed trial here, best first (TFX's tuner_results.json)")
    _add_run_outputs(o, "<best-hyperparameters-dir>.checkpoints", "the best score and trial counts")
    _add_common(p, strategies=TUNE_STRATEGIES, cluster_timeout=False)
    p.add_argument_group("cluster").add_argument(
        "--worker-timeout", metavar="SECONDS",
        help="the chief gives up when a worker running a trial is silent this long, and workers when the "
             "chief is unreachable this long (default 600)")


def _add_evaluate(sub) -> None:
    p = sub.add_parser(
        "evaluate", help="evaluate a model against thresholds and a baseline, and bless it (TFX Evaluator)",
        description="Compute metrics of the model's serving_default on the eval split (overall and per slice), "
                    "compare them with the eval config's thresholds and with a baseline model, and write a "
                    "TFX-style blessing (BLESSED or NOT_BLESSED), the metrics and an HTML report. "
                    "NOT_BLESSED is a result, not a failure: the exit code is 0.", epilog=EPILOG)
    g = p.add_argument_group("inputs")
    g.add_argument("--model", metavar="DIR", help="the model to judge: a train model dir (DIR/Format-Serving) or a "
                                                  "SavedModel dir")
    g.add_argument("--baseline-model", metavar="DIR", help="the model to compare with (e.g. the last blessed one); "
                                                           "without it change thresholds are skipped")
    g.add_argument("--examples", metavar="DIR", help="examples in TFX layout: DIR/Split-<name>/*.gz (gs:// allowed)")
    g.add_argument("--schema", metavar="FILE_OR_DIR", help="tensorflow-metadata Schema: label and slice features "
                                                           "are checked against it")
    g.add_argument("--eval-config", metavar="FILE_OR_JSON",
                   help='JSON (or a file of it): {"label_key": ..., "prediction_key", "problem", "metrics", '
                        '"slices": [["feature"]], "thresholds": {"accuracy": {"lower_bound": 0.8, "change": '
                        '{"direction": "higher_is_better", "absolute": -0.01}}}}; see the README')
    g.add_argument("--eval-splits", metavar="a,b", help="splits to evaluate on (default eval)")
    g.add_argument("--batch-size", metavar="N", help="examples per serving_default call (default 256)")
    o = p.add_argument_group("outputs")
    o.add_argument("--blessing-dir", metavar="DIR", help="where BLESSED or NOT_BLESSED goes (the reasons inside)")
    o.add_argument("--metrics-file", metavar="FILE", help="write the whole evaluation (overall, slices, baseline, "
                                                          "thresholds) here as JSON")
    o.add_argument("--report-file", metavar="FILE", help="write an HTML report here")
    s = p.add_argument_group("sandbox", "the models are served in a separate process with these limits; a model "
                                        "that passes them is NOT_BLESSED with the reason")
    s.add_argument("--timeout", metavar="SECONDS", help="the evaluation process must load the models, and then "
                                                        "answer each batch, within this time (default 300)")
    s.add_argument("--memory-limit", metavar="SIZE", help="address-space limit of the evaluation process, e.g. 8GiB "
                                                          "(default), 512MiB; it then runs on CPU. 0: none (GPUs "
                                                          "are used)")
    _add_common(p, cluster_timeout=False, training=False)


def _add_infra_validate(sub) -> None:
    p = sub.add_parser(
        "infra-validate", help="try the model in a sandboxed serving process before it ships (TFX InfraValidator)",
        description="Load the model in a separate process with a time and memory limit, send batches of "
                    "serialized tf.Examples to serving_default, check every request succeeds with the signature's "
                    "output keys and shapes, record p50/p99 latency, and write INFRA_BLESSED or INFRA_NOT_BLESSED "
                    "(with the reason). A broken model is a result, not a failure: the exit code is 0.",
        epilog=EPILOG)
    g = p.add_argument_group("inputs")
    g.add_argument("--model", metavar="DIR", help="a train model dir (DIR/Format-Serving) or a SavedModel dir")
    g.add_argument("--examples", metavar="DIR", help="examples in TFX layout: DIR/Split-<name>/*.gz (gs:// allowed)")
    g.add_argument("--eval-splits", metavar="a,b", help="splits the requests are taken from (default eval)")
    g.add_argument("--model-blessing", metavar="DIR",
                   help="the evaluator's blessing: a NOT_BLESSED model is not loaded and is INFRA_NOT_BLESSED")
    s = p.add_argument_group("sandbox")
    s.add_argument("--num-requests", metavar="N", help="timed requests (default 10; after two untimed warm-ups)")
    s.add_argument("--batch-size", metavar="N", help="examples per request (default 8)")
    s.add_argument("--timeout", metavar="SECONDS", help="the serving process must load and answer everything "
                                                        "within this time (default 300)")
    s.add_argument("--memory-limit", metavar="SIZE", help="address-space limit of the serving process, e.g. 8GiB "
                                                          "(default), 512MiB; 0: none. It runs on CPU")
    o = p.add_argument_group("outputs")
    o.add_argument("--blessing-dir", metavar="DIR", help="where INFRA_BLESSED or INFRA_NOT_BLESSED goes")
    o.add_argument("--metrics-file", metavar="FILE", help="write load time and p50/p99 latency here as JSON")
    _add_common(p, cluster_timeout=False, training=False)


def _add_beam(p: argparse.ArgumentParser) -> None:
    p.add_argument_group("beam").add_argument(
        "--beam-pipeline-args", metavar="'ARGS'", action="append",
        help="Beam pipeline options, passed through (give them after '=' in one quoted string, e.g. "
             "--beam-pipeline-args='--runner=DataflowRunner --project=P --region=R --temp_location=gs://B/tmp'); "
             "default: the DirectRunner here with one worker per CPU core")


def _add_import_examples(sub) -> None:
    p = sub.add_parser(
        "import-examples", help="CSV or Parquet files to TFX Examples (ExampleGen's layout), on Apache Beam",
        description="Read tables, encode each row as a tf.Example (empty cells left out), split the rows by a "
                    "stable hash (or take one pattern per split), and write <output>/Split-<name>/*.gz plus "
                    "<output>/schema.pbtxt (the schema given, or inferred: INT, FLOAT or BYTES per column).",
        epilog=EPILOG)
    g = p.add_argument_group("inputs")
    g.add_argument("--input", metavar="PATTERN", help="files to read, a glob (gs:// allowed), e.g. 'data/*.csv'")
    g.add_argument("--format", choices=("csv", "parquet"), help="file format (default csv; CSV needs a header line)")
    g.add_argument("--schema", metavar="FILE_OR_DIR", help="tensorflow-metadata Schema giving each column's type; "
                                                           "the columns must match its features")
    g.add_argument("--splits", metavar="name:buckets,...",
                   help="hash buckets per split (default train:2,eval:1, as TFX's CsvExampleGen)")
    g.add_argument("--input-splits", metavar="name=PATTERN,...",
                   help="one pattern per split instead of --input (no hashing)")
    o = p.add_argument_group("outputs")
    o.add_argument("--output", metavar="DIR", help="the Examples directory to create (must not exist, or be empty)")
    o.add_argument("--schema-output", metavar="DIR", help="also write schema.pbtxt into this directory")
    _add_beam(p)
    _add_common(p, cluster_timeout=False, training=False)


def _add_transform(sub) -> None:
    p = sub.add_parser(
        "transform", help="tf.Transform: analyze and transform examples with a module's preprocessing_fn (TFX "
                          "Transform), on Apache Beam",
        description="Run the module's preprocessing_fn with tensorflow-transform: analyze the analyze splits, write "
                    "the transform graph (transform_fn/, transformed_metadata/, metadata/) and, when asked, the "
                    "transformed examples (Split-<name>/transformed_examples-*.gz), as TFX's Transform does.",
        epilog=EPILOG)
    g = p.add_argument_group("inputs")
    g.add_argument("--examples", metavar="DIR",
                   help="raw examples in TFX layout: DIR/Split-<name>/*.gz (gs:// allowed)")
    g.add_argument("--schema", metavar="FILE_OR_DIR", help="the raw examples' tensorflow-metadata Schema")
    g.add_argument("--module-file", metavar="PATH_OR_URI",
                   help="user module: a .py file, a gs:// URI, or a dotted module name")
    g.add_argument("--preprocessing-fn", metavar="NAME", help="function to call (default preprocessing_fn)")
    g.add_argument("--module-sha256", metavar="HEX", help="refuse to run a module file whose sha256 differs")
    g.add_argument("--analyze-splits", metavar="a,b", help="splits the analyzers see (default train)")
    g.add_argument("--transform-splits", metavar="a,b", help="splits to transform (default train,eval)")
    o = p.add_argument_group("outputs")
    o.add_argument("--transform-graph", metavar="DIR", help="the transform graph to create (TFTransformOutput dir)")
    o.add_argument("--transformed-examples", metavar="DIR", help="also write the transformed examples here")
    _add_beam(p)
    _add_common(p, cluster_timeout=False, training=False)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="generic-trainer",
        description="Train TensorFlow/Keras models from a user's module, as a KFP component, a container, "
                    "or a Vertex AI custom job.", epilog=EPILOG)
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    sub.required = True
    _add_train(sub)
    _add_tune(sub)
    _add_evaluate(sub)
    _add_infra_validate(sub)
    _add_import_examples(sub)
    _add_transform(sub)
    from generic_trainer import vertex  # light: google-cloud-aiplatform loads only when a job is built

    vertex.add_parser(sub)
    from generic_trainer import export_tflite  # light: TensorFlow loads only when the verb runs

    export_tflite.add_parser(sub, EPILOG)
    return parser


def _setup_logging(level: str) -> None:
    logging.basicConfig(level=level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)
    for noisy in ("tensorflow", "h5py", "urllib3", "google", "apache_beam"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(level)))
    absl = logging.getLogger("absl")  # the user module's absl.logging lines at `level`, libraries' from WARNING
    absl.setLevel(level)
    absl.addFilter(_drop_tft_keras_warning)
    absl.addFilter(user_absl_records)


_LIBRARY_DIRS = ("site-packages", "dist-packages")
# Library files that log through absl only what the user asked for: `model.summary(print_fn=absl.logging.info)`.
_ASKED_FOR = (os.path.join("keras", "src", "utils", "summary_utils.py"),)


def user_absl_records(record: logging.LogRecord) -> bool:
    """Keep absl records below WARNING only when user code (not an installed library) logged them.

    TFX module files log with `absl.logging`; their lines are renamed `<module> (absl)` so the log
    says which file wrote them. Libraries (Keras, TensorFlow) log chatter through absl too; a model
    summary the module asked for (`model.summary(print_fn=absl.logging.info)`) is kept.
    """
    path = record.pathname = _absl_caller(record.pathname or "")
    library = any(f"{os.sep}{d}{os.sep}" in path for d in _LIBRARY_DIRS) or path.startswith(sys.base_prefix + os.sep)
    if library:
        return record.levelno >= logging.WARNING or path.endswith(_ASKED_FOR)
    record.name = f"{os.path.splitext(os.path.basename(path))[0] or record.name} (absl)"
    return True


def _absl_caller(path: str) -> str:
    """The file that called absl.logging (the "absl" logger made before absl loads reports absl's own file)."""
    if f"{os.sep}absl{os.sep}logging{os.sep}" not in path:
        return path
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if name != logging.__file__ and f"{os.sep}absl{os.sep}logging{os.sep}" not in name and name != __file__:
            return name
        frame = frame.f_back
    return path


def _drop_tft_keras_warning(record: logging.LogRecord) -> bool:
    """tensorflow-transform warns on import that it wants Keras 2; the runtime chose Keras 3 on purpose
    (`--keras`), and TFT graphs load and serve under it, so the warning would only mislead."""
    return "Tensorflow Transform is only compatible with Keras 2" not in record.getMessage()


def _choose_keras(keras: str | None) -> None:
    """Decide tf.keras before TensorFlow loads (tensorflow-transform would otherwise flip it)."""
    os.environ["TF_USE_LEGACY_KERAS"] = "1" if keras == "tf_keras" else "0"


def _raw_values(args: argparse.Namespace) -> tuple[dict, object]:
    """Flag values, overlaid by the executor input's when running under KFP."""
    from generic_trainer import kfp_io

    values = {k: v for k, v in vars(args).items() if v is not None}
    if not args.executor_input:
        return values, None
    gcs_root = args.gcs_root or os.environ.get("GENERIC_TRAINER_GCS_ROOT") or "/gcs"
    kfp_values, kfp = kfp_io.parse(kfp_io.load(args.executor_input), gcs_root)
    values.update({k: v for k, v in kfp_values.items() if v is not None})
    return values, kfp


def _train(args: argparse.Namespace) -> int:
    from generic_trainer import kfp_io, train
    from generic_trainer.request import build_train_request

    values, kfp = _raw_values(args)
    request = build_train_request(values, kfp=kfp)
    log.info("train request: examples=%s module=%s run_fn=%s model_dir=%s model_run_dir=%s checkpoint_dir=%s "
             "train_steps=%s eval_steps=%s strategy=%s keras=%s custom_config=%s",
             request.examples, request.module_file, request.run_fn, request.model_dir, request.model_run_dir,
             request.checkpoint_dir, request.train_steps, request.eval_steps, request.strategy, request.keras,
             json.dumps(request.redacted_custom_config()))
    if request.task:
        from generic_trainer.redaction import redact
        from generic_trainer.task.config import parse_params_override

        log.info("task request: task=%s experiment=%s mode=%s config_files=%s config=%s params_override=%s",
                 request.task, request.experiment, request.mode, list(request.config_files),
                 f"({len(request.config)} chars)" if request.config else None,
                 json.dumps(redact(parse_params_override(request.params_override))) if request.params_override
                 else None)
    output_checks.check_outputs(request, args.executor_output_file)
    _choose_keras(request.keras)

    def write_executor_output(result: train.TrainResult) -> None:  # before the model is published
        if request.kfp is not None:
            kfp_io.write_executor_output(request.kfp, train.kfp_metadata(request, result),
                                         parameter_values=train.kfp_parameters(request, result),
                                         output_file=args.executor_output_file)

    result = train.run(request, before_publish=write_executor_output)
    if result.is_chief:
        print(json.dumps({"serving_model_dir": result.serving_model_dir, "metrics": result.metrics}, indent=2))
    return 0


def _tune(args: argparse.Namespace) -> int:
    from generic_trainer import kfp_io, tune
    from generic_trainer.request import build_tune_request

    values, kfp = _raw_values(args)
    request = build_tune_request(values, kfp=kfp)
    log.info("tune request: examples=%s module=%s tuner_fn=%s best_hyperparameters_dir=%s checkpoint_dir=%s "
             "train_steps=%s eval_steps=%s max_trials=%s worker_timeout=%gs custom_config=%s",
             request.examples, request.module_file, request.tuner_fn, request.best_hyperparameters_dir,
             request.checkpoint_dir, request.train_steps, request.eval_steps, request.max_trials or "tuner_fn's",
             request.worker_timeout, json.dumps(request.redacted_custom_config()))
    output_checks.check_outputs(request, args.executor_output_file)
    _choose_keras("keras3")

    def write_executor_output(result: tune.TuneResult) -> None:  # before best_hyperparameters is published
        if request.kfp is not None:
            kfp_io.write_executor_output(request.kfp, tune.kfp_metadata(request, result),
                                         output_file=args.executor_output_file)

    result = tune.run(request, before_publish=write_executor_output)
    if result.is_chief:
        print(json.dumps(result.summary(), indent=2))
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from generic_trainer import evaluate, kfp_io
    from generic_trainer.request import build_evaluate_request

    values, kfp = _raw_values(args)
    request = build_evaluate_request(values, kfp=kfp)
    log.info("evaluate request: model=%s baseline_model=%s examples=%s splits=%s schema=%s blessing_dir=%s "
             "eval_config=%s timeout=%gs memory_limit=%s", request.model, request.baseline_model, request.examples,
             ",".join(request.eval_splits), request.schema, request.blessing_dir,
             json.dumps(request.eval_config.to_json()), request.timeout, request.memory_limit or "none")
    output_checks.check_outputs(request, args.executor_output_file)
    result = evaluate.run(request)
    if request.kfp is not None:
        kfp_io.write_executor_output(request.kfp, evaluate.kfp_metadata(request, result),
                                     output_file=args.executor_output_file)
    print(json.dumps(result.summary(), indent=2))
    return 0


def _infra_validate(args: argparse.Namespace) -> int:
    from generic_trainer import infra_validate, kfp_io
    from generic_trainer.request import build_infra_validate_request

    values, kfp = _raw_values(args)
    request = build_infra_validate_request(values, kfp=kfp)
    log.info("infra-validate request: model=%s examples=%s splits=%s model_blessing=%s blessing_dir=%s "
             "requests=%d x %d examples timeout=%gs memory_limit=%s", request.model, request.examples,
             ",".join(request.eval_splits), request.model_blessing, request.blessing_dir, request.num_requests,
             request.batch_size, request.timeout, request.memory_limit or "none")
    output_checks.check_outputs(request, args.executor_output_file)
    result = infra_validate.run(request)
    if request.kfp is not None:
        blessed = {"blessed": result.blessed} if "blessed" in request.kfp.parameters else None  # for dsl.If
        kfp_io.write_executor_output(request.kfp, infra_validate.kfp_metadata(request, result),
                                     parameter_values=blessed, output_file=args.executor_output_file)
    print(json.dumps(result.summary(), indent=2))
    return 0


def _import_examples(args: argparse.Namespace) -> int:
    from generic_trainer import import_examples, kfp_io
    from generic_trainer.request import build_import_examples_request

    values, kfp = _raw_values(args)
    request = build_import_examples_request(values, kfp=kfp)
    log.info("import-examples request: input=%s input_splits=%s format=%s schema=%s output=%s beam_args=%s",
             request.input_pattern, dict(request.input_splits) or None, request.format, request.schema,
             request.output, list(request.beam_args))
    result = import_examples.run(request)
    if request.kfp is not None:
        kfp_io.write_executor_output(request.kfp, import_examples.kfp_metadata(request, result),
                                     output_file=args.executor_output_file)
    print(json.dumps(result.summary(), indent=2))
    return 0


def _transform(args: argparse.Namespace) -> int:
    from generic_trainer import kfp_io
    from generic_trainer.request import build_transform_request

    values, kfp = _raw_values(args)
    request = build_transform_request(values, kfp=kfp)
    log.info("transform request: examples=%s schema=%s module=%s preprocessing_fn=%s analyze_splits=%s "
             "transform_splits=%s transform_graph=%s transformed_examples=%s beam_args=%s", request.examples,
             request.schema, request.module_file, request.preprocessing_fn, ",".join(request.analyze_splits),
             ",".join(request.transform_splits), request.transform_graph, request.transformed_examples,
             list(request.beam_args))
    # tensorflow-transform sets TF_USE_LEGACY_KERAS=1 on import when it is unset; keep Keras 3 unless asked.
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "0")
    from generic_trainer import transform

    result = transform.run(request)
    if request.kfp is not None:
        kfp_io.write_executor_output(request.kfp, transform.kfp_metadata(request, result),
                                     output_file=args.executor_output_file)
    print(json.dumps(result.summary(), indent=2))
    return 0


def _vertex_job(args: argparse.Namespace) -> int:
    from generic_trainer import vertex

    return vertex.main(args)


def _export_tflite(args: argparse.Namespace) -> int:
    from generic_trainer import export_tflite

    return export_tflite.main(args)


VERBS = {"train": _train, "tune": _tune, "vertex-job": _vertex_job, "evaluate": _evaluate,
         "infra-validate": _infra_validate, "import-examples": _import_examples, "transform": _transform,
         "export-tflite": _export_tflite}


def main(argv: Sequence[str] | None = None, end_process: bool | None = None) -> int:
    """Run one verb; returns the exit code.

    As the process's entry point (`end_process`, by default when `argv` is None: the console script and
    `python -m generic_trainer`), threads left running once everything is written do not keep it alive.
    """
    args = build_parser().parse_args(argv)
    _setup_logging(args.log_level)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    ending = argv is None if end_process is None else end_process
    try:
        code = VERBS[args.verb](args)
    except TrainerError as e:
        log.error("%s failed: %s", args.verb, e)
        code = e.exit_code
    except KeyboardInterrupt:
        log.error("interrupted")
        code = 130
    except Exception:
        if not ending:
            raise
        log.exception("%s failed with an unexpected error (a bug of generic-trainer: please report it)", args.verb)
        code = 1
    if ending:
        end_without_stray_threads(code)
    return code


def end_without_stray_threads(code: int) -> None:
    """End the process now with `code` when non-daemon threads (the user's module's) are still running.

    Python would wait for them at exit, forever for a thread that never ends, so the KFP task would never
    finish. Everything is written by now (outputs, executor output): log their names, flush, and `os._exit`.
    Without such threads this returns and the process ends normally.
    """
    import threading

    stray = [t for t in threading.enumerate()
             if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if not stray:
        return
    log.warning("%d thread(s) still running after the run ended, not waited for: %s; ending the process with "
                "exit code %d (threads a module starts should be daemon threads, or joined before run_fn returns)",
                len(stray), ", ".join(repr(t.name) for t in stray), code)
    for handler in logging.getLogger().handlers:
        handler.flush()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
