"""Running the search on this replica: alone, as the chief that serves the oracle, or a worker.

`call_tuner_fn` calls the user's tuner_fn and checks what it returned; `search` calls
`tuner.search` with the user's failures mapped to exit codes; `run_worker` adds the heartbeats
and the client deadline, `run_chief` serves the oracle (`oracle_server.py`) while it runs trials
itself, then waits for the workers.
"""

from __future__ import annotations

import logging
import os
import traceback
from collections.abc import Mapping
from typing import Any

from generic_trainer.compat import keras_tuner, patched
from generic_trainer.errors import ClusterError, TrainerError, UserCodeError
from generic_trainer.fit import user_code
from generic_trainer.fit.fn_args import FnArgs
from generic_trainer.fit.requests import TuneRequest
from generic_trainer.tuning import oracle_server, trial_log, tuner_cluster

log = logging.getLogger("generic_trainer.tune")

_RESULT_HINT = (
    "expected TunerFnResult(tuner=<a keras_tuner tuner>, fit_kwargs={...}) (from generic_trainer "
    "import TunerFnResult, or tfx.components.TunerFnResult)"
)


def search(
    tuner,
    fit_kwargs: dict[str, Any],
    role: tuner_cluster.TunerRole,
    prefetch_device: str | None = None,
) -> None:
    """tuner.search(**fit_kwargs), with user failures turned into UserCodeError (a lost oracle:
    ClusterError; the trials' datasets prefetched to `prefetch_device` when given)."""
    import grpc
    from keras_tuner import errors as kt_errors

    from generic_trainer.fit import fit_hooks

    def translate(e: Exception) -> TrainerError | None:
        if isinstance(e, grpc.RpcError):
            return ClusterError(
                f"lost the tuner oracle at {role.oracle_host}:{role.oracle_port}: "
                f"{e.code()} {e.details()}"
            )
        if isinstance(e, kt_errors.FatalError):
            hint = (
                "\nkeras-tuner searches Keras 3 models: build them with `import keras`, "
                "not tf_keras."
            )
            return UserCodeError(
                f"the search stopped: {user_code.describe(e)}{hint if 'tf_keras' in str(e) else ''}"
            )
        return None

    with fit_hooks.recording_fit("keras3", prefetch_device=prefetch_device):
        user_code.call(
            lambda: tuner.search(**fit_kwargs),
            what="the search",
            failed="the search failed",
            translate=translate,
        )


def run_worker(
    tuner,
    fit_kwargs,
    role: tuner_cluster.TunerRole,
    request: TuneRequest,
    prefetch_device: str | None = None,
) -> None:
    """A worker runs the trials the chief's oracle hands it, with heartbeats while each runs."""
    beat = oracle_server.Heartbeat(
        role.oracle_host, role.oracle_port, oracle_server.heartbeat_interval(request.worker_timeout)
    ).start()

    def on_trial_begin(on_begin, trial):
        beat.trial_id = trial.trial_id
        log.info("running trial %s: %s", trial.trial_id, trial.hyperparameters.values)
        on_begin(trial)

    def on_trial_end(on_end, trial):
        beat.trial_id = None
        log.info("trial %s %s", trial.trial_id, trial.status)
        on_end(trial)

    try:
        with patched(
            keras_tuner.ClientWait(request.worker_timeout),
            keras_tuner.TunerHooks(tuner, on_trial_begin=on_trial_begin, on_trial_end=on_trial_end),
        ):
            search(tuner, fit_kwargs, role, prefetch_device)
    finally:
        beat.stop()
    log.info("worker %s: the search is over; the chief publishes the outputs", role.tuner_id)


def run_chief(
    tuner,
    fit_kwargs,
    role: tuner_cluster.TunerRole,
    request: TuneRequest,
    set_tuner_id,
    prefetch_device: str | None = None,
) -> None:
    """The chief serves the oracle from a thread, runs trials under its own id, then waits for the
    workers."""
    tuner.save()  # the oracle and the host's tuner file: what a re-run reloads
    oracle = tuner.oracle
    server = oracle_server.OracleServer(oracle, role, request.worker_timeout, tuner.project_dir)

    def pre_create_trial(pre_create):
        server.check()  # a gone worker stops the chief before its next trial
        pre_create()

    with patched(
        trial_log.TrialLog(tuner.project_dir, on_fatal=server.fail).patch(oracle),
        keras_tuner.TunerHooks(tuner, pre_create_trial=pre_create_trial),
    ):
        server.start()
        try:
            # From here on this process's tuner is one more trial runner, using the oracle
            # in-process.
            set_tuner_id(role.tuner_id)
            tuner.tuner_id = role.tuner_id
            search(tuner, fit_kwargs, role, prefetch_device)
            server.wait_for_workers()
        finally:
            server.stop()


def call_tuner_fn(tuner_fn, fn_args: FnArgs, name: str) -> tuple[Any, dict[str, Any]]:
    """Call the user's tuner_fn and check it returned a tuner and the kwargs of its search()."""
    import keras_tuner

    def hint(e: Exception) -> str:
        innermost = traceback.extract_tb(e.__traceback__)[-1].filename if e.__traceback__ else ""
        if f"{os.sep}keras_tuner{os.sep}" in innermost:
            return (
                " (raised by keras-tuner while setting up the search space: check the "
                "hyperparameters it declares)"
            )
        from generic_trainer.fit import keras2_saving

        return keras2_saving.hint(e, tf_keras_possible=False)

    result = user_code.call(tuner_fn, fn_args, what=name, hint=hint)
    if isinstance(result, tuple) and len(result) == 2 and not hasattr(result, "tuner"):
        tuner, fit_kwargs = result
    else:
        tuner, fit_kwargs = getattr(result, "tuner", None), getattr(result, "fit_kwargs", None)
    if tuner is None and fit_kwargs is None:
        raise UserCodeError(f"{name} returned {type(result).__name__}; {_RESULT_HINT}")
    if not isinstance(tuner, keras_tuner.engine.base_tuner.BaseTuner):
        raise UserCodeError(
            f"{name} returned a tuner of type {type(tuner).__name__}; {_RESULT_HINT}"
        )
    if fit_kwargs is None:
        fit_kwargs = {}
    if not isinstance(fit_kwargs, Mapping):
        raise UserCodeError(
            f"{name} returned fit_kwargs of type {type(fit_kwargs).__name__}; {_RESULT_HINT}"
        )
    return tuner, dict(fit_kwargs)
