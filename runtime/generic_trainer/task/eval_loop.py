"""The inner evaluation loop (Orbit's StandardEvaluator): one pass over the validation data.

`EvalLoop.run(num_steps)` resets the eval metrics, runs `Task.validation_step` on every replica
for `num_steps` batches (-1: until the data ends, on every worker) with the model holding the EMA
weights when there is an EMA, and returns the metrics: global across workers, the loss weighted by
examples so a partial last batch counts for what it holds. When the Task overrides
`aggregate_logs`, each step's outputs are gathered from every replica to the host and folded with
`aggregate_logs`; `reduce_aggregated_logs` adds its metrics at the end. When to evaluate, and what
happens with the result (summaries, best-checkpoint export), is the controller's.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from generic_trainer.errors import TrainerError, UserCodeError, UserInputError
from generic_trainer.task.state import TaskState, format_logs, host_logs
from generic_trainer.task.task_registry import overrides_aggregation

progress_log = logging.getLogger("generic_trainer.progress")


def _batch_size(inputs: Any) -> Any:
    """The number of examples in a batch: the first tensor of the labels (or of the inputs)."""
    import tensorflow as tf

    target = inputs[1] if isinstance(inputs, (tuple, list)) and len(inputs) >= 2 else inputs
    first = tf.nest.flatten(target, expand_composites=False)[0]
    if isinstance(first, tf.SparseTensor):
        return first.dense_shape[0]
    if isinstance(first, tf.RaggedTensor):
        return first.nrows()
    return tf.shape(first, out_type=tf.int64)[0]


class EvalLoop:
    """Evaluates `state.model` on the Task's validation data."""

    def __init__(self, state: TaskState):
        self.state = state
        self.aggregate = overrides_aggregation(state.task)
        self._dataset = None
        self._loop_fn = None
        self._gather_fn = None
        self._results_fn = state.function(self._results)

    def _results(self) -> dict[str, Any]:
        s = self.state
        return {
            s.eval_loss.name: s.eval_loss.result(),
            **{m.name: m.result() for m in s.eval_metrics},
        }

    def _replica_step(self, inputs: Any) -> dict[str, Any]:
        import tensorflow as tf

        s, task = self.state, self.state.task
        logs = task.validation_step(inputs, s.model, metrics=s.eval_metrics)
        if not isinstance(logs, dict) or task.loss_key not in logs:
            raise UserCodeError(
                f"{type(task).__name__}.validation_step must return a dict with "
                f"{task.loss_key!r}, got {type(logs).__name__}"
            )
        n = tf.cast(_batch_size(inputs), tf.float32)
        loss = tf.cast(logs[task.loss_key], tf.float32)
        # An empty batch (a worker out of data while others still have some) adds nothing.
        s.eval_loss.update_state(tf.where(n > 0, loss, 0.0), sample_weight=n)
        return logs

    def _make_loop(self) -> Any:
        import tensorflow as tf

        def loop(iterator, num_steps):
            n = tf.constant(0, tf.int64)
            while tf.logical_or(num_steps < 0, n < num_steps):
                optional = iterator.get_next_as_optional()
                if not optional.has_value():
                    break
                self.state.strategy.run(self._replica_step, args=(optional.get_value(),))
                n += 1
            return n

        return self.state.function(loop)

    def _make_gather(self) -> Any:
        import tensorflow as tf

        strategy = self.state.strategy

        def replica(inputs):
            logs = self._replica_step(inputs)
            return {k: tf.reshape(v, [1]) if v.shape.rank == 0 else v for k, v in logs.items()}

        def step(inputs):
            outputs = strategy.run(replica, args=(inputs,))
            return {k: strategy.gather(v, axis=0) for k, v in outputs.items()}

        return self.state.function(step)

    def run(self, num_steps: int) -> dict[str, float]:
        """One pass over the validation data (or `num_steps` batches); returns global metrics."""
        s = self.state
        if self._dataset is None:
            data = s.task.params.validation_data
            self._dataset = s.distributed_inputs(
                data, whole_pass=num_steps < 0 and not data.is_training
            )
            self._loop_fn = self._make_loop()
            if self.aggregate:
                self._gather_fn = self._make_gather()
        for m in s.eval_metrics + [s.eval_loss]:
            m.reset_state()
        start = time.monotonic()
        iterator = iter(self._dataset)
        with s.averaged_weights():
            n, aggregated = self._batches(iterator, num_steps)
        logs = host_logs(self._results_fn())
        if self.aggregate:
            extra = s.call(
                "reduce_aggregated_logs",
                s.task.reduce_aggregated_logs,
                aggregated,
                global_step=s.step,
            )
            logs.update({k: float(v) for k, v in (extra or {}).items()})
        examples = int(s.eval_loss.count.numpy()) if hasattr(s.eval_loss, "count") else -1
        progress_log.info(
            "validation at step %d: %d batches, %d examples, %.1f s: %s",
            s.step,
            n,
            examples,
            time.monotonic() - start,
            format_logs(logs),
        )
        if n == 0:
            raise UserInputError("task.validation_data.input_path", "the validation data is empty")
        return logs

    def _batches(self, iterator: Any, num_steps: int) -> tuple[int, Any]:
        import tensorflow as tf

        s, aggregated = self.state, None
        try:
            if not self.aggregate:
                return int(self._loop_fn(iterator, tf.constant(num_steps, tf.int64))), None
            n = 0
            while num_steps < 0 or n < num_steps:
                optional = iterator.get_next_as_optional()
                if not bool(optional.has_value()):
                    break
                outputs = self._gather_fn(optional.get_value())
                aggregated = s.call(
                    "aggregate_logs",
                    s.task.aggregate_logs,
                    aggregated,
                    {k: v.numpy() for k, v in outputs.items()},
                )
                n += 1
            return n, aggregated
        except TrainerError:
            raise
        except tf.errors.DataLossError as e:
            from generic_trainer.records.example_files import damaged_file

            where = damaged_file(s.task.params.validation_data.file_patterns())
            detail = f" in {where}" if where else ""
            raise UserInputError(
                "task.validation_data.input_path",
                f"damaged TFRecord data{detail} (TensorFlow said: {e.message})",
            ) from e
