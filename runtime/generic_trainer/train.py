"""The `train` verb: one run of a user's `run_fn`, from a TrainRequest to published outputs.

Steps, in order: resolve the cluster; on the chief, lock the model dir (outputs.exclusive); check
the examples layout and the module (no TensorFlow yet), create the strategy (on several workers:
wait for all of them, make Keras 3 `fit` work there), import the module, build FnArgs (with the
backup callback, `serving_model_dir` in a private staging dir beside the model dir), call `run_fn`
inside `strategy.scope()`, then (chief only) validate the model, write the metrics, report and
(through `before_publish`) the executor output, publish the model last, and remove the backup.
SIGTERM ends the run with `Preempted` (exit 143), after a backup when `fit` runs with
`fn_args.backup_and_restore`; a replica lost mid-training ends the others with ClusterError.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

from generic_trainer import compat
from generic_trainer.artifacts import outputs
from generic_trainer.artifacts.results import TrainResult
from generic_trainer.fit import (
    accelerator,
    inputs,
    keras_multiworker,
    run_fn_call,
    user_code,
    user_module,
)
from generic_trainer.fit import cluster as cluster_lib
from generic_trainer.fit.cluster import prefetch_device
from generic_trainer.fit.fn_args import FnArgs
from generic_trainer.fit.preemption import WATCHER
from generic_trainer.intake import fit_options
from generic_trainer.intake.contract import Summary, VerbContract
from generic_trainer.intake.fit_request import TrainRequest, build_train_request
from generic_trainer.trained import publisher, train_kfp

log = logging.getLogger(__name__)


def run(
    request: TrainRequest, before_publish: Callable[[TrainResult], None] | None = None
) -> TrainResult:
    """Train as `request` says; raises a TrainerError subclass on anything the user must fix.

    On the chief, `before_publish(result)` runs once the model is validated and the metrics and
    report are written, right before the model is published (the CLI writes KFP's executor output
    there): when it raises, nothing is published.
    """
    cluster = request.cluster
    publishes = cluster.is_chief and (
        not request.task or request.task.mode in ("train", "train_and_eval")
    )
    held = (
        [(request.model_dir, "--model-dir"), (request.checkpoint_dir, "--checkpoint-dir")]
        if publishes
        else []
    )
    with outputs.exclusive_all(held):  # a second run on either fails at once, naming this one
        if request.task:  # the Task API: the runtime's own loop (generic_trainer.task)
            from generic_trainer import train_task

            return train_task.run(request, before_publish)
        return _run_module(request, cluster, before_publish)


def _run_module(request: TrainRequest, cluster, before_publish) -> TrainResult:
    # Everything that can be checked without TensorFlow is checked first: bad input fails fast.
    examples = inputs.check_examples_and_schema(request)
    scratch = tempfile.mkdtemp(prefix="generic-trainer-")
    WATCHER.install(where=f"the backup in {request.checkpoint_dir}")
    try:
        with user_code.guard(
            f"module {request.program.module_file}"
        ):  # anywhere else the module's code runs
            module_path = user_module.checked_source(
                request.program.module_file,
                os.path.join(scratch, "module"),
                request.program.module_sha256,
                request.storage,
            )
            return _run(request, cluster, module_path, examples, scratch, before_publish)
    finally:
        WATCHER.uninstall()
        shutil.rmtree(scratch, ignore_errors=True)


def _run(
    request: TrainRequest,
    cluster: cluster_lib.Cluster,
    module_path: str,
    examples: inputs.ExampleInputs,
    scratch: str,
    before_publish: Callable[[TrainResult], None] | None = None,
) -> TrainResult:
    strategy_name, strategy, num_gpus = _strategy(request, cluster)
    multi_worker_fit = keras_multiworker.prepare(request, strategy_name, cluster, num_gpus)

    from generic_trainer.fit import checkpointing
    from generic_trainer.records import record_checks

    transformed_splits = record_checks.check_first_records(  # TensorFlow is loaded now
        examples.all_files,
        examples.schema_file,
        transformed_schema_path=examples.transformed_schema_file,
    )
    run_fn = _import_run_fn(request, module_path)
    private = os.path.join(scratch, f"{cluster.task_type}-{cluster.task_index}")
    staging = publisher.staging_for(request.model_dir, cluster.is_chief, private)
    backup = _backup(request, cluster, strategy, private, module_path)
    fn_args = _fn_args(request, examples, cluster, strategy, num_gpus, staging, private, backup)
    try:
        # Keras 3's trainer fixed for several workers while run_fn runs
        with compat.patched(multi_worker_fit):
            result = run_fn_call.train(
                request,
                run_fn,
                fn_args,
                strategy,
                cluster,
                staging.final_serving,
                backup,
                prefetch_device(strategy_name, num_gpus, request.prefetch_to_device),
            )
        if not cluster.is_chief:
            return _worker_done(cluster, result)
        staged = publisher.Staged(
            tflite_examples=publisher.raw_eval_files(
                request, examples.eval_files, transformed_splits
            ),
            schema_file=examples.schema_file,
        )
        publisher.publish_model(request, staging, result, staged, before_publish)
    finally:
        staging.remove()
    checkpointing.clear(request.checkpoint_dir)  # published: the same command starts afresh
    return result


def _strategy(request: TrainRequest, cluster: cluster_lib.Cluster) -> tuple[str, Any, int]:
    """The strategy's name, the strategy (on several workers: once all connected), the GPUs."""
    num_gpus, gpu_words = accelerator.usable_gpus(request.accelerator, request.gpu_environ)
    name = cluster_lib.choose_strategy(request.strategy, num_gpus, cluster)
    strategy = cluster_lib.create_strategy(name, cluster, num_gpus, request.cluster_timeout)
    WATCHER.install()  # again: TensorFlow's coordination service replaces the SIGTERM handler
    log.info(
        "resolved %s %s gpus_used=%d", cluster_lib.describe(strategy, cluster), gpu_words, num_gpus
    )
    return name, strategy, num_gpus


