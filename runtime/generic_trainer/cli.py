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

from generic_trainer import data_options, fit_options, judge_options, options, output_checks
from generic_trainer.common_options import EPILOG
from generic_trainer.errors import TrainerError

log = logging.getLogger("generic_trainer")
# Every verb's inputs, declared once (flags, component inputs, request checks), in `--help` order.
DECLARATIONS = (fit_options.TRAIN, fit_options.TUNE, judge_options.EVALUATE, judge_options.INFRA_VALIDATE,
                data_options.IMPORT_EXAMPLES, data_options.TRANSFORM)

def build_parser() -> argparse.ArgumentParser:
    """The `generic-trainer` parser: one sub-parser per verb, its flags from the verb's declaration."""
    parser = argparse.ArgumentParser(
        prog="generic-trainer",
        description="Train TensorFlow/Keras models from a user's module, as a KFP component, a container, "
                    "or a Vertex AI custom job.", epilog=EPILOG)
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    sub.required = True
    for verb in DECLARATIONS:
        options.add_parser(sub, verb, EPILOG)
    from generic_trainer import vertex  # light: google-cloud-aiplatform loads only when a job is built

    vertex.add_parser(sub)
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
        if result.model_info:
            from generic_trainer import serving_container

            serving_container.write_schemata(request.model_dir, result.model_info)  # Vertex's predictSchemata
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


VERBS = {"train": _train, "tune": _tune, "vertex-job": _vertex_job, "evaluate": _evaluate,
         "infra-validate": _infra_validate, "import-examples": _import_examples, "transform": _transform}


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
