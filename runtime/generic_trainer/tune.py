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

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

from generic_trainer.artifacts import files, outputs, storage
from generic_trainer.artifacts.staged import StagedDir
from generic_trainer.compat import patched
from generic_trainer.fit import accelerator, inputs, user_code, user_module
from generic_trainer.fit import cluster as cluster_lib
from generic_trainer.fit.fn_args import FnArgs
from generic_trainer.fit.requests import TuneRequest
from generic_trainer.intake import fit_options
from generic_trainer.intake.contract import VerbContract
from generic_trainer.intake.fit_request import build_tune_request
from generic_trainer.tuning import search_run, search_state, trial_log, tuner_cluster
from generic_trainer.tuning.tune_result import (
    TuneResult,
    flat_metrics,
    render_report,
    result_of,
    tuner_results,
)

log = logging.getLogger(__name__)

BEST_HYPERPARAMETERS_FILE = "best_hyperparameters.txt"


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
                module_path = user_module.checked_source(
                    request.module_file,
                    os.path.join(scratch, "module"),
                    request.module_sha256,
                    request.storage,
                )
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
    strategy, num_gpus, device = _replica_strategy(request, role, examples)
    module = user_module.import_module(module_path, request.module_file)
    tuner_fn = user_module.get_function(module, request.tuner_fn, "--tuner-fn")
    log.info(
        "user module %s, calling %s",
        getattr(module, "__file__", request.module_file),
        request.tuner_fn,
    )
    fn_args = _fn_args(request, examples, role, strategy, num_gpus)
    # The chief builds its tuner as the oracle's host (keras-tuner reloads the saved oracle then).
    first_id = (
        tuner_cluster.ORACLE_TUNER_ID if role.distributed and role.serves_oracle else role.tuner_id
    )
    saved = (
        search_state.make_resumable(request.working_dir, first_id) if role.serves_oracle else set()
    )
    from generic_trainer.fit import keras2_saving, module_strategy

    with (
        tuner_cluster.environment(role, first_id) as set_tuner_id,
        strategy.scope(),
        module_strategy.substitute(strategy),
        keras2_saving.bridge("keras3"),
    ):
        tuner, fit_kwargs = search_run.call_tuner_fn(tuner_fn, fn_args, request.tuner_fn)
        search_state.check_directory(tuner, request.working_dir, role.serves_oracle)
        if os.path.abspath(tuner.project_dir) in saved and not tuner.oracle.trials:
            log.warning(
                "the saved search in %s was discarded (a tuner made with overwrite=True?): it "
                "starts over, and so would every re-run",
                tuner.project_dir,
            )
        if not role.serves_oracle:
            search_run.run_worker(tuner, fit_kwargs, role, request, device)
            return TuneResult(is_chief=False, tuner_id=role.tuner_id)
        _search_with_the_oracle(request, role, tuner, fit_kwargs, set_tuner_id, device)
    return _publish(request, result_of(role, tuner.oracle, tuner.project_dir), before_publish)


def _fn_args(
    request: TuneRequest,
    examples: inputs.ExampleInputs,
    role: tuner_cluster.TunerRole,
    strategy: Any,
    num_gpus: int,
) -> FnArgs:
    """The FnArgs tuner_fn gets: its working_dir stable under the checkpoint dir (resumable)."""
    os.makedirs(request.working_dir, exist_ok=True)
    return inputs.build_fn_args(
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


def _replica_strategy(
    request: TuneRequest, role: tuner_cluster.TunerRole, examples: inputs.ExampleInputs
) -> tuple[Any, int, str | None]:
    """This replica's strategy, GPU count and prefetch device (replicas tune in parallel, each on
    its own: several GPUs -> mirrored); the first records checked once TensorFlow is loaded."""
    from generic_trainer.records import record_checks

    num_gpus, gpu_words = accelerator.usable_gpus(request.accelerator, request.gpu_environ)
    strategy_name = cluster_lib.choose_strategy(request.strategy, num_gpus, cluster_lib.SINGLE)
    strategy = cluster_lib.create_strategy(strategy_name, cluster_lib.SINGLE, num_gpus)
    device = cluster_lib.prefetch_device(strategy_name, num_gpus, request.prefetch_to_device)
    record_checks.check_first_records(
        examples.all_files,
        examples.schema_file,
        transformed_schema_path=examples.transformed_schema_file,
    )
    log.info(
        "tuning as %s: strategy=%s replicas_in_sync=%d %s gpus_used=%d working_dir=%s",
        _who(role),
        type(strategy).__name__,
        strategy.num_replicas_in_sync,
        gpu_words,
        num_gpus,
        request.working_dir,
    )
    return strategy, num_gpus, device


def _who(role: tuner_cluster.TunerRole) -> str:
    if not role.distributed:
        return "the only replica"
    if role.serves_oracle:
        return (
            f"{role.tuner_id} (chief: serves the oracle at {role.bind_address}, publishes the "
            "outputs)"
        )
    return f"{role.tuner_id} (worker: the oracle is at {role.oracle_host}:{role.oracle_port})"


def _search_with_the_oracle(
    request: TuneRequest,
    role: tuner_cluster.TunerRole,
    tuner: Any,
    fit_kwargs: dict[str, Any],
    set_tuner_id: Callable[[str], None],
    device: str | None,
) -> None:
    """The replica holding the oracle searches: alone, or as the chief serving the workers."""
    oracle = tuner.oracle
    if request.max_trials:
        log.info("max_trials: %d (tuner_fn said %s)", request.max_trials, oracle.max_trials)
        oracle.max_trials = request.max_trials
    oracle.verbose = 0  # trials are logged by trial_log instead of keras-tuner's printed tables
    with patched(search_state.retry_unfinished(oracle)):
        if role.distributed:
            search_run.run_chief(tuner, fit_kwargs, role, request, set_tuner_id, device)
        else:
            with patched(trial_log.TrialLog(tuner.project_dir).patch(oracle)):
                search_run.search(tuner, fit_kwargs, role, device)


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
        outputs.write_metrics_file(request.metrics_file, flat_metrics(result))
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