def _worker_done(cluster: cluster_lib.Cluster, result: TrainResult) -> TrainResult:
    log.info(
        "worker %s:%d done; the chief publishes the outputs", cluster.task_type, cluster.task_index
    )
    return result


def _import_run_fn(request: TrainRequest, module_path: str) -> Callable[[FnArgs], Any]:
    """Import the user's module (TensorFlow is loaded now) and find its run_fn."""
    program = request.program
    module = user_module.import_module(module_path, program.module_file)
    run_fn = user_module.get_function(module, program.run_fn, "--run-fn")
    log.info(
        "user module %s, calling %s",
        getattr(module, "__file__", program.module_file),
        program.run_fn,
    )
    return run_fn


def _backup(
    request: TrainRequest,
    cluster: cluster_lib.Cluster,
    strategy: Any,
    private: str,
    module_path: str,
) -> Any:
    """`fn_args.backup_and_restore`: the chief's in <checkpoint_dir>/backup, a worker's private."""
    from generic_trainer.fit import checkpointing

    return checkpointing.BackupAndRestore(
        request.checkpoint_dir,
        strategy=strategy,
        is_chief=cluster.is_chief,
        multi_worker=cluster.is_multi_worker,
        private_dir=os.path.join(private, "backup"),
        settings=checkpointing.run_settings(
            request.train_steps, request.hyperparameters, module_path
        ),
    )


def _fn_args(
    request: TrainRequest,
    examples: inputs.ExampleInputs,
    cluster: cluster_lib.Cluster,
    strategy,
    num_gpus: int,
    staging: publisher.ModelStaging,
    private: str,
    backup,
) -> FnArgs:
    """FnArgs of this replica: the chief's model_run_dir is the request's; a worker's is private."""
    model_run_dir = (
        request.model_run_dir if cluster.is_chief else os.path.join(private, "model_run")
    )
    if cluster.is_chief:
        os.makedirs(request.checkpoint_dir, exist_ok=True)
    os.makedirs(model_run_dir, exist_ok=True)
    return inputs.build_fn_args(
        request,
        examples,
        working_dir=model_run_dir,
        strategy=strategy,
        num_gpus=num_gpus,
        is_chief=cluster.is_chief,
        task_type=cluster.task_type,
        task_index=cluster.task_index,
        num_workers=max(cluster.num_workers, 1),
        shard_data=cluster.is_multi_worker,
        serving_model_dir=staging.serving_dir,
        eval_model_dir=staging.eval_dir,
        model_run_dir=model_run_dir,
        backup_and_restore=backup,
    )


def describe(r: TrainRequest) -> list[str]:
    """The log lines saying what this train run will do."""
    t = r.task
    module, run_fn = (r.program.module_file, r.program.run_fn) if not t else ("", "run_fn")
    lines = [
        f"train request: examples={r.examples} module={module} run_fn={run_fn} "
        f"model_dir={r.model_dir} "
        f"model_run_dir={r.model_run_dir} checkpoint_dir={r.checkpoint_dir} "
        f"train_steps={r.train_steps} "
        f"eval_steps={r.eval_steps} strategy={r.strategy} keras={r.keras} "
        f"custom_config={json.dumps(r.redacted_custom_config())}",
        f"tf.keras is {'Keras 2 (tf_keras)' if r.keras == 'tf_keras' else 'Keras 3'}: "
        f"{r.keras_reason}",
    ]
    if t:
        from generic_trainer.artifacts.redaction import redact
        from generic_trainer.task.config import parse_params_override

        config = f"({len(t.config)} chars)" if t.config else None
        override = (
            json.dumps(redact(parse_params_override(t.params_override)))
            if t.params_override
            else None
        )
        lines.append(
            f"task request: task={t.task} experiment={t.experiment} mode={t.mode} "
            f"config_files={list(t.config_files)} config={config} params_override={override}"
        )
    return lines


def summary(result: TrainResult) -> Summary | None:
    """What the chief prints: the serving model's path and the final metrics (a worker prints
    nothing)."""
    return (
        {"serving_model_dir": result.serving_model_dir, "metrics": result.metrics}
        if result.is_chief
        else None
    )


VERB: VerbContract[TrainRequest, TrainResult] = VerbContract(
    fit_options.TRAIN,
    build_train_request,
    describe,
    run,
    train_kfp.kfp_outputs,
    summary,
    keras=lambda r: r.keras,
)
