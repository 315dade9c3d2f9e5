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

import dataclasses
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

from generic_trainer import compat
from generic_trainer.artifacts import model_artifact, outputs, serving_container, storage
from generic_trainer.artifacts.results import TrainResult
from generic_trainer.errors import TrainerError, UserCodeError
from generic_trainer.fit import accelerator, inputs, keras_auto, keras_multiworker, user_code, user_module
from generic_trainer.fit import cluster as cluster_lib
from generic_trainer.fit.cluster import prefetch_device
from generic_trainer.fit.fn_args import FnArgs
from generic_trainer.fit.preemption import WATCHER
from generic_trainer.intake.fit_request import TrainRequest

log = logging.getLogger(__name__)


def speed_options(request: TrainRequest):
    """The request's --mixed-precision / --jit-compile / --steps-per-execution as fit_hooks.SpeedOptions."""
    from generic_trainer.fit import fit_hooks

    program = request.program
    speed = fit_hooks.SpeedOptions(jit_compile=program.jit_compile, steps_per_execution=program.steps_per_execution,
                                   mixed_precision=program.mixed_precision)
    if speed != fit_hooks.SpeedOptions():
        log.info("speed options: mixed_precision=%s jit_compile=%s steps_per_execution=%s (the module's own "
                 "compile arguments win)", speed.mixed_precision, speed.jit_compile, speed.steps_per_execution)
    return speed


def _call_run_fn(run_fn, fn_args: FnArgs, strategy, keras_mode: str, speed=None, multi_worker: bool = False,
                 prefetch_device: str | None = None):
    from generic_trainer.fit import fit_hooks, keras2_saving, module_strategy
    from generic_trainer.records import record_checks

    def bad_data(e: Exception) -> TrainerError | None:  # the input pipeline could not decode the examples
        return record_checks.decode_error(
            e, [*fn_args.train_files, *fn_args.eval_files], fn_args.schema_path,
            transformed_schema_path=inputs.transformed_schema_file(fn_args.transform_graph_path))

    def lost_peer(e: Exception) -> str:
        return ("lost contact with another replica while training (preempted or crashed?); restart the job: it "
                f"resumes from the last backup in {fn_args.checkpoint_dir}. TensorFlow said: "
                f"{' '.join(getattr(e, 'message', str(e)).split())[:600]}")

    with strategy.scope(), module_strategy.substitute(strategy), keras2_saving.bridge(keras_mode), \
            fit_hooks.recording_fit(keras_mode, speed=speed, prefetch_device=prefetch_device) as record:
        try:
            returned = user_code.call(run_fn, fn_args, what="run_fn", data_input="--examples", translate=bad_data,
                                      lost_peer=lost_peer if multi_worker else None, hint=keras2_saving.hint)
        finally:
            WATCHER.reset_deferral()  # a fit that raised never reached its train end
    WATCHER.raise_if_requested("SIGTERM received while run_fn ran")
    return returned, record


def _raw_eval_files(request: TrainRequest, examples: inputs.ExampleInputs, transformed_splits: list[str]) -> list[str]:
    """The eval splits the serving model can be fed (raw examples): not Transform's transformed examples."""
    raw = [f for f in examples.eval_files if f not in transformed_splits]
    if request.tflite is not None and not raw:
        log.info("the eval examples are Transform's transformed examples (TFX's wiring), which the serving model "
                 "does not take: the TFLite model is checked against the SavedModel on random inputs")
    return raw


def run(request: TrainRequest, before_publish: Callable[[TrainResult], None] | None = None) -> TrainResult:
    """Train as `request` says; raises a TrainerError subclass on anything the user must fix.

    On the chief, `before_publish(result)` runs once the model is validated and the metrics and
    report are written, right before the model is published (the CLI writes KFP's executor output
    there): when it raises, nothing is published.
    """
    cluster = cluster_lib.resolve()
    publishes = cluster.is_chief and (not request.task or request.task.mode in ("train", "train_and_eval"))
    held = [(request.model_dir, "--model-dir"), (request.checkpoint_dir, "--checkpoint-dir")] if publishes else []
    with outputs.exclusive_all(held):  # a second run on either fails at once, naming this one
        if request.task:  # the Task API: the runtime's own loop (generic_trainer.task)
            from generic_trainer.task import runner

            return runner.run(request, before_publish)
        return _run_module(request, cluster, before_publish)


