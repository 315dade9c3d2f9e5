"""The runtime's own training loop (Orbit-like): train, eval, train_and_eval, continuous_eval.

`Controller` owns the *how* of a Task: it builds the model, optimizer and metrics inside the
strategy scope, runs `steps_per_loop` steps per `tf.function` call with `strategy.run` (never
`model.fit`, so Keras 3 works under MultiWorkerMirroredStrategy), saves and restores checkpoints,
writes summaries, evaluates, keeps the best checkpoint and exports the serving model. It also
keeps the EMA of the weights (`ema.py`; validation and export use it) and recovers from a loss
blow-up by restoring the last checkpoint (`trainer.recovery_max_trials`).

Multi-worker rules: every worker runs the same sequence of collective steps (loops, metric
reads, checkpoint and export writes); only the chief writes summaries, params.yaml, info.json and
the real checkpoints/exports; other workers write into a private directory. Metrics are global:
Keras metric variables made in the strategy scope are sync-on-read, so reading a result sums the
metric state over all replicas of all workers.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import shutil
import tempfile
import time
from typing import Any

from generic_trainer import user_module
from generic_trainer.errors import ClusterError, TrainerError, UserCodeError, UserInputError
from generic_trainer.preemption import WATCHER
from generic_trainer.progress import fmt_eta
from generic_trainer.task import checkpoints, ema
from generic_trainer.task.base import Task, overrides_aggregation
from generic_trainer.task.config import ExperimentConfig, as_dict, write_params_yaml

log = logging.getLogger("generic_trainer.task")
progress_log = logging.getLogger("generic_trainer.progress")

TRAIN_MODES = ("train", "train_and_eval")


@dataclasses.dataclass
class ExperimentResult:
    """What a run did: steps, the last train and eval logs, every evaluation."""

    mode: str
    global_step: int
    initial_step: int
    restored_from: str | None
    train_logs: dict[str, float] = dataclasses.field(default_factory=dict)
    eval_logs: dict[str, float] = dataclasses.field(default_factory=dict)
    eval_history: list[tuple[int, dict[str, float]]] = dataclasses.field(default_factory=list)
    best_checkpoint_dir: str | None = None

    def metrics(self) -> dict[str, float]:
        """Eval metrics under their names, train metrics as `train_<name>` (what KFP's Metrics carry)."""
        out = {f"train_{k}": v for k, v in self.train_logs.items()}
        out.update(self.eval_logs)
        return out


def _fmt_logs(logs: dict[str, float]) -> str:
    return " ".join(f"{k}={v:.4g}" for k, v in logs.items())


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict):
        out = {}
        for k, v in data.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    return {prefix.rstrip("."): data}


