"""The outer loop of a Task run (Orbit's Controller): when to train, evaluate, checkpoint and stop.

The inner loops run the steps: `TrainLoop.run(n)` (`train_loop.py`) trains n steps in one
tf.function call, `EvalLoop.run(n)` (`eval_loop.py`) evaluates. The controller decides around
them: it restores the latest checkpoint (`restore.py`); trains in loops of `trainer.steps_per_loop`
steps up to `trainer.train_steps` (`train_progress.py` logs them); saves a checkpoint every
`checkpoint_interval` steps and at the end; writes summaries every `summary_interval` steps;
evaluates every `validation_interval` steps (train_and_eval) and hands each evaluation to its eval
actions (the best-checkpoint exporter is one); recovers from a loss blow-up (`divergence.py`);
saves and stops on SIGTERM; in continuous_eval it evaluates each new checkpoint
(`continuous_eval.py`).

Multi-worker rules: every worker runs the same sequence of collective steps (loops, metric
reads, checkpoint writes, eval actions); only the chief writes summaries and the real
checkpoints; other workers write into their private directory.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable, Sequence

from generic_trainer.errors import UserInputError
from generic_trainer.fit.preemption import WATCHER
from generic_trainer.task.config import MODES, TRAIN_MODES
from generic_trainer.task.continuous_eval import evaluate_continuously
from generic_trainer.task.divergence import Recovery
from generic_trainer.task.eval_loop import EvalLoop
from generic_trainer.task.experiment_result import ExperimentResult
from generic_trainer.task.restore import restore_run
from generic_trainer.task.state import TaskState
from generic_trainer.task.summaries import Summaries
from generic_trainer.task.train_loop import TrainLoop
from generic_trainer.task.train_progress import TrainProgress

log = logging.getLogger("generic_trainer.task")
progress_log = logging.getLogger("generic_trainer.progress")

EvalAction = Callable[[dict[str, float], int], None]
"""Called with (the eval logs, the global step) after each evaluation, on every worker."""


@dataclasses.dataclass(frozen=True)
class ControllerSettings:
    """Where a run writes and how often the controller reports (the schedule: experiment.trainer).

    Attributes:
      checkpoint_dir: the run's checkpoints (the chief's; every worker restores from there).
      summary_dir: TensorBoard summaries (train/, validation/), chief only; None: none.
      is_chief: only the chief writes real checkpoints and summaries.
      private_dir: where a non-chief worker writes what it must (saving can be collective).
    """

    checkpoint_dir: str
    summary_dir: str | None = None
    is_chief: bool = True
    private_dir: str = ""
    log_interval_s: float = 10.0  # at most this many seconds between progress lines while training
    eval_poll_s: float = 5.0  # continuous_eval: seconds between looks for a new checkpoint


class Controller:
    """Runs a mode of a Task with the inner loops; see the module docstring.

    Args:
      state: the model, optimizer, metrics, EMA, global step and checkpoint (`TaskState`).
      settings: directories, the worker's role and reporting intervals (`ControllerSettings`).
      trainer: the inner training loop; None when the mode does not train.
      evaluator: the inner evaluation loop; None when the mode does not evaluate.
      eval_actions: called in order with (eval logs, global step) after every evaluation, on every
        worker (an action may write a checkpoint, which can be collective).
    """

    def __init__(
        self,
        state: TaskState,
        settings: ControllerSettings,
        trainer: TrainLoop | None = None,
        evaluator: EvalLoop | None = None,
        eval_actions: Sequence[EvalAction] = (),
    ):
        import tensorflow as tf

        self.state, self.settings = state, settings
        self.trainer, self.evaluator = trainer, evaluator
        self.eval_actions = tuple(eval_actions)
        self.schedule = state.experiment.trainer
        self.recovery = Recovery(state, self.schedule, settings.checkpoint_dir)
        self._last_checkpoint = self._last_summary = 0  # the steps of the last ones (train)
        self.eval_history: list[tuple[int, dict[str, float]]] = []
        manager_dir = (
            settings.checkpoint_dir
            if settings.is_chief
            else os.path.join(settings.private_dir, "checkpoints")
        )
        self.manager = tf.train.CheckpointManager(
            state.checkpoint,
            manager_dir,
            max_to_keep=self.schedule.max_to_keep,
            step_counter=state.global_step,
        )
        self.summaries = Summaries(settings.summary_dir, settings.is_chief)
        self._agree_fn = None

    # ---- checkpoints ------------------------------------------------------------------------

    def restore(self) -> str | None:
        """Restore the run's newest readable checkpoint, else call Task.initialize (restore.py).

        Returns:
          The checkpoint restored, or None when the run starts afresh.
        """
        return restore_run(self.state, self.settings.checkpoint_dir)

    def save(self) -> None:
        """Save a checkpoint at the current step (every worker: saving can be collective)."""
        path = self.manager.save(checkpoint_number=self.state.step)
        if self.settings.is_chief:
            log.info("checkpoint saved: %s", path)

    # ---- training ---------------------------------------------------------------------------

    def train(self, target_step: int, evaluate_every: int | None = None) -> dict[str, float]:
        """Train up to `target_step`, saving checkpoints (and evaluating every `evaluate_every`).

        SIGTERM while training saves a checkpoint at the end of the current loop and exits 143.

        Args:
          target_step: the global step to train to.
          evaluate_every: evaluate every this many steps and at the end (None: never).

        Returns:
          The logs of the last inner loop ({} when the checkpoint already reached the target).
        """
        t, s = self.schedule, self.state
        if s.step >= target_step:
            log.info(
                "step %d already reaches trainer.train_steps=%d: nothing to train",
                s.step,
                target_step,
            )
            return {}
        progress_log.info(
            "training from step %d to %d (%d steps per loop, %d replicas)",
            s.step,
            target_step,
            t.steps_per_loop,
            s.strategy.num_replicas_in_sync,
        )
        if t.recovery_max_trials > 0 and s.step == 0:  # the same decision on every worker
            self.save()  # something to recover to from a loss blow-up before the first checkpoint
        progress = TrainProgress(s.step, target_step, self.settings.log_interval_s)
        self._last_checkpoint = self._last_summary = s.step
        logs: dict[str, float] = {}
        with WATCHER.deferred():
            while s.step < target_step:
                steps = self._loop_steps(target_step, evaluate_every)
                loop_start = time.monotonic()
                logs = self.trainer.run(steps)
                if self.recovery.recovered(logs.get(s.task.loss_key, float("nan")), s.step, steps):
                    self._last_checkpoint = self._last_summary = s.step
                    continue
                progress.loop_done(steps, s.step, loop_start, logs)
                self._after_loop(logs, s.step >= target_step, evaluate_every)
        return logs

    def _loop_steps(self, target_step: int, evaluate_every: int | None) -> int:
        """The steps of the next inner loop: steps_per_loop, cut at the target and the next eval."""
        step = self.state.step
        steps = min(self.schedule.steps_per_loop, target_step - step)
        if evaluate_every:
            steps = min(steps, evaluate_every - step % evaluate_every)
        return steps

    def _after_loop(self, logs: dict[str, float], done: bool, evaluate_every: int | None) -> None:
        """Summaries, checkpoint and evaluation when due after an inner loop; stop on SIGTERM."""
        t, step = self.schedule, self.state.step
        if step // t.summary_interval > self._last_summary // t.summary_interval or done:
            self._last_summary = step
            lr = self.state.learning_rate()
            self.summaries.write(
                "train", {**logs, **({"learning_rate": lr} if lr is not None else {})}, step
            )
        preempted = self._agree_preempted()
        due = step // t.checkpoint_interval > self._last_checkpoint // t.checkpoint_interval
        if due or done or preempted:
            self._last_checkpoint = step
            self.save()
        if preempted:
            raise WATCHER.error(f"SIGTERM received; checkpoint saved at step {step}")
        if evaluate_every and (step % evaluate_every == 0 or done):
            self.evaluate()

    @property
    def recoveries(self) -> int:
        """The loss blow-ups recovered from so far (trainer.recovery_max_trials)."""
        return self.recovery.count

    def _agree_preempted(self) -> bool:
        """Whether any worker got SIGTERM (all workers agree, so all save at the same step)."""
        strategy = self.state.strategy
        if strategy.num_replicas_in_sync > 1:
            import tensorflow as tf

            if self._agree_fn is None:

                def agree(flag):
                    local = strategy.run(lambda: tf.identity(flag))
                    return strategy.reduce(tf.distribute.ReduceOp.SUM, local, axis=None)

                self._agree_fn = tf.function(agree)
            return bool(self._agree_fn(tf.constant(1.0 if WATCHER.requested else 0.0)) > 0)
        return WATCHER.requested

    # ---- evaluation -------------------------------------------------------------------------

    def evaluate(self) -> dict[str, float]:
        """Evaluate, record it, write validation summaries and run the eval actions; returns the
        logs."""
        step = self.state.step
        logs = self.evaluator.run(self.schedule.validation_steps)
        self.eval_history.append((step, dict(logs)))
        self.summaries.write("validation", logs, step)
        for action in self.eval_actions:
            action(logs, step)
        return logs

    # ---- modes ------------------------------------------------------------------------------

    def run(self, mode: str) -> ExperimentResult:
        """Run `mode` (train, eval, train_and_eval, continuous_eval) to the end; returns what
        happened."""
        if mode not in MODES:
            raise UserInputError("--mode", f"expected one of {', '.join(MODES)}, got {mode!r}")
        if mode in TRAIN_MODES and self.trainer is None:
            raise ValueError(f"mode {mode} trains: the Controller needs a trainer")
        if mode != "train" and self.evaluator is None:
            raise ValueError(f"mode {mode} evaluates: the Controller needs an evaluator")
        if mode == "continuous_eval":
            result = ExperimentResult(mode=mode, global_step=0, initial_step=0, restored_from=None)
            evaluate_continuously(
                self.state,
                self.schedule,
                self.settings.checkpoint_dir,
                self.settings.eval_poll_s,
                self.evaluate,
            )
            return self._finish(result)
        restored = self.restore()
        initial = self.state.step
        result = ExperimentResult(
            mode=mode, global_step=initial, initial_step=initial, restored_from=restored
        )
        if mode == "eval":
            if restored is None and not self.state.task.params.init_checkpoint:
                log.warning(
                    "no checkpoint in %s, no task.init_checkpoint: evaluating an untrained model",
                    self.settings.checkpoint_dir,
                )
            self.evaluate()
            return self._finish(result)
        every = self.schedule.validation_interval if mode == "train_and_eval" else None
        result.train_logs = self.train(self.schedule.train_steps, evaluate_every=every)
        if mode == "train_and_eval" and (
            not self.eval_history or self.eval_history[-1][0] != self.state.step
        ):
            self.evaluate()
        return self._finish(result)

    def _finish(self, result: ExperimentResult) -> ExperimentResult:
        result.eval_history = list(self.eval_history)
        if self.eval_history:
            result.eval_logs = dict(self.eval_history[-1][1])
        # continuous_eval: the step of the last checkpoint evaluated
        result.global_step = (
            self.eval_history[-1][0] if result.mode == "continuous_eval" else self.state.step
        )
        return result

    def close(self) -> None:
        """Close the summary writers."""
        self.summaries.close()
