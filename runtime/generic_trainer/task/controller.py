"""The outer loop of a Task run (Orbit's Controller): when to train, evaluate, checkpoint and stop.

The inner loops run the steps: `TrainLoop.run(n)` (`train_loop.py`) trains n steps in one
tf.function call, `EvalLoop.run(n)` (`eval_loop.py`) evaluates. The controller decides around
them: it restores the latest checkpoint (else calls `Task.initialize`); trains in loops of
`trainer.steps_per_loop` steps up to `trainer.train_steps`; saves a checkpoint every
`checkpoint_interval` steps and at the end; writes summaries every `summary_interval` steps and
logs progress; evaluates every `validation_interval` steps (train_and_eval) and hands each
evaluation to the eval actions it was given (the best-checkpoint exporter is one); recovers from
a loss blow-up by restoring the last checkpoint (`trainer.recovery_max_trials`); saves and stops
on SIGTERM; in continuous_eval it evaluates each new checkpoint another process writes.

Multi-worker rules: every worker runs the same sequence of collective steps (loops, metric
reads, checkpoint writes, eval actions); only the chief writes summaries and the real
checkpoints; other workers write into their private directory.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from generic_trainer.errors import UserCodeError, UserInputError
from generic_trainer.fit.checkpoint_files import checkpoint_steps
from generic_trainer.fit.preemption import WATCHER
from generic_trainer.fit.progress import fmt_eta
from generic_trainer.task.config import MODES, TRAIN_MODES
from generic_trainer.task.eval_loop import EvalLoop
from generic_trainer.task.state import TaskState, format_logs
from generic_trainer.task.train_loop import TrainLoop

log = logging.getLogger("generic_trainer.task")
progress_log = logging.getLogger("generic_trainer.progress")

EvalAction = Callable[[dict[str, float], int], None]
"""Called with (the eval logs, the global step) after each evaluation, on every worker."""


@dataclasses.dataclass
class ExperimentResult:
    """What a run did: steps, the last train and eval logs, every evaluation, what it exported."""

    mode: str
    global_step: int
    initial_step: int
    restored_from: str | None
    train_logs: dict[str, float] = dataclasses.field(default_factory=dict)
    eval_logs: dict[str, float] = dataclasses.field(default_factory=dict)
    eval_history: list[tuple[int, dict[str, float]]] = dataclasses.field(default_factory=list)
    best_checkpoint_dir: str | None = None
    serving_model_dir: str | None = (
        None  # where run_experiment exported the serving model (None: not exported)
    )

    def metrics(self) -> dict[str, float]:
        """Eval metrics under their names, train metrics as `train_<name>` (what KFP's Metrics
        carry)."""
        out = {f"train_{k}": v for k, v in self.train_logs.items()}
        out.update(self.eval_logs)
        return out


@dataclasses.dataclass(frozen=True)
class ControllerSettings:
    """Where a run writes and how often the controller reports; the schedule is
    `experiment.trainer`."""

    checkpoint_dir: str  # the run's checkpoints (the chief's; every worker restores from there)
    summary_dir: str | None = (
        None  # TensorBoard summaries (train/, validation/), chief only; None: none
    )
    is_chief: bool = True  # only the chief writes real checkpoints and summaries
    private_dir: str = (
        ""  # where a non-chief worker writes what it must write (saving can be collective)
    )
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
        self.recoveries = 0  # loss blow-ups recovered from (trainer.recovery_max_trials)
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
        self._writers: dict[str, Any] = {}
        self._agree_fn = None

    # ---- checkpoints ------------------------------------------------------------------------

    def restore(self) -> str | None:
        """Restore the newest readable checkpoint of the run (all workers read the chief's), else
        Task.initialize.

        The checkpoints are those on disk (`ckpt-<step>.index` in the checkpoint dir, never a path
        the `checkpoint` state file names); a damaged one (truncated, garbled) is skipped with a
        warning naming it and the one before it restored; none readable is exit 2 naming them.
        """
        s, checkpoint_dir = self.state, self.settings.checkpoint_dir
        damaged = []
        for step in reversed(checkpoint_steps(checkpoint_dir, "ckpt")):
            path = os.path.join(checkpoint_dir, f"ckpt-{step}")
            problem = self._read_checkpoint(path)
            if problem:
                log.warning(
                    "checkpoint %s cannot be restored (%s); trying the one before it", path, problem
                )
                damaged.append(f"{path}: {problem}")
                continue
            log.info("restored checkpoint %s (step %d)", path, s.step)
            s.start_ema()
            return path
        if damaged:
            raise UserInputError(
                "--checkpoint-dir",
                f"no checkpoint in {checkpoint_dir} can be restored ("
                + "; ".join(damaged)[:1500]
                + "); move them away to start afresh",
            )
        if s.task.params.init_checkpoint:
            log.info(
                "no checkpoint in %s: initializing from task.init_checkpoint %s",
                checkpoint_dir,
                s.task.params.init_checkpoint,
            )
        s.call("initialize", s.task.initialize, s.model)
        s.start_ema()
        return None

    def _read_checkpoint(self, path: str) -> str | None:
        """Restore `path` into the run's state; why it cannot be (a damaged file), or None. Another
        model's
        checkpoint is exit 2."""
        s = self.state
        try:
            status = s.checkpoint.restore(path)
            if s.training:
                status.assert_existing_objects_matched()
            else:
                status.expect_partial()
        except AssertionError as e:
            raise UserInputError(
                "--checkpoint-dir",
                f"{path} does not match this model and optimizer "
                f"(use a fresh checkpoint dir for a changed model): {str(e)[:400]}",
            ) from None
        except (
            Exception
        ) as e:  # DataLossError, NotFoundError, IndexError ("Read less bytes"): a damaged file
            return f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
        return None

    def save(self) -> None:
        """Save a checkpoint at the current step (every worker: saving can be collective)."""
        path = self.manager.save(checkpoint_number=self.state.step)
        if self.settings.is_chief:
            log.info("checkpoint saved: %s", path)

    # ---- summaries --------------------------------------------------------------------------

    def _summaries(self, name: str, logs: dict[str, float], step: int) -> None:
        if not self.settings.is_chief or not self.settings.summary_dir:
            return
        import tensorflow as tf

        if name not in self._writers:
            self._writers[name] = tf.summary.create_file_writer(
                os.path.join(self.settings.summary_dir, name)
            )
        writer = self._writers[name]
        with writer.as_default(step=step):
            for k, v in logs.items():
                tf.summary.scalar(k, v)
        writer.flush()

    # ---- training ---------------------------------------------------------------------------

    def train(self, target_step: int, evaluate_every: int | None = None) -> dict[str, float]:
        """Train up to `target_step`, saving checkpoints (and evaluating every `evaluate_every`
        steps).

        Returns the logs of the last inner loop ({} when the checkpoint already reached
        `target_step`).
        """
        t, s = self.schedule, self.state
        step = start = s.step
        if step >= target_step:
            log.info(
                "step %d already reaches trainer.train_steps=%d: nothing to train",
                step,
                target_step,
            )
            return {}
        progress_log.info(
            "training from step %d to %d (%d steps per loop, %d replicas)",
            step,
            target_step,
            t.steps_per_loop,
            s.strategy.num_replicas_in_sync,
        )
        if (
            t.recovery_max_trials > 0 and step == 0
        ):  # the same decision on every worker (saving can be collective)
            self.save()  # something to recover to from a loss blow-up before the first checkpoint
        last_ckpt = last_summary = step
        last_log = 0.0
        rate_start: tuple[int, float] | None = None
        rate = 0.0
        logs: dict[str, float] = {}
        with (
            WATCHER.deferred()
        ):  # SIGTERM while training: save at the end of the current loop, exit 143
            while step < target_step:
                steps = min(t.steps_per_loop, target_step - step)
                if evaluate_every:
                    steps = min(steps, evaluate_every - step % evaluate_every)
                loop_start = time.monotonic()
                logs = self.trainer.run(steps)
                step, now = s.step, time.monotonic()
                if self._recovered(logs.get(s.task.loss_key, float("nan")), step, steps):
                    step = last_ckpt = last_summary = s.step
                    continue
                # rate over loops after the first one (which includes tracing)
                if rate_start is None:
                    rate = steps / max(now - loop_start, 1e-9)
                    rate_start = (step, now)
                elif step > rate_start[0]:
                    rate = (step - rate_start[0]) / max(now - rate_start[1], 1e-9)
                done = step >= target_step
                if done or step == start + steps or now - last_log >= self.settings.log_interval_s:
                    last_log = now
                    eta = fmt_eta((target_step - step) / max(rate, 1e-9))
                    progress_log.info(
                        "step %d/%d (%.0f%%)  %.1f steps/s  ETA %s  %s",
                        step,
                        target_step,
                        100.0 * step / target_step,
                        rate,
                        eta,
                        format_logs(logs),
                    )
                if step // t.summary_interval > last_summary // t.summary_interval or done:
                    last_summary = step
                    lr = s.learning_rate()
                    self._summaries(
                        "train", {**logs, **({"learning_rate": lr} if lr is not None else {})}, step
                    )
                preempted = self._agree_preempted()
                if (
                    step // t.checkpoint_interval > last_ckpt // t.checkpoint_interval
                    or done
                    or preempted
                ):
                    last_ckpt = step
                    self.save()
                if preempted:
                    raise WATCHER.error(f"SIGTERM received; checkpoint saved at step {step}")
                if evaluate_every and (step % evaluate_every == 0 or done):
                    self.evaluate()
        return logs

    def _recovered(self, loss: float, step: int, steps: int) -> bool:
        """Recover from a NaN/inf loss or one above trainer.loss_upper_bound (Model Garden's rule),
        or stop.

        Returns True when the last checkpoint was restored (the caller trains again from there);
        raises when the run diverged more than trainer.recovery_max_trials times.
        """
        import tensorflow as tf

        t = self.schedule
        if math.isfinite(loss) and (loss <= t.loss_upper_bound or step < t.recovery_begin_steps):
            return False
        latest = tf.train.latest_checkpoint(
            self.settings.checkpoint_dir
        )  # the chief's, read by every worker
        bound = (
            f" (above trainer.loss_upper_bound={t.loss_upper_bound:g})"
            if math.isfinite(loss)
            else ""
        )
        if self.recoveries < t.recovery_max_trials and latest:
            self.recoveries += 1
            self.state.checkpoint.restore(latest).assert_existing_objects_matched()
            log.warning(
                "training loss is %s at step %d%s: restored %s (step %d) and training again "
                "(recovery %d of trainer.recovery_max_trials=%d)",
                loss,
                step,
                bound,
                latest,
                self.state.step,
                self.recoveries,
                t.recovery_max_trials,
            )
            return True
        tried = (
            f" after {self.recoveries} recoveries "
            f"(trainer.recovery_max_trials={t.recovery_max_trials})"
            if t.recovery_max_trials
            else ""
        )
        raise UserCodeError(
            f"training loss is {loss} at step {step} (mean of steps {step - steps + 1}-{step}): "
            "the run "
            f"diverged{bound}{tried}. Lower the learning rate "
            "(trainer.optimizer_config.learning_rate), clip "
            "gradients (trainer.optimizer_config.optimizer.<type>.global_clipnorm), allow "
            "recoveries "
            "(trainer.recovery_max_trials), or check the inputs for NaN/inf. "
            f"Nothing was saved for these steps; the last checkpoint is {latest or 'none'}."
        )

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
        self._summaries("validation", logs, step)
        for action in self.eval_actions:
            action(logs, step)
        return logs

    def evaluate_continuously(self) -> None:
        """Evaluate each new checkpoint in the checkpoint dir until the last one (train_steps) or a
        timeout."""
        import tensorflow as tf

        checkpoint_dir, timeout, target = (
            self.settings.checkpoint_dir,
            self.schedule.continuous_eval_timeout,
            self.schedule.train_steps,
        )
        log.info(
            "continuous evaluation: watching %s (timeout %d s%s)",
            checkpoint_dir,
            timeout,
            f", until step {target}" if target > 0 else "",
        )
        for path in tf.train.checkpoints_iterator(
            checkpoint_dir, min_interval_secs=self.settings.eval_poll_s, timeout=timeout
        ):
            try:
                self.state.checkpoint.restore(path).expect_partial()
            except (
                tf.errors.NotFoundError,
                ValueError,
            ) as e:  # rotated away by max_to_keep meanwhile
                log.warning(
                    "could not read %s (%s); waiting for the next checkpoint",
                    path,
                    type(e).__name__,
                )
                continue
            step = self.state.step
            log.info("evaluating %s (step %d)", path, step)
            self.evaluate()
            if target > 0 and step >= target:
                log.info("reached trainer.train_steps=%d: continuous evaluation done", target)
                return
        if not self.eval_history:
            raise UserInputError(
                "--checkpoint-dir",
                f"no checkpoint appeared in {checkpoint_dir} within "
                f"trainer.continuous_eval_timeout={timeout} s",
            )
        log.info("no new checkpoint for %d s: continuous evaluation done", timeout)

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
            self.evaluate_continuously()
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
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()