class Controller:
    """Runs one Task under one strategy. Create it inside nothing; it enters the strategy scope itself."""

    def __init__(
        self,
        task: Task,
        experiment: ExperimentConfig,
        strategy: Any,
        checkpoint_dir: str,
        summary_dir: str | None = None,
        is_chief: bool = True,
        private_dir: str | None = None,
        mode: str = "train_and_eval",
        log_interval_s: float = 10.0,
        eval_poll_s: float = 5.0,
    ):
        import tensorflow as tf

        self.task, self.experiment, self.strategy = task, experiment, strategy
        self.trainer = experiment.trainer
        self.checkpoint_dir = checkpoint_dir
        self.summary_dir = summary_dir
        self.is_chief = is_chief
        # where a non-chief worker writes what it must write (saving can be collective); removed by close()
        self._own_private_dir = private_dir is None and not is_chief
        self.private_dir = private_dir or (tempfile.mkdtemp(prefix="generic-trainer-worker-") if not is_chief else "")
        self.mode = mode
        self.log_interval_s = log_interval_s
        self.eval_poll_s = eval_poll_s
        self.training = mode in TRAIN_MODES
        self.aggregate = overrides_aggregation(task)
        run_eagerly = experiment.runtime.run_eagerly
        self._function = (lambda f: f) if run_eagerly else tf.function

        if self.training and is_chief:
            os.makedirs(checkpoint_dir, exist_ok=True)
            self._write_params()
        with strategy.scope():
            self.model = self._build_model()
            self.optimizer = None
            if self.training:
                self.optimizer = self._user("build_optimizer", task.build_optimizer)
                self.optimizer.build(self.model.trainable_variables)  # before the first step (multi-replica)
            self.global_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step",
                                           aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
            import keras

            self.train_loss = keras.metrics.Mean(name=task.loss_key)
            self.eval_loss = keras.metrics.Mean(name=task.loss_key)
            self.train_metrics = list(self._user("build_metrics", task.build_metrics, training=True) or [])
            self.eval_metrics = list(self._user("build_metrics", task.build_metrics, training=False) or [])
            ema_config = getattr(self.trainer.optimizer_config, "ema", None)
            self.ema = ema.WeightAverage(self.model, ema_config) if ema_config is not None else None
        objects = {"model": self.model, "global_step": self.global_step}
        if self.optimizer is not None:
            objects["optimizer"] = self.optimizer
        if self.ema is not None:
            objects["ema"] = self.ema.trackable
        self.recoveries = 0  # loss blow-ups recovered from (trainer.recovery_max_trials)
        self.checkpoint = tf.train.Checkpoint(**objects)
        manager_dir = checkpoint_dir if is_chief else os.path.join(self.private_dir, "checkpoints")
        self.manager = tf.train.CheckpointManager(self.checkpoint, manager_dir, max_to_keep=self.trainer.max_to_keep,
                                                  step_counter=self.global_step)
        self.best_exporter = None
        if self.trainer.best_checkpoint_export_subdir and mode != "train":
            real = os.path.join(checkpoint_dir, self.trainer.best_checkpoint_export_subdir)
            self.best_exporter = checkpoints.BestCheckpointExporter(
                real if is_chief else os.path.join(self.private_dir, "best"), self.trainer.best_checkpoint_eval_metric,
                self.trainer.best_checkpoint_metric_comp, is_chief=is_chief)
        self._writers: dict[str, Any] = {}
        self._train_dataset = None
        self._eval_dataset = None
        self._train_loop_fn = None
        self._eval_loop_fn = None
        self._eval_gather_fn = None
        self._agree_fn = None
        self._train_results_fn = self._function(lambda: self._results(self.train_metrics, self.train_loss))
        self._eval_results_fn = self._function(lambda: self._results(self.eval_metrics, self.eval_loss))

    # ---- building ---------------------------------------------------------------------------

    def _user(self, name: str, fn, *args, **kwargs):
        """Call a Task method, turning its exceptions into a UserCodeError naming the method."""
        try:
            return fn(*args, **kwargs)
        except TrainerError:
            raise
        except Exception as e:
            tb = user_module.format_traceback(e)
            raise UserCodeError(f"{type(self.task).__name__}.{name} raised {type(e).__name__}: {e}\n{tb}") from e

    def _build_model(self):
        import keras

        runtime = self.experiment.runtime
        if runtime.seed is not None:
            keras.utils.set_random_seed(runtime.seed)
        policy = keras.mixed_precision.global_policy()
        dtype = runtime.mixed_precision_dtype
        if dtype in ("float16", "bfloat16", "mixed_float16", "mixed_bfloat16"):
            keras.mixed_precision.set_global_policy(dtype if dtype.startswith("mixed_") else f"mixed_{dtype}")
        try:
            model = self._user("build_model", self.task.build_model)
        finally:
            keras.mixed_precision.set_global_policy(policy)
        if model is None:
            raise UserCodeError(f"{type(self.task).__name__}.build_model returned None; return a Keras model")
        if not getattr(model, "built", True) or (self.training and not model.trainable_variables):
            raise UserCodeError(
                f"{type(self.task).__name__}.build_model returned a model without variables: return a built model "
                "(a functional model, or call model.build(...) / the model once on example inputs)")
        return model

    def _write_params(self) -> None:
        import yaml

        path = os.path.join(self.checkpoint_dir, "params.yaml")
        if os.path.isfile(path):
            try:
                with open(path, encoding="utf-8") as f:
                    old = _flat(yaml.safe_load(f) or {})
                new = _flat(as_dict(self.experiment))
                changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
                if changed:
                    log.warning("params.yaml in %s differs from this run's config in %s; resuming with the new one",
                                self.checkpoint_dir, ", ".join(changed[:20]))
            except Exception:  # an unreadable old file is replaced
                pass
        log.info("resolved config written to %s", write_params_yaml(self.experiment, self.checkpoint_dir))

    def _results(self, metrics, loss_metric) -> dict[str, Any]:
        out = {loss_metric.name: loss_metric.result()}
        for m in metrics:
            out[m.name] = m.result()
        return out

    def _host_logs(self, fn) -> dict[str, float]:
        logs = {}
        for k, v in fn().items():
            try:
                logs[k] = float(v)
            except (TypeError, ValueError):  # non-scalar results (e.g. per-class) are left to summaries
                continue
        return logs

    def _writer(self, name: str):
        if not self.is_chief or not self.summary_dir:
            return None
        if name not in self._writers:
            import tensorflow as tf

            self._writers[name] = tf.summary.create_file_writer(os.path.join(self.summary_dir, name))
        return self._writers[name]

    def _summaries(self, name: str, logs: dict[str, float], step: int) -> None:
        writer = self._writer(name)
        if writer is None:
            return
        import tensorflow as tf

        with writer.as_default(step=step):
            for k, v in logs.items():
                tf.summary.scalar(k, v)
        writer.flush()

    def _distribute(self, data_config):
        import tensorflow as tf

        task = self.task
        whole_pass = not data_config.is_training and self.trainer.validation_steps < 0

        def dataset_fn(input_context):
            dataset = self._user("build_inputs", task.build_inputs, data_config, input_context)
            if dataset is None:
                raise UserCodeError(f"{type(task).__name__}.build_inputs returned None; return a tf.data.Dataset")
            if whole_pass and dataset.cardinality() == tf.data.INFINITE_CARDINALITY:
                raise UserCodeError(
                    f"{type(task).__name__}.build_inputs repeats the validation data forever, and "
                    "trainer.validation_steps is -1 (one whole pass): do not repeat validation data "
                    "(params.is_training is False), or set trainer.validation_steps")
            return dataset

        return self.strategy.distribute_datasets_from_function(dataset_fn)

    # ---- steps ------------------------------------------------------------------------------

    def _replica_train_step(self, inputs):
        logs = self.task.train_step(inputs, self.model, self.optimizer, metrics=self.train_metrics)
        if not isinstance(logs, dict) or self.task.loss_key not in logs:
            raise UserCodeError(f"{type(self.task).__name__}.train_step must return a dict with "
                                f"{self.task.loss_key!r}, got {type(logs).__name__}")
        self.train_loss.update_state(logs[self.task.loss_key])

    def _make_train_loop(self):
        import tensorflow as tf

        def loop(iterator, num_steps):
            for _ in tf.range(num_steps):
                self.strategy.run(self._replica_train_step, args=(next(iterator),))
                self.global_step.assign_add(1)
                if self.ema is not None:
                    self.ema.update(self.global_step)

        if self.experiment.runtime.run_eagerly:
            def eager_loop(iterator, num_steps):
                for _ in range(int(num_steps)):
                    self.strategy.run(self._replica_train_step, args=(next(iterator),))
                    self.global_step.assign_add(1)
                    if self.ema is not None:
                        self.ema.update(self.global_step)
            return eager_loop
        return tf.function(loop)

    @staticmethod
    def _batch_size(inputs):
        import tensorflow as tf

        target = inputs[1] if isinstance(inputs, (tuple, list)) and len(inputs) >= 2 else inputs
        first = tf.nest.flatten(target, expand_composites=False)[0]
        if isinstance(first, tf.SparseTensor):
            return first.dense_shape[0]
        if isinstance(first, tf.RaggedTensor):
            return first.nrows()
        return tf.shape(first, out_type=tf.int64)[0]

    def _replica_eval_step(self, inputs):
        import tensorflow as tf

        logs = self.task.validation_step(inputs, self.model, metrics=self.eval_metrics)
        if not isinstance(logs, dict) or self.task.loss_key not in logs:
            raise UserCodeError(f"{type(self.task).__name__}.validation_step must return a dict with "
                                f"{self.task.loss_key!r}, got {type(logs).__name__}")
        n = tf.cast(self._batch_size(inputs), tf.float32)
        loss = tf.cast(logs[self.task.loss_key], tf.float32)
        # An empty batch (a worker out of data while others still have some) adds nothing.
        self.eval_loss.update_state(tf.where(n > 0, loss, 0.0), sample_weight=n)
        return logs

    def _make_eval_loop(self):
        import tensorflow as tf

        def loop(iterator, num_steps):
            n = tf.constant(0, tf.int64)
            while tf.logical_or(num_steps < 0, n < num_steps):
                optional = iterator.get_next_as_optional()
                if not optional.has_value():
                    break
                self.strategy.run(self._replica_eval_step, args=(optional.get_value(),))
                n += 1
            return n

        return self._function(loop)

    def _make_eval_gather(self):
        import tensorflow as tf

        def replica(inputs):
            logs = self._replica_eval_step(inputs)
            return {k: tf.reshape(v, [1]) if v.shape.rank == 0 else v for k, v in logs.items()}

        def step(inputs):
            outputs = self.strategy.run(replica, args=(inputs,))
            return {k: self.strategy.gather(v, axis=0) for k, v in outputs.items()}

        return self._function(step)

    # ---- phases -----------------------------------------------------------------------------

    def restore(self) -> str | None:
        """Restore the latest checkpoint of the run (all workers read the chief's), else Task.initialize."""
        import tensorflow as tf

        latest = tf.train.latest_checkpoint(self.checkpoint_dir) if os.path.isdir(self.checkpoint_dir) else None
        if latest:
            status = self.checkpoint.restore(latest)
            try:
                if self.training:
                    status.assert_existing_objects_matched()
                else:
                    status.expect_partial()
            except AssertionError as e:
                raise UserInputError("--checkpoint-dir", f"{latest} does not match this model and optimizer "
                                     f"(use a fresh checkpoint dir for a changed model): {str(e)[:400]}") from None
            log.info("restored checkpoint %s (step %d)", latest, int(self.global_step.numpy()))
            self._start_ema()
            return latest
        if self.task.params.init_checkpoint:
            log.info("no checkpoint in %s: initializing from task.init_checkpoint %s", self.checkpoint_dir,
                     self.task.params.init_checkpoint)
        self._user("initialize", self.task.initialize, self.model)
        self._start_ema()
        return None

    def _start_ema(self) -> None:
        if self.ema is not None and self.ema.start():
            log.info("EMA of the weights (average_decay=%g, %s weights) starts from the current weights",
                     self.ema.config.average_decay, "trainable" if self.ema.config.trainable_weights_only else "all")

    def averaged_weights(self):
        """A context in which the model holds the EMA weights (a no-op without trainer.optimizer_config.ema)."""
        import contextlib

        return self.ema.swapped() if self.ema is not None else contextlib.nullcontext()

    def _save(self) -> None:
        step = int(self.global_step.numpy())
        path = self.manager.save(checkpoint_number=step)
        if self.is_chief:
            log.info("checkpoint saved: %s", path)

    def train(self, target_step: int, evaluate_every: int | None = None,
              result: ExperimentResult | None = None) -> dict[str, float]:
        """Train up to `target_step`, saving checkpoints (and evaluating every `evaluate_every` steps)."""
        t = self.trainer
        if self._train_dataset is None:
            self._train_dataset = self._distribute(self.task.params.train_data)
            self._train_iterator = iter(self._train_dataset)
            self._train_loop_fn = self._make_train_loop()
        step = start = int(self.global_step.numpy())
        if step >= target_step:
            log.info("step %d already reaches trainer.train_steps=%d: nothing to train", step, target_step)
            return {}
        progress_log.info("training from step %d to %d (%d steps per loop, %d replicas)", step, target_step,
                          t.steps_per_loop, self.strategy.num_replicas_in_sync)
        if t.recovery_max_trials > 0 and step == 0:  # the same decision on every worker (saving can be collective)
            self._save()  # something to recover to from a loss blow-up before the first checkpoint
        last_ckpt = last_summary = step
        last_log = 0.0
        rate_start: tuple[int, float] | None = None
        rate = 0.0
        logs: dict[str, float] = {}
        with WATCHER.deferred():  # SIGTERM while training: save at the end of the current loop, exit 143
            while step < target_step:
                steps = min(t.steps_per_loop, target_step - step)
                if evaluate_every:
                    steps = min(steps, evaluate_every - step % evaluate_every)
                for m in self.train_metrics + [self.train_loss]:
                    m.reset_state()
                loop_start = time.monotonic()
                self._train_loop(steps, step)
                step = int(self.global_step.numpy())
                now = time.monotonic()
                logs = self._host_logs(self._train_results_fn)
                loss = logs.get(self.task.loss_key, float("nan"))
                if self._check_loss(loss, step, steps):
                    step = last_ckpt = last_summary = int(self.global_step.numpy())
                    continue
                # rate over loops after the first one (which includes tracing)
                if rate_start is None:
                    rate = steps / max(now - loop_start, 1e-9)
                    rate_start = (step, now)
                elif step > rate_start[0]:
                    rate = (step - rate_start[0]) / max(now - rate_start[1], 1e-9)
                done = step >= target_step
                if done or step == start + steps or now - last_log >= self.log_interval_s:
                    last_log = now
                    eta = fmt_eta((target_step - step) / max(rate, 1e-9))
                    progress_log.info("step %d/%d (%.0f%%)  %.1f steps/s  ETA %s  %s", step, target_step,
                                      100.0 * step / target_step, rate, eta, _fmt_logs(logs))
                if step // t.summary_interval > last_summary // t.summary_interval or done:
                    last_summary = step
                    lr = self._learning_rate()
                    self._summaries("train", {**logs, **({"learning_rate": lr} if lr is not None else {})}, step)
                preempted = self._agree_preempted()
                if step // t.checkpoint_interval > last_ckpt // t.checkpoint_interval or done or preempted:
                    last_ckpt = step
                    self._save()
                if preempted:
                    raise WATCHER.error(f"SIGTERM received; checkpoint saved at step {step}")
                if evaluate_every and (step % evaluate_every == 0 or done) and result is not None:
                    result.eval_logs = self.evaluate_and_report(result)
        return logs

    def _train_loop(self, steps: int, step: int) -> None:
        """One tf.function call of `steps` steps; TensorFlow's errors become the runtime's."""
        import tensorflow as tf

        try:
            self._train_loop_fn(self._train_iterator, tf.constant(steps, tf.int64))
        except TrainerError:
            raise
        except tf.errors.DataLossError as e:
            raise UserInputError("task.train_data.input_path", f"corrupt TFRecord data: {e.message}") from e
        except tf.errors.OutOfRangeError:
            raise UserCodeError(
                f"the training data ran out at step {step}: {type(self.task).__name__}.build_inputs should "
                "repeat training data (dataset.repeat()) when params.is_training") from None
        except (tf.errors.UnavailableError, tf.errors.DeadlineExceededError, tf.errors.CancelledError,
                tf.errors.AbortedError) as e:
            raise ClusterError(f"lost the cluster at step {step} ({type(e).__name__}): a peer worker stopped or cannot "
                               f"be reached; restart the job to resume from the last checkpoint. {e}") from e
        except Exception as e:
            tb = user_module.format_traceback(e)
            raise UserCodeError(f"training step failed at step {step}: {type(e).__name__}: {e}\n{tb}") from e

    def _check_loss(self, loss: float, step: int, steps: int) -> bool:
        """Recover from a NaN/inf loss or one above trainer.loss_upper_bound (Model Garden's rule), or stop.

        Returns True when the last checkpoint was restored (the caller trains again from there);
        raises when the run diverged more than trainer.recovery_max_trials times.
        """
        import tensorflow as tf

        t = self.trainer
        bound_value = t.loss_upper_bound
        if math.isfinite(loss) and (loss <= bound_value or step < t.recovery_begin_steps):
            return False
        latest = tf.train.latest_checkpoint(self.checkpoint_dir)  # the chief's, read by every worker alike
        bound = f" (above trainer.loss_upper_bound={bound_value:g})" if math.isfinite(loss) else ""
        if self.recoveries < t.recovery_max_trials and latest:
            self.recoveries += 1
            self.checkpoint.restore(latest).assert_existing_objects_matched()
            log.warning("training loss is %s at step %d%s: restored %s (step %d) and training again "
                        "(recovery %d of trainer.recovery_max_trials=%d)", loss, step, bound, latest,
                        int(self.global_step.numpy()), self.recoveries, t.recovery_max_trials)
            return True
        tried = f" after {self.recoveries} recoveries (trainer.recovery_max_trials={t.recovery_max_trials})" \
            if t.recovery_max_trials else ""
        raise UserCodeError(
            f"training loss is {loss} at step {step} (mean of steps {step - steps + 1}-{step}): the run "
            f"diverged{bound}{tried}. Lower the learning rate (trainer.optimizer_config.learning_rate), clip "
            "gradients (trainer.optimizer_config.optimizer.<type>.global_clipnorm), allow recoveries "
            "(trainer.recovery_max_trials), or check the inputs for NaN/inf. "
            f"Nothing was saved for these steps; the last checkpoint is {latest or 'none'}.")

    def _agree_preempted(self) -> bool:
        """Whether any worker got SIGTERM (all workers agree, so all save at the same step)."""
        if self.strategy.num_replicas_in_sync > 1:
            import tensorflow as tf

            if self._agree_fn is None:
                def agree(flag):
                    local = self.strategy.run(lambda: tf.identity(flag))
                    return self.strategy.reduce(tf.distribute.ReduceOp.SUM, local, axis=None)

                self._agree_fn = tf.function(agree)
            return bool(self._agree_fn(tf.constant(1.0 if WATCHER.requested else 0.0)) > 0)
        return WATCHER.requested

    def _learning_rate(self) -> float | None:
        try:
            return float(self.optimizer.learning_rate)
        except Exception:
            return None

    def evaluate(self) -> dict[str, float]:
        """One pass over the validation data (or trainer.validation_steps batches); global metrics."""
        if self._eval_dataset is None:
            self._eval_dataset = self._distribute(self.task.params.validation_data)
            self._eval_loop_fn = self._make_eval_loop()
            if self.aggregate:
                self._eval_gather_fn = self._make_eval_gather()
        for m in self.eval_metrics + [self.eval_loss]:
            m.reset_state()
        steps = self.trainer.validation_steps
        start = time.monotonic()
        iterator = iter(self._eval_dataset)
        with self.averaged_weights():
            n, state = self._evaluate_batches(iterator, steps)
        logs = self._host_logs(self._eval_results_fn)
        if self.aggregate:
            extra = self._user("reduce_aggregated_logs", self.task.reduce_aggregated_logs, state,
                               global_step=int(self.global_step.numpy()))
            logs.update({k: float(v) for k, v in (extra or {}).items()})
        examples = int(self.eval_loss.count.numpy()) if hasattr(self.eval_loss, "count") else -1
        took = time.monotonic() - start
        progress_log.info("validation at step %d: %d batches, %d examples, %.1f s: %s", int(self.global_step.numpy()),
                          n, examples, took, _fmt_logs(logs))
        if n == 0:
            raise UserInputError("task.validation_data.input_path", "the validation data is empty")
        return logs

    def _evaluate_batches(self, iterator, steps: int) -> tuple[int, Any]:
        import tensorflow as tf

        state = None
        try:
            if self.aggregate:
                n = 0
                while steps < 0 or n < steps:
                    optional = iterator.get_next_as_optional()
                    if not bool(optional.has_value()):
                        break
                    outputs = self._eval_gather_fn(optional.get_value())
                    state = self._user("aggregate_logs", self.task.aggregate_logs, state,
                                       {k: v.numpy() for k, v in outputs.items()})
                    n += 1
            else:
                n = int(self._eval_loop_fn(iterator, tf.constant(steps, tf.int64)))
        except TrainerError:
            raise
        except tf.errors.DataLossError as e:
            raise UserInputError("task.validation_data.input_path", f"corrupt TFRecord data: {e.message}") from e
        return n, state

    def evaluate_and_report(self, result: ExperimentResult) -> dict[str, float]:
        """Evaluate, write validation summaries, offer the checkpoint to the best-checkpoint exporter."""
        step = int(self.global_step.numpy())
        logs = self.evaluate()
        result.eval_history.append((step, dict(logs)))
        self._summaries("validation", logs, step)
        if self.best_exporter is not None:
            self.best_exporter.maybe_export(self.checkpoint, logs, step)
            result.best_checkpoint_dir = self.best_exporter.export_dir if self.is_chief else None
        return logs

    def continuous_evaluate(self, result: ExperimentResult) -> None:
        """Evaluate each new checkpoint in the checkpoint dir until the last one (train_steps) or a timeout."""
        import tensorflow as tf

        timeout = self.trainer.continuous_eval_timeout
        target = self.trainer.train_steps
        log.info("continuous evaluation: watching %s (timeout %d s%s)", self.checkpoint_dir, timeout,
                 f", until step {target}" if target > 0 else "")
        for path in tf.train.checkpoints_iterator(self.checkpoint_dir, min_interval_secs=self.eval_poll_s,
                                                  timeout=timeout):
            try:
                self.checkpoint.restore(path).expect_partial()
            except (tf.errors.NotFoundError, ValueError) as e:  # rotated away by max_to_keep meanwhile
                log.warning("could not read %s (%s); waiting for the next checkpoint", path, type(e).__name__)
                continue
            step = int(self.global_step.numpy())
            log.info("evaluating %s (step %d)", path, step)
            result.eval_logs = self.evaluate_and_report(result)
            result.global_step = step
            if target > 0 and step >= target:
                log.info("reached trainer.train_steps=%d: continuous evaluation done", target)
                return
        if not result.eval_history:
            raise UserInputError("--checkpoint-dir", f"no checkpoint appeared in {self.checkpoint_dir} within "
                                                     f"trainer.continuous_eval_timeout={timeout} s")
        log.info("no new checkpoint for %d s: continuous evaluation done", timeout)

    def run(self) -> ExperimentResult:
        """Run `self.mode` to the end; returns what happened."""
        mode, t = self.mode, self.trainer
        if mode == "continuous_eval":
            result = ExperimentResult(mode=mode, global_step=0, initial_step=0, restored_from=None)
            self.continuous_evaluate(result)
            return result
        restored = self.restore()
        initial = int(self.global_step.numpy())
        result = ExperimentResult(mode=mode, global_step=initial, initial_step=initial, restored_from=restored)
        if mode == "eval":
            if restored is None and not self.task.params.init_checkpoint:
                log.warning("no checkpoint in %s and no task.init_checkpoint: evaluating an untrained model",
                            self.checkpoint_dir)
            result.eval_logs = self.evaluate_and_report(result)
            return result
        every = t.validation_interval if mode == "train_and_eval" else None
        result.train_logs = self.train(t.train_steps, evaluate_every=every, result=result)
        result.global_step = int(self.global_step.numpy())
        if mode == "train_and_eval" and (not result.eval_history or result.eval_history[-1][0] != result.global_step):
            result.eval_logs = self.evaluate_and_report(result)
        return result

    def export_serving(self, export_dir: str) -> None:
        """Export the model for serving: the Task's signatures, else `model.export` (serving_default)."""
        with self.averaged_weights():
            self._export_serving(export_dir)

    def _export_serving(self, export_dir: str) -> None:
        signatures = self._user("build_serving_signatures", self.task.build_serving_signatures, self.model)
        try:
            if signatures:
                if "serving_default" not in signatures:
                    raise UserCodeError(f"{type(self.task).__name__}.build_serving_signatures returned "
                                        f"{sorted(signatures)}; it must include 'serving_default'")
                import keras

                archive = keras.export.ExportArchive()
                archive.track(self.model)
                for trackable in self._user("serving_trackables", self.task.serving_trackables, self.model) or []:
                    archive.track(trackable)
                for name, fn in signatures.items():
                    archive.add_endpoint(name, fn)
                archive.write_out(export_dir, verbose=False)
            else:
                self.model.export(export_dir, verbose=False)
        except TrainerError:
            raise
        except Exception as e:
            tb = user_module.format_traceback(e)
            raise UserCodeError(f"exporting the serving model failed: {type(e).__name__}: {e}\n{tb}") from e

    def barrier(self) -> None:
        """Wait until every worker gets here (a collective sum), so no worker exits while others still work."""
        import tensorflow as tf

        @tf.function
        def barrier():
            one = self.strategy.run(lambda: tf.constant(1.0))
            return self.strategy.reduce(tf.distribute.ReduceOp.SUM, one, axis=None)

        barrier()

    def close(self) -> None:
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()
        if self._own_private_dir:
            shutil.rmtree(self.private_dir, ignore_errors=True)


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
    **controller_kwargs: Any,
) -> tuple[ExperimentResult, Controller]:
    """Run `task` in `mode` without the CLI (Model Garden's `train_lib.run_experiment`).

    `strategy` defaults to the current one; `export_dir`, when given, receives the serving model
    after a train mode. Returns the result and the controller (its `model` is the trained model).
    """
    import tensorflow as tf

    from generic_trainer.task.config import validate

    validate(experiment, mode)
    strategy = strategy or tf.distribute.get_strategy()
    controller = Controller(task, experiment, strategy, checkpoint_dir, summary_dir=summary_dir, is_chief=is_chief,
                            private_dir=private_dir, mode=mode, **controller_kwargs)
    try:
        result = controller.run()
        if export_dir and mode in TRAIN_MODES:
            controller.export_serving(export_dir)
    finally:
        controller.close()
    return result, controller