def _run_module(request: TrainRequest, cluster, before_publish) -> TrainResult:
    # Everything that can be checked without TensorFlow is checked first: bad input fails fast.
    examples = inputs.check_examples_and_schema(request)
    scratch = tempfile.mkdtemp(prefix="generic-trainer-")
    WATCHER.install(where=f"the backup in {request.checkpoint_dir}")
    try:
        with user_code.guard(f"module {request.program.module_file}"):  # anywhere else the module's code runs
            module_path = user_module.fetch(request.program.module_file, os.path.join(scratch, "module"))
            keras, why = keras_auto.decide_fetched(request.keras, request.keras_reason, module_path)
            if why != request.keras_reason:
                log.info("tf.keras is %s: %s", "Keras 2 (tf_keras)" if keras == "tf_keras" else "Keras 3", why)
                request = dataclasses.replace(request, keras=keras, keras_reason=why)
            user_module.check_sha256(module_path, request.program.module_sha256)
            user_module.check_syntax(module_path)
            return _run(request, cluster, module_path, examples, scratch, before_publish)
    finally:
        WATCHER.uninstall()
        shutil.rmtree(scratch, ignore_errors=True)


def _run(request: TrainRequest, cluster: cluster_lib.Cluster, module_path: str, examples: inputs.ExampleInputs,
         scratch: str, before_publish: Callable[[TrainResult], None] | None = None) -> TrainResult:
    num_gpus, gpu_words = accelerator.usable_gpus(request.accelerator)
    strategy_name = cluster_lib.choose_strategy(request.strategy, num_gpus, cluster)
    strategy = cluster_lib.create_strategy(strategy_name, cluster, num_gpus, request.cluster_timeout)
    WATCHER.install()  # again: TensorFlow's coordination service replaces the SIGTERM handler
    log.info("resolved %s %s gpus_used=%d", cluster_lib.describe(strategy, cluster), gpu_words, num_gpus)
    multi_worker_fit = keras_multiworker.prepare(request, strategy_name, cluster, num_gpus)

    from generic_trainer.fit import checkpointing
    from generic_trainer.records import record_checks

    transformed_splits = record_checks.check_first_records(  # TensorFlow is loaded now
        examples.all_files, examples.schema_file, transformed_schema_path=examples.transformed_schema_file)

    program = request.program
    module = user_module.import_module(module_path, program.module_file)
    run_fn = user_module.get_function(module, program.run_fn, "--run-fn")
    log.info("user module %s, calling %s", getattr(module, "__file__", program.module_file), program.run_fn)

    final_serving = os.path.join(request.model_dir, outputs.SERVING_DIR)
    final_eval = os.path.join(request.model_dir, outputs.EVAL_DIR)
    private = os.path.join(scratch, f"{cluster.task_type}-{cluster.task_index}")
    if cluster.is_chief:
        # A private staging dir beside the model dir (never inside it); published only after validation.
        staging_root = storage.staging_dir_for(request.model_dir)
        model_run_dir = working_dir = request.model_run_dir
        os.makedirs(request.checkpoint_dir, exist_ok=True)
    else:
        # Workers must export too (saving is collective) but into private dirs removed afterwards.
        staging_root = os.path.join(private, "model")
        model_run_dir = working_dir = os.path.join(private, "model_run")
    serving_dir = os.path.join(staging_root, outputs.SERVING_DIR)
    eval_dir = os.path.join(staging_root, outputs.EVAL_DIR)
    os.makedirs(model_run_dir, exist_ok=True)
    backup = checkpointing.BackupAndRestore(
        request.checkpoint_dir, strategy=strategy, is_chief=cluster.is_chief, multi_worker=cluster.is_multi_worker,
        private_dir=os.path.join(private, "backup"),
        settings=checkpointing.run_settings(request.train_steps, request.hyperparameters, module_path))

    fn_args = inputs.build_fn_args(
        request, examples, working_dir=working_dir, strategy=strategy, num_gpus=num_gpus, is_chief=cluster.is_chief,
        task_type=cluster.task_type, task_index=cluster.task_index, num_workers=max(cluster.num_workers, 1),
        shard_data=cluster.is_multi_worker, serving_model_dir=serving_dir, eval_model_dir=eval_dir,
        model_run_dir=model_run_dir, backup_and_restore=backup)
    try:
        with compat.patched(multi_worker_fit):  # Keras 3's trainer fixed for several workers while run_fn runs
            returned, record = _call_run_fn(run_fn, fn_args, strategy, request.keras, speed_options(request),
                                            cluster.is_multi_worker, prefetch_device(strategy_name, num_gpus))
        if returned is not None and not isinstance(returned, dict):
            raise UserCodeError(f"run_fn returned a {type(returned).__name__}; expected None or a dict of metrics")
        metrics = outputs.scalar_metrics(record.final_metrics())
        metrics.update(outputs.scalar_metrics(returned or {}))
        result = TrainResult(
            is_chief=cluster.is_chief, model_dir=request.model_dir, serving_model_dir=final_serving,
            metrics=metrics, model_info={}, strategy=type(strategy).__name__,
            num_replicas=strategy.num_replicas_in_sync,
            train_steps=backup.global_step or record.train_steps or request.train_steps,
            devices=cluster_lib.strategy_devices(strategy),
        )
        if not cluster.is_chief:
            log.info("worker %s:%d done; the chief publishes the outputs", cluster.task_type, cluster.task_index)
            return result
        result.model_info = outputs.validate_serving_model(serving_dir)
        model_artifact.stage_extras(staging_root, serving_dir, result, request.tflite,
                                     _raw_eval_files(request, examples, transformed_splits), examples.schema_file)
        # Everything else first, the model last: a failure before it publishes nothing.
        _write_run_outputs(request, result)
        if before_publish is not None:
            before_publish(result)
        outputs.publish(serving_dir, final_serving)
        model_artifact.publish_extras(staging_root, request.model_dir)
        if os.path.isdir(eval_dir) and os.listdir(eval_dir):
            outputs.publish(eval_dir, final_eval)
    finally:
        shutil.rmtree(staging_root, ignore_errors=True)
    checkpointing.clear(request.checkpoint_dir)  # published: the same command would now start afresh
    log.info("serving model: %s (signatures %s)", final_serving, ", ".join(result.model_info["signatures"]))
    model_artifact.raise_tflite_failure(result)
    return result


