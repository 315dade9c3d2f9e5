"""FnArgs: what a user's `run_fn` / `tuner_fn` receives.

Field for field the object TFX's Trainer and Tuner pass (aliases included), so a TFX module
runs unchanged (its `tfx` imports resolve to the runtime's, see `tfx_imports`), plus what TFX
lacks: the distribution strategy, the replica's role and a checkpoint directory that survives
restarts. `inputs.build_fn_args` builds it from a train or tune request.
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import tensorflow as tf

    from generic_trainer.data import DataAccessor
    from generic_trainer.fit.checkpointing import BackupAndRestore
    from generic_trainer.fit.sharding import ShardingDataAccessor


@dataclasses.dataclass
class FnArgs:
    """Arguments of a user's `run_fn(fn_args)` or `tuner_fn(fn_args)`.

    TFX fields:
      working_dir: scratch directory of this run (never None).
      train_files / eval_files: file patterns of the train and eval splits.
      train_steps / eval_steps: step counts, or None (train until the data ends / eval all).
      schema_path (alias schema_file): path of the tensorflow-metadata Schema text proto, or None.
      transform_graph_path (alias transform_output): tensorflow-transform output dir, or None.
      data_accessor: gives `tf_dataset_factory(file_patterns, options, schema)`.
      serving_model_dir: where run_fn must export the serving SavedModel.
      eval_model_dir: where run_fn may export an eval model (TFMA style), optional.
      model_run_dir: TensorBoard logs and other run outputs.
      base_model: path of a model to warm-start from, or None.
      hyperparameters: dict (keras-tuner `HyperParameters.get_config()` form) or None.
      custom_config: dict of the user's own settings (never None).
      num_examples: examples per split when known, else {}.

    generic-trainer additions:
      strategy: the `tf.distribute.Strategy` run_fn is called under (also its scope).
      num_gpus: GPUs visible to this replica.
      is_chief: whether this replica publishes outputs; other replicas get private dirs
        (serving_model_dir, model_run_dir, working_dir) and must still call fit/export (collective).
      task_type / task_index / num_workers: this replica's place in the cluster.
      checkpoint_dir: stable across restarts of the same job (resume after preemption).
      backup_and_restore: a ready Keras callback (Keras 3 or tf_keras) for `fit(callbacks=[...])`:
        saves weights, optimizer and step to `<checkpoint_dir>/backup` (the chief only) at epoch
        ends, every 10 minutes and on SIGTERM (then exit code 143); a restarted run resumes at the
        saved step. See generic_trainer.fit.checkpointing.BackupAndRestore.
    """

    working_dir: str
    train_files: list[str] = dataclasses.field(default_factory=list)
    eval_files: list[str] = dataclasses.field(default_factory=list)
    train_steps: int | None = None
    eval_steps: int | None = None
    schema_path: str | None = None
    transform_graph_path: str | None = None
    data_accessor: DataAccessor | ShardingDataAccessor | None = None
    serving_model_dir: str = ""
    eval_model_dir: str = ""
    model_run_dir: str = ""
    base_model: str | None = None
    hyperparameters: dict[str, Any] | None = None
    custom_config: dict[str, Any] = dataclasses.field(default_factory=dict)
    num_examples: dict[str, int] = dataclasses.field(default_factory=dict)
    # generic-trainer additions
    strategy: tf.distribute.Strategy | None = None
    num_gpus: int = 0
    is_chief: bool = True
    task_type: str = "chief"
    task_index: int = 0
    num_workers: int = 1
    checkpoint_dir: str = ""
    backup_and_restore: BackupAndRestore | None = None

    # TFX aliases: modules use either name.
    @property
    def schema_file(self) -> str | None:
        return self.schema_path

    @property
    def transform_output(self) -> str | None:
        return self.transform_graph_path

    def export_dir(self, name: str = "serving") -> str:
        """Where this replica should write an export named `name`.

        The chief gets the real location (`serving_model_dir` for "serving", `eval_model_dir`
        for "eval", else `<model_run_dir>/<name>`); every other worker gets a private directory
        under its working dir that the runtime deletes afterwards. Multi-worker Keras needs every
        worker to call `model.save`/`export` (the save is collective), so call this instead of
        branching on `is_chief`.
        """
        if self.is_chief:
            return {"serving": self.serving_model_dir, "eval": self.eval_model_dir}.get(
                name, os.path.join(self.model_run_dir, name)
            )
        return os.path.join(self.working_dir, f"worker-{self.task_type}-{self.task_index}", name)


class TunerFnResult(NamedTuple):
    """What `tuner_fn` returns (TFX's shape): a keras-tuner Tuner and the kwargs for its
    search()."""

    tuner: Any
    fit_kwargs: dict[str, Any]
