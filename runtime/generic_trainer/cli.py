"""Command line: `generic-trainer <verb> [flags]` or `generic-trainer <verb> --executor-input JSON`.

Parses flags (or KFP's executor input) into one request, sets what must be decided before
TensorFlow is imported (which Keras `tf.keras` means), runs the verb, and turns errors into
one clear message and an exit code. `--help` and argument errors never import TensorFlow. As the
process's entry point, the verb itself runs in a child process that supervisor.py watches.

The flags are not written here: each verb's are generated from its declaration (see options.py for
how to add one). Every verb module exports its `VerbContract` (intake/contract.py: declaration,
build, describe, run, KFP outputs, summary); `run_verb` runs each in the one order written there.
Importing the verb modules is light: TensorFlow, TFT, Beam and the cloud libraries load inside them.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Iterable, Sequence

from generic_trainer import (
    bulk_infer,
    doctor,
    evaluate,
    export_tflite,
    import_examples,
    infra_validate,
    push,
    resolve,
    supervisor,
    tfx_pipeline,
    train,
    transform,
    tune,
    vertex,
)
from generic_trainer.artifacts import main_output, masking, outputs, run_record
from generic_trainer.artifacts.kfp_io import KfpOutputs
from generic_trainer.errors import TrainerError
from generic_trainer.intake import options, output_checks
from generic_trainer.intake.common_options import EPILOG
from generic_trainer.intake.contract import RequestT, ResultT, VerbContract
from generic_trainer.intake.request import gcs_root
from generic_trainer.log_text import EscapingFilter

log = logging.getLogger("generic_trainer")


def build_parser() -> argparse.ArgumentParser:
    """The `generic-trainer` parser: one sub-parser per verb, its flags from the verb's
    declaration."""
    parser = argparse.ArgumentParser(
        prog="generic-trainer",
        description="Train TensorFlow/Keras models from a user's module, as a KFP component, a "
        "container, or a Vertex AI custom job.",
        epilog=EPILOG,
    )
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    sub.required = True
    for verb in VERBS.values():
        options.add_parser(sub, verb.declaration, EPILOG)
    return parser


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        force=True,
    )
    for handler in logging.getLogger().handlers:
        handler.addFilter(EscapingFilter())
    for noisy in ("tensorflow", "h5py", "urllib3", "google", "apache_beam"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(level)))
    absl = logging.getLogger(
        "absl"
    )  # the user module's absl.logging lines at `level`, libraries' from WARNING
    absl.setLevel(level)
    absl.addFilter(_drop_tft_keras_warning)
    absl.addFilter(user_absl_records)


_LIBRARY_DIRS = ("site-packages", "dist-packages")
# Library files that log through absl only what the user asked for:
# `model.summary(print_fn=absl.logging.info)`.
_ASKED_FOR = (
    os.path.join("keras", "src", "utils", "summary_utils.py"),  # Keras 3
    os.path.join("tf_keras", "src", "utils", "layer_utils.py"),
)  # tf_keras (--keras tf_keras / auto)


def user_absl_records(record: logging.LogRecord) -> bool:
    """Keep absl records below WARNING only when user code (not an installed library) logged them.

    TFX module files log with `absl.logging`; their lines are renamed `<module> (absl)` so the log
    says which file wrote them. Libraries (Keras, TensorFlow) log chatter through absl too; a model
    summary the module asked for (`model.summary(print_fn=absl.logging.info)`) is kept.
    """
    path = record.pathname = _absl_caller(record.pathname or "")
    library = any(f"{os.sep}{d}{os.sep}" in path for d in _LIBRARY_DIRS) or path.startswith(
        sys.base_prefix + os.sep
    )
    if library:
        return record.levelno >= logging.WARNING or path.endswith(_ASKED_FOR)
    record.name = f"{os.path.splitext(os.path.basename(path))[0] or record.name} (absl)"
    return True


def _absl_caller(path: str) -> str:
    """The file that called absl.logging (the "absl" logger made before absl loads reports absl's
    own file)."""
    if f"{os.sep}absl{os.sep}logging{os.sep}" not in path:
        return path
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if (
            name != logging.__file__
            and f"{os.sep}absl{os.sep}logging{os.sep}" not in name
            and name != __file__
        ):
            return name
        frame = frame.f_back
    return path


def _drop_tft_keras_warning(record: logging.LogRecord) -> bool:
    """tensorflow-transform warns on import that it wants Keras 2; the runtime chose Keras 3 on
    purpose (`--keras`), and TFT graphs load and serve under it, so the warning would only
    mislead."""
    return "Tensorflow Transform is only compatible with Keras 2" not in record.getMessage()


def _choose_keras(keras: str | None) -> None:
    """Decide tf.keras before TensorFlow loads (tensorflow-transform would otherwise flip it)."""
    os.environ["TF_USE_LEGACY_KERAS"] = "1" if keras == "tf_keras" else "0"


def _raw_values(
    args: argparse.Namespace, declaration: options.Verb
) -> tuple[dict[str, object], KfpOutputs | None]:
    """Flag values, overlaid by the executor input's when running under KFP."""
    from generic_trainer.artifacts import kfp_io

    values = {k: v for k, v in vars(args).items() if v is not None}
    if not getattr(args, "executor_input", None):  # none: a verb without a KFP component
        return values, None
    kfp_values, kfp = kfp_io.parse(
        kfp_io.load(args.executor_input), options.artifact_maps(declaration), gcs_root(values)
    )
    values.update({k: v for k, v in kfp_values.items() if v is not None})
    return values, kfp


