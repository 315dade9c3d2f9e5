"""Command line: `generic-trainer <verb> [flags]` or `generic-trainer <verb> --executor-input JSON`.

Parses flags (or KFP's executor input) into one request, sets what must be decided before
TensorFlow is imported (which Keras `tf.keras` means), runs the verb, and turns errors into
one clear message and an exit code. `--help` and argument errors never import TensorFlow. As the
process's entry point, the verb itself runs in a child process that supervisor.py watches.

The flags are not written here: each verb's are generated from its declaration (DECLARATIONS; see
options.py for how to add one). Every verb runs through `run_verb` (request -> log -> outputs
checked writable -> run -> executor output -> print); `RUNS` says what differs per verb.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from generic_trainer import supervisor
from generic_trainer.artifacts import run_record
from generic_trainer.errors import TrainerError
from generic_trainer.intake import data_options, fit_options, judge_options, options, output_checks, push_options
from generic_trainer.intake.common_options import EPILOG
from generic_trainer.intake.data_request import (
    ImportExamplesRequest,
    TransformRequest,
    build_import_examples_request,
    build_transform_request,
)
from generic_trainer.intake.fit_request import TrainRequest, TuneRequest, build_train_request, build_tune_request
from generic_trainer.intake.judge_request import (
    EvaluateRequest,
    InfraValidateRequest,
    build_evaluate_request,
    build_infra_validate_request,
)
from generic_trainer.intake.push_request import PUSH_OUTPUTS, PushRequest, build_push_request
from generic_trainer.intake.request import gcs_root

log = logging.getLogger("generic_trainer")
# Every verb's inputs, declared once (flags, component inputs, request checks), in `--help` order.
DECLARATIONS = (fit_options.TRAIN, fit_options.TUNE, judge_options.EVALUATE, judge_options.INFRA_VALIDATE,
                data_options.IMPORT_EXAMPLES, data_options.TRANSFORM, push_options.PUSH)


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
_ASKED_FOR = (os.path.join("keras", "src", "utils", "summary_utils.py"),  # Keras 3
              os.path.join("tf_keras", "src", "utils", "layer_utils.py"))  # tf_keras (--keras tf_keras / auto)


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
    from generic_trainer.artifacts import kfp_io

    values = {k: v for k, v in vars(args).items() if v is not None}
    if not args.executor_input:
        return values, None
    kfp_values, kfp = kfp_io.parse(kfp_io.load(args.executor_input), gcs_root(values))
    values.update({k: v for k, v in kfp_values.items() if v is not None})
    return values, kfp


# (metadata of each output artifact, output parameter values or None), for kfp_io.write_executor_output
KfpOutputValues = tuple[dict[str, Any], dict[str, Any] | None]


@dataclasses.dataclass(frozen=True)
class VerbRun:
    """How the CLI runs one verb; `run_verb` does the steps every verb shares, in the same order.

    build(values, kfp=) -> request; describe(request) -> the log lines saying what will run;
    run(request, on_result) -> result, calling on_result(result) once the result is known and before
    the verb publishes its main output (the executor output is written there); kfp_outputs(request,
    result) -> (artifact metadata, output parameter values), under KFP only; summary(result) -> what is
    printed (None: nothing, e.g. on a worker replica); outputs: the request's outputs checked writable.
    """

    build: Callable[..., Any]
    describe: Callable[[Any], list[str]]
    run: Callable[[Any, Callable[[Any], None]], Any]
    kfp_outputs: Callable[[Any, Any], KfpOutputValues]
    summary: Callable[[Any], dict[str, Any] | None] = lambda result: result.summary()
    outputs: tuple[tuple[str, str, str], ...] = output_checks.OUTPUT_FIELDS  # (attribute, flag, dir|file)


def run_verb(args: argparse.Namespace, verb: VerbRun) -> int:
    """request -> log -> check the outputs are writable (before TensorFlow) -> run -> executor output -> print."""
    from generic_trainer.artifacts import kfp_io

    if args.executor_output_file:  # absolute now: user code may change the working directory
        args.executor_output_file = os.path.abspath(args.executor_output_file)
    values, kfp = _raw_values(args)
    request = verb.build(values, kfp=kfp)
    # Keras 3 unless asked (tensorflow-transform would set TF_USE_LEGACY_KERAS=1 on import when it is unset);
    # the training verbs decide it for the user's module in their run step (_choose_keras).
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "0")
    for line in verb.describe(request):
        log.info("%s", line)
    output_checks.check_outputs(request, args.executor_output_file, verb.outputs)

    def on_result(result: Any) -> None:
        if request.kfp is not None:
            metadata, parameter_values = verb.kfp_outputs(request, result)
            path = supervisor.executor_output_path(args.executor_output_file or request.kfp.output_file)
            kfp_io.write_executor_output(request.kfp, metadata, parameter_values=parameter_values, output_file=path)

    summary = verb.summary(verb.run(request, on_result))
    if summary is not None:
        supervisor.print_summary(summary)
    return 0


def _describe_train(r: TrainRequest) -> list[str]:
    t = r.task
    module, run_fn = (r.program.module_file, r.program.run_fn) if not t else ("", "run_fn")
    lines = [f"train request: examples={r.examples} module={module} run_fn={run_fn} model_dir={r.model_dir} "
             f"model_run_dir={r.model_run_dir} checkpoint_dir={r.checkpoint_dir} train_steps={r.train_steps} "
             f"eval_steps={r.eval_steps} strategy={r.strategy} keras={r.keras} "
             f"custom_config={json.dumps(r.redacted_custom_config())}",
             f"tf.keras is {'Keras 2 (tf_keras)' if r.keras == 'tf_keras' else 'Keras 3'}: {r.keras_reason}"]
    if t:
        from generic_trainer.artifacts.redaction import redact
        from generic_trainer.task.config import parse_params_override

        config = f"({len(t.config)} chars)" if t.config else None
        override = json.dumps(redact(parse_params_override(t.params_override))) if t.params_override else None
        lines.append(f"task request: task={t.task} experiment={t.experiment} mode={t.mode} "
                     f"config_files={list(t.config_files)} config={config} params_override={override}")
    return lines


def _run_train(request: TrainRequest, on_result: Callable[[Any], None]) -> Any:
    _choose_keras(request.keras)
    from generic_trainer import train

    return train.run(request, before_publish=on_result)  # the executor output, before the model is published


def _train_outputs(request: TrainRequest, result: Any) -> KfpOutputValues:
    from generic_trainer import train

    return train.kfp_metadata(request, result), train.kfp_parameters(request, result)


def _train_summary(result: Any) -> dict[str, Any] | None:
    return {"serving_model_dir": result.serving_model_dir, "metrics": result.metrics} if result.is_chief else None


_OWN_MAX_TRIALS = "tuner_fn's"


def _describe_tune(r: TuneRequest) -> list[str]:
    return [f"tune request: examples={r.examples} module={r.module_file} tuner_fn={r.tuner_fn} "
            f"best_hyperparameters_dir={r.best_hyperparameters_dir} checkpoint_dir={r.checkpoint_dir} "
            f"train_steps={r.train_steps} eval_steps={r.eval_steps} "
            f"max_trials={r.max_trials or _OWN_MAX_TRIALS} "
            f"worker_timeout={r.worker_timeout:g}s custom_config={json.dumps(r.redacted_custom_config())}",
            "tf.keras is Keras 3: keras-tuner searches Keras 3 models"]


def _run_tune(request: TuneRequest, on_result: Callable[[Any], None]) -> Any:
    _choose_keras("keras3")
    from generic_trainer import tune

    return tune.run(request, before_publish=on_result)  # the executor output before best_hyperparameters


def _runs(verb_module: str) -> Callable[[Any, Callable[[Any], None]], Any]:
    """The run step of a verb whose module's run(request) returns its result (imported when the verb runs)."""

    def run(request: Any, on_result: Callable[[Any], None]) -> Any:
        result = importlib.import_module(f"generic_trainer.{verb_module}").run(request)
        on_result(result)
        return result

    return run


