"""The `Task` base class: *what* to train, in one class; the runtime owns *how*.

A Task builds the model, its inputs, losses, metrics and optimizer, and says what one training
and one validation step do; the runtime (`generic_trainer.task.experiment.run_experiment`)
handles the strategy, the loop, checkpoints, summaries and export. The shape follows TF Model
Garden's `base_task.Task`. Shared state lives on the instance (`self.params`, `self.experiment`, and
anything a subclass sets in `__init__`), never in globals.

Required: `build_model`, `build_inputs`, and `build_losses` (unless both `train_step` and
`validation_step` are overridden). `task_registry.check_task_class` reports what is missing before
anything runs. Importing this module does not import TensorFlow.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from generic_trainer.errors import UserInputError
from generic_trainer.task.config import DataConfig, ExperimentConfig, RuntimeConfig, TaskConfig
from generic_trainer.task.optimization_config import OptimizationConfig, OptimizerConfig

log = logging.getLogger(__name__)


class Task:
    """Base class of a trainable task. Subclass it and override the `build_*` methods.

    `config_cls` is the TaskConfig subclass holding the task's own fields; the runtime
    builds `ExperimentConfig(task=config_cls())` as the defaults unless an experiment is named.
    """

    config_cls: type[TaskConfig] = TaskConfig
    loss_key = "loss"

    def __init__(
        self,
        params: TaskConfig,
        logging_dir: str | None = None,
        experiment: ExperimentConfig | None = None,
        name: str | None = None,
    ):
        self.params = params
        self.logging_dir = logging_dir
        self.experiment = experiment if experiment is not None else ExperimentConfig(task=params)
        self.name = name or params.name or type(self).__name__

    # ---- defaults ---------------------------------------------------------------------------

    @classmethod
    def default_experiment(cls) -> ExperimentConfig:
        """The experiment used when none is named: this task's config defaults."""
        return ExperimentConfig(task=cls.config_cls())

    # ---- required ---------------------------------------------------------------------------

    def build_model(self) -> Any:
        """Return a built Keras model (its variables exist: a functional model, or call it once)."""
        raise NotImplementedError

    def build_inputs(self, params: DataConfig, input_context: Any = None) -> Any:
        """Return a tf.data.Dataset of `(features, labels)` batches for one input pipeline.

        Batch with `input_context.get_per_replica_batch_size(params.global_batch_size)` and shard
        with `input_context.num_input_pipelines` / `input_pipeline_id` (see `examples_dataset`).
        Training data (`params.is_training`) should repeat forever; validation data should end.
        """
        raise NotImplementedError

    def build_losses(self, labels: Any, model_outputs: Any, aux_losses: Any = None) -> Any:
        """Return the scalar loss of one replica's batch (mean over examples, plus `aux_losses`)."""
        raise NotImplementedError

    # ---- optional ---------------------------------------------------------------------------

    def build_metrics(self, training: bool = True) -> list:
        """Keras metrics updated by `process_metrics`; made inside the strategy scope, so global."""
        return []

    def build_optimizer(
        self,
        optimizer_config: OptimizationConfig | OptimizerConfig | None = None,
        runtime_config: RuntimeConfig | None = None,
    ) -> Any:
        """A Keras optimizer from `trainer.optimizer_config` (Model Garden's one-of form;
        loss-scaled under float16).

        The EMA of `optimizer_config.ema` is kept by the runtime's loop, not by this optimizer.
        """
        from generic_trainer.task import optimizers

        optimizer_config = optimizer_config or self.experiment.trainer.optimizer_config
        runtime_config = runtime_config or self.experiment.runtime
        return optimizers.build(
            optimizer_config, self.experiment.trainer.train_steps, runtime_config
        )

    def initialize(self, model: Any) -> None:
        """Warm-start `model` from `params.init_checkpoint`; called only when the run has no
        checkpoint yet.

        The default reads a TF checkpoint holding the model (as written by this runtime, under
        `model`, or by `tf.train.Checkpoint(model=...)`), or a `.weights.h5` / `.keras` file.
        """
        path = self.params.init_checkpoint
        if not path:
            return
        from generic_trainer.task import checkpoints

        checkpoints.restore_model(model, path)

    def process_metrics(
        self, metrics: list | None, labels: Any, model_outputs: Any, **kwargs: Any
    ) -> None:
        """Update each metric with the batch (override to pass other tensors, e.g. one-hot
        labels)."""
        for metric in metrics or []:
            metric.update_state(labels, model_outputs)

    def train_step(
        self, inputs: Any, model: Any, optimizer: Any, metrics: list | None = None
    ) -> dict[str, Any]:
        """One replica's training step; returns logs with `loss` (the unscaled mean loss)."""
        import tensorflow as tf

        features, labels = inputs
        num_replicas = tf.distribute.get_strategy().num_replicas_in_sync
        with tf.GradientTape() as tape:
            outputs = model(features, training=True)
            outputs = _float32(outputs)
            loss = self.build_losses(labels, outputs, aux_losses=model.losses)
            scaled = loss / num_replicas  # gradients are summed over replicas
            if hasattr(optimizer, "scale_loss"):
                scaled = optimizer.scale_loss(scaled)
        grads = tape.gradient(scaled, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        self.process_metrics(metrics, labels, outputs)
        return {self.loss_key: loss}

    def validation_step(
        self, inputs: Any, model: Any, metrics: list | None = None
    ) -> dict[str, Any]:
        """One replica's validation step; returns logs with `loss`.

        Other entries are passed (gathered over all replicas of all workers) to `aggregate_logs`
        when the task overrides it.
        """
        features, labels = inputs
        outputs = model(features, training=False)
        outputs = _float32(outputs)
        loss = self.build_losses(labels, outputs, aux_losses=model.losses)
        self.process_metrics(metrics, labels, outputs)
        return {self.loss_key: loss}

    def inference_step(self, inputs: Any, model: Any) -> Any:
        """The serving forward pass: what the default export's `serving_default` returns for
        `inputs`.

        `inputs` has the structure of the model's inputs (e.g. a dict of tensors for a functional
        model with named inputs). Override to post-process (probabilities, class ids, several
        named outputs). Not used when `build_serving_signatures` returns endpoints.
        """
        return model(inputs, training=False)

    def aggregate_logs(
        self, state: Any = None, step_outputs: Mapping[str, Any] | None = None
    ) -> Any:
        """Fold one validation step's outputs (numpy, from every replica of every worker) into
        `state`."""
        return state

    def reduce_aggregated_logs(
        self, aggregated_logs: Any, global_step: int | None = None
    ) -> dict[str, float]:
        """Turn the state built by `aggregate_logs` into metrics (host side, after the eval
        pass)."""
        return {}

    def build_serving_signatures(self, model: Any) -> Mapping[str, Callable] | None:
        """Serving endpoints `{name: tf.function with an input_signature}`; must include
        serving_default.

        None (the default) exports `model.export(dir)`: `serving_default` takes the model's inputs.
        """
        return None

    def serving_trackables(self, model: Any) -> list:
        """Extra objects the serving signatures use (e.g. a TFT transform layer), tracked in the
        export."""
        return []

    # ---- helpers for subclasses ------------------------------------------------------------

    def examples_dataset(
        self, params: DataConfig, input_context: Any = None, label_key: str | None = None
    ) -> Any:
        """Batches of the tf.Example files `params.input_path`, parsed with
        `self.params.schema_path`.

        Per-replica batch size from the input context; batches are sharded over input pipelines
        (so every validation example is read once across workers). Training data is shuffled and
        repeated forever; validation data is read once, in order.
        """
        from generic_trainer import data
        from generic_trainer.records import example_dataset

        if not self.params.schema_path:
            raise UserInputError(
                "task.schema_path", "examples_dataset needs a schema: pass --schema or set it"
            )
        batch_size = params.global_batch_size
        if input_context is not None:
            batch_size = input_context.get_per_replica_batch_size(params.global_batch_size)
        options = example_dataset.DatasetOptions(
            batch_size=batch_size,
            label_key=label_key,
            num_epochs=None if params.is_training else 1,
            shuffle=params.is_training,
            shuffle_buffer_size=params.shuffle_buffer_size,
            shuffle_seed=params.seed,
            drop_final_batch=params.drop_remainder,
        )
        dataset = data.DataAccessor().tf_dataset_factory(
            params.file_patterns(), options, self.params.schema_path
        )
        if input_context is not None and input_context.num_input_pipelines > 1:
            dataset = dataset.shard(
                input_context.num_input_pipelines, input_context.input_pipeline_id
            )
        if params.cache:
            dataset = dataset.cache()
        return dataset


def _float32(outputs: Any) -> Any:
    """Floating outputs as float32 (mixed-precision models compute in float16/bfloat16)."""
    import tensorflow as tf

    return tf.nest.map_structure(
        lambda x: tf.cast(x, tf.float32) if x.dtype.is_floating else x, outputs
    )
