"""Calling a user's `run_fn`: inside the strategy's scope, with its fits recorded and sped up,
and this replica's result from what it returned (`train`).

Failures map to exit codes through `user_code` (undecodable examples named by split and file, a
lost peer on several workers, a Keras 2 save hint); SIGTERM during the call ends it with
`Preempted` once `run_fn` returns.
"""

from __future__ import annotations

import logging
from typing import Any

from generic_trainer.artifacts import outputs
from generic_trainer.artifacts.results import TrainResult
from generic_trainer.errors import TrainerError, UserCodeError
from generic_trainer.fit import cluster as cluster_lib
from generic_trainer.fit import inputs, user_code
from generic_trainer.fit.fn_args import FnArgs
from generic_trainer.fit.preemption import WATCHER
from generic_trainer.fit.requests import RunFnProgram, TrainRequest
from generic_trainer.fit.speed import SpeedOptions

log = logging.getLogger("generic_trainer.train")


def speed_options(program: RunFnProgram) -> SpeedOptions:
    """The program's --mixed-precision / --jit-compile / --steps-per-execution as SpeedOptions."""
    speed = SpeedOptions(
        jit_compile=program.jit_compile,
        steps_per_execution=program.steps_per_execution,
        mixed_precision=program.mixed_precision,
    )
    if speed != SpeedOptions():
        log.info(
            "speed options: mixed_precision=%s jit_compile=%s steps_per_execution=%s (the module's "
            "own compile arguments win)",
            speed.mixed_precision,
            speed.jit_compile,
            speed.steps_per_execution,
        )
    return speed


def call_run_fn(
    run_fn,
    fn_args: FnArgs,
    strategy,
    keras_mode: str,
    speed=None,
    multi_worker: bool = False,
    prefetch_device: str | None = None,
) -> tuple[Any, Any]:
    """Call `run_fn(fn_args)` inside the strategy's scope, with every `fit` recorded.

    Args:
        run_fn: the user's function.
        fn_args: what it gets.
        strategy: the replica's tf.distribute strategy.
        keras_mode: "keras3" or "tf_keras" (what `tf.keras` is for the module).
        speed: the speed options applied to every compile (None: the module's own).
        multi_worker: a lost peer is then a ClusterError naming the backup to resume from.
        prefetch_device: where `fit`'s batches are copied ahead of each step (None: nowhere).

    Returns:
        What run_fn returned and the `fit_hooks.FitRecord` of its fits.

    Raises:
        TrainerError: what user_code maps a failure to; Preempted when SIGTERM arrived.
    """
    from generic_trainer.fit import fit_hooks, keras2_saving, module_strategy

    with (
        strategy.scope(),
        module_strategy.substitute(strategy),
        keras2_saving.bridge(keras_mode),
        fit_hooks.recording_fit(keras_mode, speed=speed, prefetch_device=prefetch_device) as record,
    ):
        try:
            returned = user_code.call(
                run_fn,
                fn_args,
                what="run_fn",
                data_input="--examples",
                translate=lambda e: _bad_data(e, fn_args),
                lost_peer=(lambda e: _lost_peer(e, fn_args)) if multi_worker else None,
                hint=keras2_saving.hint,
            )
        finally:
            WATCHER.reset_deferral()  # a fit that raised never reached its train end
    WATCHER.raise_if_requested("SIGTERM received while run_fn ran")
    return returned, record


def train(
    request: TrainRequest,
    run_fn,
    fn_args: FnArgs,
    strategy,
    cluster: cluster_lib.Cluster,
    serving_model_dir: str,
    backup,
    device: str | None,
) -> TrainResult:
    """Call run_fn (its batches prefetched to `device` when given).

    Returns:
        This replica's result, from what run_fn returned and what its fits recorded; the model
        will be published at `serving_model_dir`.

    Raises:
        UserCodeError: run_fn returned something other than None or a dict of metrics.
    """
    returned, record = call_run_fn(
        run_fn,
        fn_args,
        strategy,
        request.keras,
        speed_options(request.program),
        cluster.is_multi_worker,
        device,
    )
    if returned is not None and not isinstance(returned, dict):
        raise UserCodeError(
            f"run_fn returned a {type(returned).__name__}; expected None or a dict of metrics"
        )
    metrics = outputs.scalar_metrics(record.final_metrics())
    metrics.update(outputs.scalar_metrics(returned or {}))
    return TrainResult(
        is_chief=cluster.is_chief,
        model_dir=request.model_dir,
        serving_model_dir=serving_model_dir,
        metrics=metrics,
        model_info={},
        strategy=type(strategy).__name__,
        num_replicas=strategy.num_replicas_in_sync,
        train_steps=backup.global_step or record.train_steps or request.train_steps,
        devices=cluster_lib.strategy_devices(strategy),
    )


def _bad_data(e: Exception, fn_args: FnArgs) -> TrainerError | None:
    """The input pipeline could not decode the examples: which split, file and feature."""
    from generic_trainer.records import record_checks

    return record_checks.decode_error(
        e,
        [*fn_args.train_files, *fn_args.eval_files],
        fn_args.schema_path,
        transformed_schema_path=inputs.transformed_schema_file(fn_args.transform_graph_path),
    )


def _lost_peer(e: Exception, fn_args: FnArgs) -> str:
    """What a replica lost mid-training means, and where the restart resumes from."""
    return (
        "lost contact with another replica while training (preempted or crashed?); restart the "
        f"job: it resumes from the last backup in {fn_args.checkpoint_dir}. TensorFlow said: "
        f"{' '.join(getattr(e, 'message', str(e)).split())[:600]}"
    )