def _metadata(verb_module: str) -> Callable[[Any, Any], KfpOutputValues]:
    """The executor output of a verb whose outputs are its module's kfp_metadata and no output parameters."""

    def outputs(request: Any, result: Any) -> KfpOutputValues:
        return importlib.import_module(f"generic_trainer.{verb_module}").kfp_metadata(request, result), None

    return outputs


def _describe_evaluate(r: EvaluateRequest) -> list[str]:
    return [f"evaluate request: model={r.model} baseline_model={r.baseline_model} examples={r.examples} "
            f"splits={','.join(r.eval_splits)} schema={r.schema} blessing_dir={r.blessing_dir} "
            f"eval_config={json.dumps(r.eval_config.to_json())} timeout={r.timeout:g}s "
            f"memory_limit={r.memory_limit or 'none'}"]






def _describe_infra_validate(r: InfraValidateRequest) -> list[str]:
    return [f"infra-validate request: model={r.model} examples={r.examples} splits={','.join(r.eval_splits)} "
            f"model_blessing={r.model_blessing} blessing_dir={r.blessing_dir} "
            f"requests={r.num_requests:d} x {r.batch_size:d} examples timeout={r.timeout:g}s "
            f"memory_limit={r.memory_limit or 'none'} schema={r.schema} write_warmup={r.write_warmup:d}"]




def _infra_validate_outputs(request: InfraValidateRequest, result: Any) -> KfpOutputValues:
    from generic_trainer import infra_validate

    blessed = {"blessed": result.blessed} if "blessed" in request.kfp.parameters else None  # for dsl.If
    return infra_validate.kfp_metadata(request, result), blessed


def _describe_import_examples(r: ImportExamplesRequest) -> list[str]:
    return [f"import-examples request: input={r.input_pattern} input_splits={dict(r.input_splits) or None} "
            f"format={r.format} schema={r.schema} output={r.output} beam_args={list(r.beam_args)}"]






