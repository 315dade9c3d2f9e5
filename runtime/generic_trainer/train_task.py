"""`generic-trainer train --task module:Class`, the train verb's Task path: one Task run,
from a TrainRequest to published outputs.

Steps: load the Task class (a .py path, gs:// URI or dotted module, then `:Class`) and check it
defines what it must; resolve the experiment config (defaults -> run inputs -> config files ->
inline config -> --params-override) and check it; create the strategy (before any other TF op:
Task modules must not run TensorFlow ops at import time); run the requested mode through
`run_experiment` (the entry the tests use too), which exports the serving model (workers export
into private dirs removed afterwards); validate and publish it (chief only); write the metrics.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable

from generic_trainer.artifacts import outputs
from generic_trainer.artifacts.results import TrainResult
from generic_trainer.errors import UserInputError
from generic_trainer.fit import accelerator, user_code
from generic_trainer.fit import cluster as cluster_lib
from generic_trainer.fit.inputs import resolve_schema_file
from generic_trainer.fit.preemption import WATCHER
from generic_trainer.fit.requests import TrainRequest
from generic_trainer.task import base, config
from generic_trainer.task.config import TRAIN_MODES
from generic_trainer.task.experiment import barrier, run_experiment
from generic_trainer.task.experiment_result import ExperimentResult
from generic_trainer.task.loading import load_task_class, make_task, resolve_experiment
from generic_trainer.trained import publisher

log = logging.getLogger("generic_trainer.task")


def run(
    request: TrainRequest, before_publish: Callable[[TrainResult], None] | None = None
) -> TrainResult:
    """Run the Task the request names.

    `before_publish(result)` runs on the chief after the metrics and report are written, right
    before the model is published; when it raises, nothing is published.
    """
    cluster = request.cluster
    program = request.task
    if program.mode == "continuous_eval" and cluster.is_multi_worker:
        raise UserInputError(
            "--mode",
            "continuous_eval runs as one process beside the training job; "
            f"{cluster.source} names {cluster.num_workers} workers",
        )
    scratch = tempfile.mkdtemp(prefix="generic-trainer-task-")
    try:
        with user_code.guard(
            f"the Task {program.task}"
        ):  # at import or in any of the Task's methods
            task_cls = load_task_class(
                program.task,
                os.path.join(scratch, "module"),
                program.module_sha256,
                request.storage,
            )
            experiment = resolve_experiment(task_cls, request)
            return _run(request, cluster, task_cls, experiment, scratch, before_publish)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run(
    request: TrainRequest,
    cluster: cluster_lib.Cluster,
    task_cls: type[base.Task],
    experiment: config.ExperimentConfig,
    scratch: str,
    before_publish: Callable[[TrainResult], None] | None = None,
) -> TrainResult:
    registered, gpu_words = accelerator.usable_gpus(request.accelerator, request.gpu_environ)
    num_gpus = _use_gpus(experiment.runtime.num_gpus, registered)
    strategy_name = cluster_lib.choose_strategy(
        experiment.runtime.distribution_strategy, num_gpus, cluster
    )
    strategy = cluster_lib.create_strategy(
        strategy_name, cluster, num_gpus, request.cluster_timeout
    )
    log.info(
        "resolved %s %s gpus_used=%d", cluster_lib.describe(strategy, cluster), gpu_words, num_gpus
    )
    private = os.path.join(scratch, f"{cluster.task_type}-{cluster.task_index}")
    staging = publisher.staging_for(request.model_dir, cluster.is_chief, private)
    try:  # its finally removes the watcher: a Task whose constructor raises leaves none behind
        # after the strategy: TensorFlow's coordination service replaces the SIGTERM handler
        WATCHER.install(where=f"the latest checkpoint in {request.checkpoint_dir}")
        _log_experiment(request, task_cls, experiment)
        task = make_task(task_cls, experiment, request.model_run_dir)
        if cluster.is_chief:
            os.makedirs(request.model_run_dir, exist_ok=True)
        train_result = _run_and_publish(
            request, cluster, task, experiment, strategy, staging, private, before_publish
        )
        _end_together(cluster, strategy)
    finally:
        WATCHER.uninstall()
        staging.remove()
    if not cluster.is_chief:
        log.info(
            "worker %s:%d done; the chief publishes the outputs",
            cluster.task_type,
            cluster.task_index,
        )
    return train_result


def _log_experiment(
    request: TrainRequest, task_cls: type[base.Task], experiment: config.ExperimentConfig
) -> None:
    t, d = experiment.trainer, experiment.task
    log.info(
        "task %s mode=%s experiment=%s train_steps=%d steps_per_loop=%d validation_interval=%d "
        "validation_steps=%d checkpoint_interval=%d batch=%d/%d train=%s validation=%s "
        "checkpoints=%s",
        task_cls.__name__,
        request.task.mode,
        request.task.experiment or "(defaults)",
        t.train_steps,
        t.steps_per_loop,
        t.validation_interval,
        t.validation_steps,
        t.checkpoint_interval,
        d.train_data.global_batch_size,
        d.validation_data.global_batch_size,
        d.train_data.input_path or "-",
        d.validation_data.input_path or "-",
        request.checkpoint_dir,
    )


def _run_and_publish(
    request: TrainRequest,
    cluster: cluster_lib.Cluster,
    task: base.Task,
    experiment: config.ExperimentConfig,
    strategy,
    staging: publisher.ModelStaging,
    private: str,
    before_publish: Callable[[TrainResult], None] | None,
) -> TrainResult:
    """Run the mode; on the chief, hand what it exported to the publisher."""
    trains = request.task.mode in TRAIN_MODES
    result, _ = run_experiment(
        task,
        experiment,
        request.task.mode,
        request.checkpoint_dir,
        summary_dir=request.model_run_dir if cluster.is_chief else None,
        strategy=strategy,
        export_dir=staging.serving_dir,
        is_chief=cluster.is_chief,
        private_dir=private,
        export_when=lambda r: (
            not _already_finished(request, experiment, r, cluster, staging.final_serving)
        ),
    )
    train_result = TrainResult(
        is_chief=cluster.is_chief,
        model_dir=request.model_dir,
        serving_model_dir=staging.final_serving if trains else "",
        metrics=outputs.scalar_metrics(result.metrics()),
        model_info={},
        strategy=type(strategy).__name__,
        num_replicas=strategy.num_replicas_in_sync,
        train_steps=result.global_step,
        devices=cluster_lib.strategy_devices(strategy),
    )
    if cluster.is_chief:
        staged = publisher.Staged(
            result.serving_model_dir is not None,
            trains,
            type(task).__name__,
            *_eval_examples(request),
        )
        publisher.publish_model(request, staging, train_result, staged, before_publish)
    return train_result


def _end_together(cluster: cluster_lib.Cluster, strategy) -> None:
    """Several workers: wait for each other at the end (the chief has published by then)."""
    if cluster.is_multi_worker and not cluster.is_chief:
        barrier(strategy)  # the chief has published; now every worker may exit
    elif cluster.is_multi_worker:
        try:
            barrier(strategy)
        except Exception as e:  # the model is published: a worker lost now does not fail the run
            log.warning(
                "a worker did not reach the end of the run after the model was published: %s", e
            )


def _eval_examples(request: TrainRequest) -> tuple[list[str], str | None]:
    """Eval file patterns and the schema file, to check a TFLite export on (none when no
    --examples)."""
    if request.tflite is None or not request.eval_files:
        return [], None
    return list(request.eval_files), resolve_schema_file(request.schema)


def _use_gpus(requested: int, visible: int) -> int:
    """runtime.num_gpus: 0 uses every visible GPU; N uses the first N (before the strategy is
    made)."""
    if not requested or requested == visible:
        return visible
    if requested > visible:
        raise UserInputError(
            "runtime.num_gpus",
            f"{requested} GPUs asked for, {visible} visible on this machine: "
            "lower runtime.num_gpus (0 uses every visible GPU)",
        )
    import tensorflow as tf

    tf.config.set_visible_devices(tf.config.list_physical_devices("GPU")[:requested], "GPU")
    log.info("runtime.num_gpus=%d: using %d of the %d visible GPUs", requested, requested, visible)
    return requested


def _already_finished(
    request: TrainRequest,
    experiment: config.ExperimentConfig,
    result: ExperimentResult,
    cluster: cluster_lib.Cluster,
    final_serving: str,
) -> bool:
    """Whether the checkpoint was already at trainer.train_steps when the run started (nothing was
    trained).

    Says so in the log either way. Returns True (skip the export) only when the serving model of
    that finished checkpoint is already published in the model dir, e.g. a retry of a task that
    ended after publishing; otherwise the finished checkpoint is exported, and the log says that
    too.
    """
    target = experiment.trainer.train_steps
    if (
        request.task.mode not in TRAIN_MODES
        or result.restored_from is None
        or result.initial_step < target
    ):
        return False
    published = os.path.isfile(os.path.join(final_serving, "saved_model.pb"))
    where = (
        f"{request.checkpoint_dir} already holds a finished run: checkpoint {result.restored_from} "
        "is at step "
        f"{result.initial_step} >= trainer.train_steps={target}, so nothing was trained (an "
        "earlier attempt "
        f"of this task, or an earlier run given the same checkpoint dir, finished it)"
    )
    if (
        published and not cluster.is_multi_worker
    ):  # several workers export collectively: they all export again
        log.warning(
            "%s; its serving model is already published at %s: exporting nothing. Give a new "
            "checkpoint dir (or a new run) to train again.",
            where,
            final_serving,
        )
        return True
    log.warning(
        "%s; exporting the serving model from that checkpoint to %s. Give a new checkpoint dir (or "
        "a new run) to train again.",
        where,
        final_serving,
    )
    return False
