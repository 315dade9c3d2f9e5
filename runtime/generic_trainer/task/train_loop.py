"""The inner training loop (Orbit's StandardTrainer): N training steps in one tf.function call.

Each step runs `Task.train_step` on every replica with `strategy.run` (never `model.fit`, so
Keras 3 works under MultiWorkerMirroredStrategy), adds one to the global step and moves the EMA.
`TrainLoop.run(num_steps)` resets the train metrics, runs the steps and returns their logs: the
mean loss and the metrics over those steps, global across workers. TensorFlow's errors become the
runtime's: corrupt data -> UserInputError, data that ran out or a failing step -> UserCodeError,
a lost peer -> ClusterError. When to checkpoint, evaluate or stop is the controller's.
"""

from __future__ import annotations

from typing import Any

from generic_trainer.errors import TrainerError, UserCodeError, UserInputError
from generic_trainer.fit import user_code
from generic_trainer.task.state import TaskState, host_logs


class TrainLoop:
    """Runs training steps of `state.task` on `state.train_data`'s distributed inputs."""

    def __init__(self, state: TaskState):
        self.state = state
        self._iterator = None
        self._loop_fn = None
        self._results_fn = state.function(self._results)

    def _results(self) -> dict[str, Any]:
        s = self.state
        return {
            s.train_loss.name: s.train_loss.result(),
            **{m.name: m.result() for m in s.train_metrics},
        }

    def _replica_step(self, inputs: Any) -> None:
        s, task = self.state, self.state.task
        logs = task.train_step(inputs, s.model, s.optimizer, metrics=s.train_metrics)
        if not isinstance(logs, dict) or task.loss_key not in logs:
            raise UserCodeError(
                f"{type(task).__name__}.train_step must return a dict with "
                f"{task.loss_key!r}, got {type(logs).__name__}"
            )
        s.train_loss.update_state(logs[task.loss_key])

    def _step(self, iterator: Any) -> None:
        s = self.state
        s.strategy.run(self._replica_step, args=(next(iterator),))
        s.global_step.assign_add(1)
        if s.ema is not None:
            s.ema.update(s.global_step)

    def _make_loop(self) -> Any:
        import tensorflow as tf

        if self.state.experiment.runtime.run_eagerly:

            def eager_loop(iterator, num_steps):
                for _ in range(int(num_steps)):
                    self._step(iterator)

            return eager_loop

        def loop(iterator, num_steps):
            for _ in tf.range(num_steps):
                self._step(iterator)

        return tf.function(loop)

    def run(self, num_steps: int) -> dict[str, float]:
        """Run `num_steps` steps; returns the mean loss and metrics over them (global across
        workers)."""
        import tensorflow as tf

        s = self.state
        if self._iterator is None:
            self._iterator = iter(s.distributed_inputs(s.task.params.train_data))
            self._loop_fn = self._make_loop()
        for m in s.train_metrics + [s.train_loss]:
            m.reset_state()
        step = s.step

        def ran_out(e: Exception) -> TrainerError | None:
            if isinstance(e, tf.errors.DataLossError):
                from generic_trainer.records.example_files import damaged_file

                where = damaged_file(s.task.params.train_data.file_patterns())
                detail = f" in {where}" if where else ""
                return UserInputError(
                    "task.train_data.input_path",
                    f"damaged TFRecord data{detail} (TensorFlow said: {e.message})",
                )
            if not isinstance(e, tf.errors.OutOfRangeError):
                return None
            return UserCodeError(
                f"the training data ran out at step {step}: {type(s.task).__name__}.build_inputs "
                "should repeat training data (dataset.repeat()) when params.is_training"
            )

        def lost_peer(e: Exception) -> str:
            return (
                f"lost the cluster at step {step} ({type(e).__name__}): a peer worker stopped or "
                f"cannot be reached; restart the job to resume from the last checkpoint. {e}"
            )

        user_code.call(
            self._loop_fn,
            self._iterator,
            tf.constant(num_steps, tf.int64),
            what=f"{type(s.task).__name__}.train_step",
            failed=f"training step failed at step {step}",
            data_input="task.train_data.input_path",
            lost_peer=lost_peer,
            translate=ran_out,
        )
        return host_logs(self._results_fn())