def _describe_transform(r: TransformRequest) -> list[str]:
    return [f"transform request: examples={r.examples} schema={r.schema} module={r.module_file} "
            f"preprocessing_fn={r.preprocessing_fn} analyze_splits={','.join(r.analyze_splits)} "
            f"transform_splits={','.join(r.transform_splits)} transform_graph={r.transform_graph} "
            f"transformed_examples={r.transformed_examples} beam_args={list(r.beam_args)}"]


def _run_transform(request: TransformRequest, on_result: Callable[[Any], None]) -> Any:
    # tensorflow-transform sets TF_USE_LEGACY_KERAS=1 on import when it is unset; keep Keras 3 unless asked.
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "0")
    from generic_trainer import transform

    result = transform.run(request)
    on_result(result)
    return result




def _describe_push(r: PushRequest) -> list[str]:
    return [f"push request: model={r.model} model_blessing={r.model_blessing} infra_blessing={r.infra_blessing} "
            f"push_destination={r.destination_uri} pushed_model_dir={r.pushed_model_dir}"]


def _run_push(request: PushRequest, on_result: Callable[[Any], None]) -> Any:
    from generic_trainer import push

    return push.run(request, before_publish=on_result)  # the executor output, before the version dir appears


def _vertex_job(args: argparse.Namespace) -> int:
    from generic_trainer import vertex

    return vertex.main(args)


def _export_tflite(args: argparse.Namespace) -> int:
    from generic_trainer import export_tflite

    return export_tflite.main(args)


# Verbs that declare their own flags in their module and have no KFP component of their own.
OWN_MAIN = {"vertex-job": _vertex_job, "export-tflite": _export_tflite}

RUNS = {
    "train": VerbRun(build_train_request, _describe_train, _run_train, _train_outputs, _train_summary),
    "tune": VerbRun(build_tune_request, _describe_tune, _run_tune, _metadata("tune"),
                    lambda result: result.summary() if result.is_chief else None),
    "evaluate": VerbRun(build_evaluate_request, _describe_evaluate, _runs("evaluate"), _metadata("evaluate")),
    "infra-validate": VerbRun(build_infra_validate_request, _describe_infra_validate, _runs("infra_validate"),
                              _infra_validate_outputs),
    "import-examples": VerbRun(build_import_examples_request, _describe_import_examples, _runs("import_examples"),
                               _metadata("import_examples"), outputs=output_checks.IMPORT_EXAMPLES_OUTPUTS),
    "transform": VerbRun(build_transform_request, _describe_transform, _run_transform, _metadata("transform"),
                         outputs=output_checks.TRANSFORM_OUTPUTS),
    "push": VerbRun(build_push_request, _describe_push, _run_push, _metadata("push"), outputs=PUSH_OUTPUTS),
}


def main(argv: Sequence[str] | None = None, end_process: bool | None = None) -> int:
    """Run one verb; returns the exit code.

    As the process's entry point (`end_process`, by default when `argv` is None: the console script and
    `python -m generic_trainer`), threads left running once everything is written do not keep it alive.
    """
    args = build_parser().parse_args(argv)
    _setup_logging(args.log_level)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    ending = argv is None if end_process is None else end_process
    supervised = run_record.claim() is not None
    secrets = supervisor.known_secrets(args)
    if ending and not supervised and supervisor.wanted():  # user code runs in a child the parent watches
        return supervisor.run(args.verb, list(sys.argv[1:] if argv is None else argv), secrets)
    supervisor.mask_logs(secrets)
    try:
        code = OWN_MAIN[args.verb](args) if args.verb in OWN_MAIN else run_verb(args, RUNS[args.verb])
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
    if supervised:
        run_record.note("end", code, **run_record.ended_notes())
    if ending:
        end_without_stray_threads(code)
    return code


def end_without_stray_threads(code: int) -> None:
    """End the process now with `code`, everything being written (outputs, executor output).

    Non-daemon threads still running (the user's module's) are not waited for: Python would wait for
    them at exit, forever for a thread that never ends, so the KFP task would never finish; their names
    are logged. Then `process_exit.end`: open writers flushed, atexit handlers run, `os._exit` (without
    Python's teardown, which takes seconds after TensorFlow training). A cluster replica without such
    threads returns and ends normally (process_exit.safe_to_skip_teardown).
    """
    import threading

    from generic_trainer.artifacts import process_exit

    stray = [t for t in threading.enumerate()
             if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if stray:
        log.warning("%d thread(s) still running after the run ended, not waited for: %s; ending the process "
                    "with exit code %d (threads a module starts should be daemon threads, or joined before "
                    "run_fn returns)", len(stray), ", ".join(repr(t.name) for t in stray), code)
    if stray or process_exit.safe_to_skip_teardown():
        process_exit.end(code)

if __name__ == "__main__":
    sys.exit(main())
