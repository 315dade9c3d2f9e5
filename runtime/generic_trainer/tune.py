"""The `tune` verb: a keras-tuner search from the user's `tuner_fn`, resumable and distributable.

Steps, in order: check the examples, schema and module without TensorFlow; resolve this replica's
role (alone, the chief that serves the oracle, or a worker: tuner_cluster.py); import the module;
build FnArgs whose `working_dir` is stable under the checkpoint dir (a re-run of the same job
resumes the search: keras-tuner reloads it, completed trials are not run again); call
`tuner_fn(fn_args)` -> `TunerFnResult(tuner, fit_kwargs)`; run `tuner.search(**fit_kwargs)` with
every trial logged (trial_log.py); then, on the replica holding the oracle, publish TFX's outputs:
`best_hyperparameters.txt` (`json.dumps(best_hp.get_config())`), `tuner_results.json`
(`[{trial_id, score, **values}]`, best first), a metrics file and an HTML report. Nothing is
published when no trial completed.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import shutil
import tempfile
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from generic_trainer.artifacts import files, storage
from generic_trainer.artifacts.staged import StagedDir
from generic_trainer.compat import keras_tuner, patched
from generic_trainer.errors import ClusterError, TrainerError, UserCodeError
from generic_trainer.fit import accelerator, inputs, user_code, user_module
from generic_trainer.fit import cluster as cluster_lib
from generic_trainer.fit.fn_args import FnArgs
from generic_trainer.fit.requests import TuneRequest
from generic_trainer.intake import fit_options
from generic_trainer.intake.contract import VerbContract
from generic_trainer.intake.fit_request import build_tune_request
from generic_trainer.tuning import oracle_server, trial_log, tuner_cluster
from generic_trainer.tuning.tune_result import (
    TuneResult,
    flat_metrics,
    render_report,
    result_of,
    tuner_results,
)

log = logging.getLogger(__name__)

BEST_HYPERPARAMETERS_FILE = "best_hyperparameters.txt"
_RESULT_HINT = (
    "expected TunerFnResult(tuner=<a keras_tuner tuner>, fit_kwargs={...}) (from generic_trainer "
    "import TunerFnResult, or tfx.components.TunerFnResult)"
)


# --------------------------------------------------------------------------------------------
# Running the search
# --------------------------------------------------------------------------------------------


def run(
    request: TuneRequest, before_publish: Callable[[TuneResult], None] | None = None
) -> TuneResult:
    """Search as `request` says; raises a TrainerError subclass on anything the user must fix.

    Where the oracle lives, `before_publish(result)` runs after the results, metrics and report
    are written, right before best_hyperparameters is published; when it raises, it is not.
    """
    from generic_trainer.artifacts import outputs

    role = tuner_cluster.resolve_role(request.cluster)
    held = (
        [
            (request.best_hyperparameters_dir, "--best-hyperparameters-dir"),
            (request.checkpoint_dir, "--checkpoint-dir"),
        ]
        if role.serves_oracle
        else []
    )
    with outputs.exclusive_all(held):
        examples = inputs.check_examples_and_schema(request)
        scratch = tempfile.mkdtemp(prefix="generic-trainer-tune-")
        try:
            with user_code.guard(
                f"module {request.module_file}"
            ):  # the model-building function, callbacks
                module_path = user_module.fetch(
                    request.module_file, os.path.join(scratch, "module"), request.storage
                )
                user_module.check_sha256(module_path, request.module_sha256)
                user_module.check_syntax(module_path)
                return _run(request, role, module_path, examples, before_publish)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def _run(
    request: TuneRequest,
    role: tuner_cluster.TunerRole,
    module_path: str,
    examples: inputs.ExampleInputs,
    before_publish: Callable[[TuneResult], None] | None = None,
) -> TuneResult:
    from generic_trainer.records import record_checks

    num_gpus, gpu_words = accelerator.usable_gpus(request.accelerator, request.gpu_environ)
    # Replicas tune in parallel, each on its own: the strategy is per replica (several GPUs ->
    # mirrored).
    strategy_name = cluster_lib.choose_strategy(request.strategy, num_gpus, cluster_lib.SINGLE)
    strategy = cluster_lib.create_strategy(strategy_name, cluster_lib.SINGLE, num_gpus)
    # model.fit's batches go there ahead of a step
    device = cluster_lib.prefetch_device(strategy_name, num_gpus, request.prefetch_to_device)
    record_checks.check_first_records(
        examples.all_files,
        examples.schema_file,  # TensorFlow is loaded now
        transformed_schema_path=examples.transformed_schema_file,
    )
    if not role.distributed:
        who = "the only replica"
    elif role.serves_oracle:
        who = (
            f"{role.tuner_id} (chief: serves the oracle at {role.bind_address}, publishes the "
            "outputs)"
        )
    else:
        who = f"{role.tuner_id} (worker: the oracle is at {role.oracle_host}:{role.oracle_port})"
    log.info(
        "tuning as %s: strategy=%s replicas_in_sync=%d %s gpus_used=%d working_dir=%s",
        who,
        type(strategy).__name__,
        strategy.num_replicas_in_sync,
        gpu_words,
        num_gpus,
        request.working_dir,
    )

    module = user_module.import_module(module_path, request.module_file)
    tuner_fn = user_module.get_function(module, request.tuner_fn, "--tuner-fn")
    log.info(
        "user module %s, calling %s",
        getattr(module, "__file__", request.module_file),
        request.tuner_fn,
    )
    os.makedirs(request.working_dir, exist_ok=True)
    fn_args = inputs.build_fn_args(
        request,
        examples,
        working_dir=request.working_dir,
        strategy=strategy,
        num_gpus=num_gpus,
        is_chief=role.serves_oracle,
        task_type=role.task_type,
        task_index=role.task_index,
        num_workers=role.num_replicas,
    )
    # The chief builds its tuner as the oracle's host (keras-tuner reloads the saved oracle then).
    first_id = (
        tuner_cluster.ORACLE_TUNER_ID if role.distributed and role.serves_oracle else role.tuner_id
    )
    saved = _make_resumable(request.working_dir, first_id) if role.serves_oracle else set()
    from generic_trainer.fit import keras2_saving, module_strategy

    with (
        tuner_cluster.environment(role, first_id) as set_tuner_id,
        strategy.scope(),
        module_strategy.substitute(strategy),
        keras2_saving.bridge("keras3"),
    ):
        tuner, fit_kwargs = _call_tuner_fn(tuner_fn, fn_args, request.tuner_fn)
        _check_directory(tuner, request.working_dir, role.serves_oracle)
        if os.path.abspath(tuner.project_dir) in saved and not tuner.oracle.trials:
            log.warning(
                "the saved search in %s was discarded (a tuner made with overwrite=True?): it "
                "starts over, and so would every re-run",
                tuner.project_dir,
            )
        if not role.serves_oracle:
            _run_worker(tuner, fit_kwargs, role, request, device)
            return TuneResult(is_chief=False, tuner_id=role.tuner_id)
        oracle = tuner.oracle
        if request.max_trials:
            log.info("max_trials: %d (tuner_fn said %s)", request.max_trials, oracle.max_trials)
            oracle.max_trials = request.max_trials
        oracle.verbose = 0  # trials are logged by trial_log instead of keras-tuner's printed tables
        with patched(_retry_unfinished(oracle)):
            if role.distributed:
                _run_chief(tuner, fit_kwargs, role, request, set_tuner_id, device)
            else:
                with patched(trial_log.TrialLog(tuner.project_dir).patch(oracle)):
                    _search(tuner, fit_kwargs, role, device)
    return _publish(request, result_of(role, oracle, tuner.project_dir), before_publish)


def _make_resumable(working_dir: str, tuner_file_id: str) -> set[str]:
    """Let keras-tuner reload every saved search under `working_dir`, whenever the last run was
    killed.

    keras-tuner reloads its oracle only when the tuner's own file (`<project>/<tuner id>.json`,
    written after a trial's results) exists; a kill between the oracle's save and that file's would
    start the search over. The oracle's state is what matters, so the tuner file (an empty state) is
    written when only it is missing. An oracle.json cut short by a kill is restored from its last
    good copy. Returns the project directories that hold a saved search.
    """
    saved = set()
    for oracle_file in glob.glob(os.path.join(working_dir, "*", "oracle.json")):
        project_dir = os.path.dirname(oracle_file)
        try:
            with open(oracle_file, encoding="utf-8") as f:
                state = json.load(f)
        except (OSError, json.JSONDecodeError):
            backup = os.path.join(project_dir, trial_log.ORACLE_BACKUP)
            if not os.path.isfile(backup):
                continue
            log.warning(
                "%s is unreadable (a kill while it was written?); restoring its last good copy",
                oracle_file,
            )
            shutil.copyfile(backup, oracle_file)
            state = {"start_order": ["?"]}
        tuner_file = os.path.join(project_dir, f"{tuner_file_id}.json")
        if not os.path.exists(tuner_file):
            storage.write_file_atomic(tuner_file, "{}")
        if state.get("start_order"):
            saved.add(os.path.abspath(project_dir))
    return saved


def _retry_unfinished(oracle) -> keras_tuner.RetryQueue | None:
    """The patch that queues again every trial a killed attempt left RUNNING (None: none was).

    keras-tuner's reload retries the trials its oracle.json lists as ongoing; a kill after a new
    trial's own file was written but before oracle.json was would leave that trial RUNNING forever.
    Nothing runs before the search starts, so every RUNNING trial is such a one.
    """
    running = [t for t, trial in sorted(oracle.trials.items()) if trial.status == "RUNNING"]
    for trial_id in running:
        log.info("trial %s was running when the last attempt stopped: it will run again", trial_id)
    return keras_tuner.RetryQueue(oracle, running) if running else None


def _call_tuner_fn(tuner_fn, fn_args: FnArgs, name: str) -> tuple[Any, dict[str, Any]]:
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


def _check_directory(tuner, working_dir: str, holds_oracle: bool) -> None:
    project_dir = os.path.abspath(tuner.project_dir)
    if holds_oracle:
        trials = list(tuner.oracle.trials.values())
        done = sum(1 for t in trials if t.status in ("COMPLETED", "FAILED"))
        log.info(
            "search state: %s (%s)",
            project_dir,
            f"resuming: {done} trial(s) done, {len(trials) - done} to finish or retry"
            if trials
            else "new search",
        )
        if trials and type(tuner.oracle).__name__ == "GridSearchOracle":
            log.warning(
                "keras-tuner's GridSearch does not save its place in the grid: a resumed grid "
                "search may "
                "stop before max_trials (RandomSearch, BayesianOptimization and Hyperband resume "
                "fully)"
            )
    if not project_dir.startswith(os.path.abspath(working_dir) + os.sep):
        log.warning(
            "the tuner's directory %s is outside fn_args.working_dir %s: a re-run resumes the "
            "search only "
            "if that directory is stable (pass directory=fn_args.working_dir to the tuner)",
            project_dir,
            working_dir,
        )


def _search(
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


def _run_worker(
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
            _search(tuner, fit_kwargs, role, prefetch_device)
    finally:
        beat.stop()
    log.info("worker %s: the search is over; the chief publishes the outputs", role.tuner_id)


def _run_chief(
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
            _search(tuner, fit_kwargs, role, prefetch_device)
            server.wait_for_workers()
        finally:
            server.stop()


# --------------------------------------------------------------------------------------------
# Results and outputs
# --------------------------------------------------------------------------------------------


def _publish(request: TuneRequest, result: TuneResult, before_publish=None) -> TuneResult:
    """Write the outputs; the best hyperparameters last, whole (a staging dir renamed into
    place)."""
    if request.tuner_results_file:
        text = (
            files.dumps_strict(tuner_results(result), "trial value", indent=2) + "\n"
        )  # a diverged trial: null
        storage.write_file_atomic(request.tuner_results_file, text)
    if request.metrics_file:
        text = files.dumps_strict(flat_metrics(result), "metric", indent=2, sort_keys=True)
        storage.write_file_atomic(request.metrics_file, text)
    if request.report_file:
        storage.write_file_atomic(request.report_file, render_report(result))
    result.best_hyperparameters_file = os.path.join(
        request.best_hyperparameters_dir, BEST_HYPERPARAMETERS_FILE
    )
    with StagedDir(request.best_hyperparameters_dir) as stage:
        with open(os.path.join(stage.path, BEST_HYPERPARAMETERS_FILE), "w", encoding="utf-8") as f:
            f.write(json.dumps(result.best_config))
        if before_publish is not None:
            before_publish(result)
        stage.publish()
    failed = len(result.trials) - len(result.completed)
    log.info(
        "best trial %s: %s=%s %s; %d trial(s) completed, %d failed; wrote %s",
        result.best_trial_id,
        result.objective,
        result.best_score,
        result.best_values,
        len(result.completed),
        failed,
        result.best_hyperparameters_file,
    )
    return result


def kfp_metadata(request: TuneRequest, result: TuneResult) -> dict[str, dict[str, Any]]:
    """Metadata of each KFP output artifact of a tune run."""
    return {
        "best_hyperparameters": {
            "objective": result.objective,
            "direction": result.direction,
            "best_trial_id": result.best_trial_id,
            "best_score": result.best_score,
            "values": result.best_values,
        },
        "tuner_results": {"trials": len(result.trials), "completed": len(result.completed)},
        "metrics": flat_metrics(result),
        "report": {"best_trial_id": result.best_trial_id},
    }


OWN_MAX_TRIALS = "tuner_fn's"


def describe(r: TuneRequest) -> list[str]:
    """The log lines saying what this search will do."""
    return [
        f"tune request: examples={r.examples} module={r.module_file} tuner_fn={r.tuner_fn} "
        f"best_hyperparameters_dir={r.best_hyperparameters_dir} checkpoint_dir={r.checkpoint_dir} "
        f"train_steps={r.train_steps} eval_steps={r.eval_steps} "
        f"max_trials={r.max_trials or OWN_MAX_TRIALS} worker_timeout={r.worker_timeout:g}s "
        f"custom_config={json.dumps(r.redacted_custom_config())}",
        "tf.keras is Keras 3: keras-tuner searches Keras 3 models",
    ]


VERB: VerbContract[TuneRequest, TuneResult] = VerbContract(
    fit_options.TUNE,
    build_tune_request,
    describe,
    run,
    lambda request, result: (kfp_metadata(request, result), None),
    lambda result: result.summary() if result.is_chief else None,
    keras=lambda request: "keras3",
)
