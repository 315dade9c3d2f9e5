"""`run_experiment`: the one entry that runs a Task (Model Garden's `train_lib.run_experiment`).

The CLI path (`train_task.py`) and the tests both run a Task through it, so the tests cover
what production runs. It checks the config for the mode, writes params.yaml (chief, train
modes), builds the `TaskState`, the inner loops the mode needs (`TrainLoop`, `EvalLoop`), the
eval actions (the best-checkpoint exporter when `trainer.best_checkpoint_export_subdir` is set)
and the `Controller`; runs the mode; then exports the serving model (train modes, when asked).
Usable without the CLI:

    result, controller = run_experiment(task, experiment, "train_and_eval", "/tmp/ckpt",
                                        summary_dir="/tmp/logs", export_dir="/tmp/serving")
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

from generic_trainer.artifacts import bounded_parse
from generic_trainer.task import checkpoints
from generic_trainer.task.base import Task
from generic_trainer.task.config import TRAIN_MODES, ExperimentConfig, as_dict, write_params_yaml
from generic_trainer.task.controller import Controller, ControllerSettings, EvalAction
from generic_trainer.task.eval_loop import EvalLoop
from generic_trainer.task.experiment_result import ExperimentResult
from generic_trainer.task.export import export_serving
from generic_trainer.task.resolve import validate
from generic_trainer.task.state import TaskState
from generic_trainer.task.train_loop import TrainLoop

log = logging.getLogger("generic_trainer.task")


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict):
        out = {}
        for k, v in data.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    return {prefix.rstrip("."): data}


def write_params(experiment: ExperimentConfig, checkpoint_dir: str) -> None:
    """Write params.yaml into the checkpoint dir, warning with the keys that differ from the old.

    Args:
      experiment: the run's resolved config.
      checkpoint_dir: the run's checkpoint dir.
    """
    path = os.path.join(checkpoint_dir, "params.yaml")
    if os.path.isfile(path):
        try:
            old = _flat(bounded_parse.load_yaml(bounded_parse.read_text(path, path), path) or {})
            new = _flat(as_dict(experiment))
            changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
            if changed:
                log.warning(
                    "params.yaml in %s differs from this run's config in %s; resuming with the new "
                    "one",
                    checkpoint_dir,
                    ", ".join(changed[:20]),
                )
        except Exception:  # an unreadable old file is replaced
            pass
    log.info("resolved config written to %s", write_params_yaml(experiment, checkpoint_dir))


def best_checkpoint_action(
    exporter: checkpoints.BestCheckpointExporter, state: TaskState
) -> EvalAction:
    """An eval action offering each evaluated checkpoint of `state` to `exporter`."""

    def export_if_best(logs: dict[str, float], step: int) -> None:
        exporter.maybe_export(state.checkpoint, logs, step)

    return export_if_best


def barrier(strategy: Any) -> None:
    """Wait until every worker gets here (a collective sum): no worker exits while others work.

    Args:
      strategy: the run's tf.distribute strategy.
    """
    import tensorflow as tf

    @tf.function
    def wait():
        one = strategy.run(lambda: tf.constant(1.0))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, one, axis=None)

    wait()


def _export(task: Task, state: TaskState, result: ExperimentResult, export_dir: str) -> None:
    """The serving model (the averaged weights when the optimizer keeps them) to `export_dir`."""
    with state.averaged_weights():
        export_serving(task, state.model, export_dir)
    result.serving_model_dir = export_dir


def _best_checkpoint_exporter(
    t: Any, mode: str, checkpoint_dir: str, private_dir: str, is_chief: bool
) -> checkpoints.BestCheckpointExporter | None:
    """trainer.best_checkpoint_export_subdir's exporter (a worker's: in its private dir)."""
    if not t.best_checkpoint_export_subdir or mode == "train":
        return None
    real = os.path.join(checkpoint_dir, t.best_checkpoint_export_subdir)
    return checkpoints.BestCheckpointExporter(
        real if is_chief else os.path.join(private_dir, "best"),
        t.best_checkpoint_eval_metric,
        t.best_checkpoint_metric_comp,
        is_chief=is_chief,
    )


def _build_controller(
    state: TaskState, mode: str, settings: ControllerSettings
) -> tuple[Controller, checkpoints.BestCheckpointExporter | None]:
    """The controller of `mode` with its inner loops, and the best-checkpoint exporter if asked."""
    exporter = _best_checkpoint_exporter(
        state.experiment.trainer,
        mode,
        settings.checkpoint_dir,
        settings.private_dir,
        settings.is_chief,
    )
    controller = Controller(
        state,
        settings,
        trainer=TrainLoop(state) if mode in TRAIN_MODES else None,
        evaluator=EvalLoop(state) if mode != "train" else None,
        eval_actions=[best_checkpoint_action(exporter, state)] if exporter else [],
    )
    return controller, exporter


def run_experiment(
    task: Task,
    experiment: ExperimentConfig,
    mode: str,
    checkpoint_dir: str,
    summary_dir: str | None = None,
    strategy: Any = None,
    export_dir: str | None = None,
    is_chief: bool = True,
    private_dir: str | None = None,
    *,
    log_interval_s: float = 10.0,
    eval_poll_s: float = 5.0,
    export_when: Callable[[ExperimentResult], bool] | None = None,
) -> tuple[ExperimentResult, Controller]:
    """Run `task` in `mode` (train, eval, train_and_eval, continuous_eval) with `experiment`.

    Args:
      task: the Task instance (its `experiment` is usually `experiment`).
      experiment: the resolved config; checked for `mode` here.
      mode: what to run.
      checkpoint_dir: the run's checkpoints (restored from, saved to) and params.yaml.
      summary_dir: TensorBoard summaries (train/, validation/); None writes none.
      strategy: the tf.distribute strategy; default the current one.
      export_dir: after a train mode, the serving model is written here (`export.py`).
      is_chief: whether this worker writes the real checkpoints, summaries and exports.
      private_dir: where a non-chief worker writes what it must (default: a temp dir).
      log_interval_s: at most this many seconds between progress lines while training.
      eval_poll_s: continuous_eval: seconds between looks for a new checkpoint.
      export_when: called with the result before exporting; False skips the export.

    Returns:
      The result (`result.serving_model_dir` says whether it exported) and the controller
      (`controller.state.model` is the trained model).
    """
    validate(experiment, mode)
    if mode in TRAIN_MODES and is_chief:
        os.makedirs(checkpoint_dir, exist_ok=True)
        write_params(experiment, checkpoint_dir)
    with _worker_dir(private_dir, is_chief) as private:
        settings = ControllerSettings(
            checkpoint_dir=checkpoint_dir,
            summary_dir=summary_dir,
            is_chief=is_chief,
            private_dir=private,
            log_interval_s=log_interval_s,
            eval_poll_s=eval_poll_s,
        )
        return _run(task, experiment, mode, strategy, settings, export_dir, export_when)


@contextlib.contextmanager
def _worker_dir(private_dir: str | None, is_chief: bool) -> Iterator[str]:
    """A non-chief worker's private dir: `private_dir`, else a temp dir removed afterwards."""
    if private_dir is None and not is_chief:
        made = tempfile.mkdtemp(prefix="generic-trainer-worker-")
        try:
            yield made
        finally:
            shutil.rmtree(made, ignore_errors=True)
    else:
        yield private_dir or (
            tempfile.mkdtemp(prefix="generic-trainer-worker-") if not is_chief else ""
        )


def _run(
    task: Task,
    experiment: ExperimentConfig,
    mode: str,
    strategy: Any,
    settings: ControllerSettings,
    export_dir: str | None,
    export_when: Callable[[ExperimentResult], bool] | None,
) -> tuple[ExperimentResult, Controller]:
    """Run `mode` with a controller, note the best checkpoint, and export when asked."""
    import tensorflow as tf

    strategy = strategy or tf.distribute.get_strategy()
    state = TaskState(task, experiment, strategy, training=mode in TRAIN_MODES)
    controller, exporter = _build_controller(state, mode, settings)
    try:
        result = controller.run(mode)
        if exporter is not None and settings.is_chief and result.eval_history:
            result.best_checkpoint_dir = exporter.export_dir
        if export_dir and mode in TRAIN_MODES and (export_when is None or export_when(result)):
            _export(task, state, result, export_dir)
    finally:
        controller.close()
    return result, controller
