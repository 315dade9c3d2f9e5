"""The `doctor` verb: what `train` with the same flags would find on this machine, checked without
training.

One line per check, printed as it is found (or one JSON object with --json): ok / warn / fail, with
the fix. The checks that need no TensorFlow run first (diagnose/machine.py, cluster_checks.py,
remote_inputs.py), then TensorFlow is imported once (diagnose/tensorflow_checks.py). Nothing is
trained or written. Exit 0 when nothing fails, 2 otherwise (ChecksFailed, after every line is
printed).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from generic_trainer.diagnose import cluster_checks, machine, remote_inputs, report
from generic_trainer.diagnose import tensorflow_checks as tf_checks
from generic_trainer.diagnose.report import Check
from generic_trainer.diagnose.request import DoctorRequest
from generic_trainer.errors import EXIT_USER_INPUT, TrainerError
from generic_trainer.fit import accelerator
from generic_trainer.intake.contract import VerbContract
from generic_trainer.intake.doctor_options import DOCTOR
from generic_trainer.intake.doctor_request import build_doctor_request


class ChecksFailed(TrainerError):
    """A check failed: train would stop (or train on the CPU unnoticed) on this machine."""

    exit_code = EXIT_USER_INPUT


@dataclasses.dataclass
class DoctorResult:
    """Every check, in the order run, and how long they took."""

    checks: list[Check]
    seconds: float = 0.0
    # of `seconds`: importing TensorFlow and listing its GPUs; the rest must take < 15 s on a CPU
    tensorflow_import_s: float = 0.0


def run_checks(request: DoctorRequest, emit: Callable[[Check], None]) -> DoctorResult:
    """Run every check, those without TensorFlow first; `emit` gets each as it is found."""
    started = time.monotonic()
    checks: list[Check] = []

    def add(*found: Check) -> None:
        for check in found:
            checks.append(check)
            emit(check)

    presence = accelerator.detect(request.environ)
    add(machine.flags_check(request), machine.python_check(), machine.keras_check(request))
    add(machine.gpus_check(presence))
    add(machine.cuda_libraries_check(request, presence))
    cluster_check, cluster = cluster_checks.cluster_check(request.environ)
    add(cluster_check)
    for place in request.inputs:
        add(remote_inputs.input_check(place, request.gcs_root, request.storage))
    add(machine.memory_check(), *machine.disk_checks(request))
    tf_started = time.monotonic()  # TensorFlow is imported where train imports it: its log is read
    registered, gpus = tf_checks.registered_check(request.accelerator, presence)
    import_s = time.monotonic() - tf_started
    add(*tf_checks.versions_checks(machine.driver_version()), registered)
    add(cluster_checks.strategy_check(request.strategy, gpus, cluster, request.environ))
    add(*tf_checks.xla_checks(gpus))
    return DoctorResult(checks, time.monotonic() - started, import_s)


def run(
    request: DoctorRequest, before_publish: Callable[[DoctorResult], None] | None = None
) -> DoctorResult:
    """Run and print the checks; raises ChecksFailed (exit 2) when one failed."""
    emit = (lambda check: None) if request.json else (lambda c: print(c.line(), flush=True))
    result = run_checks(request, emit)
    if request.json:
        print(report.as_json(result.checks, result.seconds, result.tensorflow_import_s), flush=True)
    if before_publish is not None:
        before_publish(result)
    failed = report.failed(result.checks)
    if failed:
        names = ", ".join(c.name for c in failed)
        raise ChecksFailed(f"{len(failed)} check(s) failed ({names}): train would not run as meant")
    return result


def describe(request: DoctorRequest) -> list[str]:
    """The log line saying what doctor checks."""
    return [
        f"doctor: checking what train would find here (module={request.module_file} "
        f"strategy={request.strategy} accelerator={request.accelerator} "
        f"inputs={len(request.inputs)} outputs={len(request.outputs)})"
    ]


VERB: VerbContract[DoctorRequest, DoctorResult] = VerbContract(
    DOCTOR,
    build_doctor_request,
    describe,
    run,
    lambda request, result: ({}, None),
    lambda result: None,
)