def _write_run_outputs(request: TrainRequest, result: TrainResult) -> None:
    """The chief's outputs besides the model: TensorBoard scalars, metrics file, report, log copy."""
    metrics = result.metrics
    log.info("final metrics: %s", " ".join(f"{k}={v:.4g}" for k, v in sorted(metrics.items())))
    if metrics:
        outputs.write_tensorboard_scalars(request.model_run_dir, metrics, step=result.train_steps or 0)
    if request.metrics_file:
        outputs.write_metrics_file(request.metrics_file, metrics)
    if request.report_file:
        from generic_trainer.artifacts import report

        report.write_train_report(request, result)
    outputs.copy_model_run(request.model_run_dir, request.model_run_copy_dir)


def kfp_metadata(request: TrainRequest, result: TrainResult) -> dict[str, dict[str, Any]]:
    """Metadata of each KFP output artifact of a train run."""
    import tensorflow as tf

    keras_version = None
    try:
        if request.keras == "tf_keras":
            import tf_keras as keras_module
        else:
            import keras as keras_module
        keras_version = keras_module.__version__
    except ImportError:
        pass
    model = {
        "framework": "tensorflow",
        "tensorflow_version": tf.__version__,
        "keras": request.keras,
        "keras_version": keras_version,
        "serving_model_path": outputs.SERVING_DIR,
        "signature_names": result.model_info.get("signatures", []),
        "serving_inputs": result.model_info.get("serving_inputs", {}),
        "train_steps": result.train_steps,
        "strategy": result.strategy,
        "num_replicas": result.num_replicas,
    }
    model_uri = request.kfp.artifacts.get("model", {}).get("uri") if request.kfp else None
    model.update(serving_container.model_registry_metadata(_serving_image(request, tf.__version__), model_uri,
                                                           result.schemata))
    model.update(model_artifact.kfp_metadata(result))
    return {
        "model": {k: v for k, v in model.items() if v is not None},
        "metrics": dict(result.metrics),
        "model_run": {"tensorboard_log_dir": request.model_run_dir},
    }


def _serving_image(request: TrainRequest, tf_version: str) -> str:
    return request.serving_image or serving_container.choose_image(tf_version, request.serving_accelerator,
                                                                   request.serving_image_region)


def kfp_parameters(request: TrainRequest, result: TrainResult) -> dict[str, str]:
    """The train component's output parameters the component declares: the SavedModel's URI and its image."""
    import tensorflow as tf

    model = request.kfp.artifacts.get("model") if request.kfp else None
    if not model or not request.kfp.parameters:
        return {}
    return serving_container.kfp_parameters(model["uri"], outputs.SERVING_DIR, _serving_image(request, tf.__version__),
                                            result.schemata, declared=request.kfp.parameters)