def run_verb(
    args: argparse.Namespace,
    verb: VerbContract[RequestT, ResultT],
    secrets: Iterable[str] = (),
) -> int:
    """The one order of every verb (contract.py): request -> log -> outputs checked writable (before
    TensorFlow) -> output dirs locked (`lock_outputs`) -> run, the executor output written in
    `before_publish` -> print the summary, `secrets` masked in it."""
    from generic_trainer.artifacts import kfp_io

    output_file = getattr(args, "executor_output_file", None)
    if output_file:  # absolute now: user code may change the working directory
        args.executor_output_file = output_file = os.path.abspath(output_file)
    values, kfp = _raw_values(args, verb.declaration)
    request = verb.build(values, os.environ, kfp)
    # Decided before TensorFlow loads: Keras 3 unless the verb or the environment says otherwise
    # (tensorflow-transform would set TF_USE_LEGACY_KERAS=1 on import when it is unset).
    if verb.keras is not None:
        _choose_keras(verb.keras(request))
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "0")
    for line in verb.describe(request):
        log.info("%s", line)
    output_checks.check_outputs(
        request, output_file, output_checks.verb_outputs(verb.declaration), values
    )

    def before_publish(result: ResultT) -> None:
        if kfp is not None:
            metadata, parameter_values = verb.kfp_outputs(request, result)
            path = supervisor.executor_output_path(output_file or kfp.output_file)
            kfp_io.write_executor_output(
                kfp, metadata, parameter_values=parameter_values, output_file=path
            )

    held = output_checks.output_dirs(request, verb.declaration) if verb.lock_outputs else []
    with outputs.exclusive_all(held):  # a second run on one of them fails at once, naming this one
        summary = verb.summary(verb.run(request, before_publish))
    if summary is not None:
        supervisor.print_summary(masking.mask_value(summary, masking.Masker(secrets)))
    return 0


# The verb modules, in `--help` order, each exporting its VerbContract as VERB (contract.py); those
# without a `component` (doctor, export-tflite, tfx-pipeline, vertex-job) run the same way, no KFP.
VERB_MODULES = (train, tune, evaluate, infra_validate, import_examples, transform, push)
VERB_MODULES += (bulk_infer, resolve, doctor, export_tflite, tfx_pipeline, vertex)
VERBS = {module.VERB.name: module.VERB for module in VERB_MODULES}
# Every verb's inputs, declared once (flags, component inputs, request checks), in `--help` order.
DECLARATIONS = tuple(verb.declaration for verb in VERBS.values())


def main(argv: Sequence[str] | None = None, end_process: bool | None = None) -> int:
    """Run one verb; returns the exit code.

    As the process's entry point (`end_process`, by default when `argv` is None: the console script
    and `python -m generic_trainer`), threads left running once everything is written do not keep it
    alive.
    """
    args = build_parser().parse_args(argv)
    _setup_logging(args.log_level)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    ending = argv is None if end_process is None else end_process
    supervised = run_record.claim() is not None
    secrets = supervisor.known_secrets(args)
    if ending and not supervised and supervisor.wanted():  # user code runs in a watched child
        argv = list(sys.argv[1:] if argv is None else argv)
        declaration = VERBS[args.verb].declaration
        expected = main_output.expected(
            args.verb, lambda: _raw_values(args, declaration)[0], os.environ
        )
        return supervisor.run(args.verb, argv, secrets, expected)
    supervisor.mask_logs(secrets)
    try:
        code = run_verb(args, VERBS[args.verb], secrets)
    except TrainerError as e:
        log.error("%s failed: %s", args.verb, e)
        code = e.exit_code
    except KeyboardInterrupt:
        log.error("interrupted")
        code = 130
    except Exception:
        if not ending:
            raise
        log.exception(
            "%s failed with an unexpected error (a bug of generic-trainer: please report it)",
            args.verb,
        )
        code = 1
    if supervised:
        run_record.note("end", code, **run_record.ended_notes())
    if ending:
        end_without_stray_threads(code)
    return code


def end_without_stray_threads(code: int) -> None:
    """End the process now with `code`, everything being written (outputs, executor output).

    Non-daemon threads still running (the user's module's) are not waited for: Python would wait for
    them at exit, forever for a thread that never ends, so the KFP task would never finish; their
    names are logged. Then `process_exit.end`: open writers flushed, atexit handlers run, `os._exit`
    (without Python's teardown, which takes seconds after TensorFlow training). A cluster replica
    without such threads returns and ends normally (process_exit.safe_to_skip_teardown).
    """
    import threading

    from generic_trainer.artifacts import process_exit
    from generic_trainer.fit import cluster

    stray = [
        t
        for t in threading.enumerate()
        if t is not threading.main_thread() and not t.daemon and t.is_alive()
    ]
    if stray:
        log.warning(
            "%d thread(s) still running after the run ended, not waited for: %s; ending the "
            "process "
            "with exit code %d (threads a module starts should be daemon threads, or joined before "
            "run_fn returns)",
            len(stray),
            ", ".join(repr(t.name) for t in stray),
            code,
        )
    if stray or process_exit.safe_to_skip_teardown(cluster.configured(os.environ), os.environ):
        process_exit.end(code)


if __name__ == "__main__":
    sys.exit(main())
