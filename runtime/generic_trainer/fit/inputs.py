"""The inputs of a training run: examples, splits and schema checked before TensorFlow loads, and
the FnArgs a train or tune run hands the user's `run_fn` / `tuner_fn`, built from them in one place.

Shared by the verbs that train (train, tune, the Task runner); reads the request, never writes.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import TYPE_CHECKING, Any

from generic_trainer.fit.fn_args import FnArgs
from generic_trainer.records import example_files, schemas

if TYPE_CHECKING:
    import tensorflow as tf

    from generic_trainer.fit.checkpointing import BackupAndRestore
    from generic_trainer.fit.requests import FitRequest

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class ExampleInputs:
    """A train or tune run's examples, checked: one file pattern per split, and the schema file (or
    None)."""

    train_files: tuple[str, ...]
    eval_files: tuple[str, ...]
    schema_file: str | None
    transformed_schema_file: str | None = (
        None  # the transform graph's transformed_metadata: records may follow it
    )

    @property
    def all_files(self) -> list[str]:
        """The train splits' file patterns, then the eval splits'."""
        return [*self.train_files, *self.eval_files]


def resolve_schema_file(path: str | None) -> str | None:
    """A schema artifact is a dir holding one .pbtxt (TFX SchemaGen) or the file itself."""
    return (
        example_files.one_file(path, "--schema", "*.pbtxt", "SchemaGen's schema.pbtxt")
        if path
        else path
    )


def transformed_schema_file(transform_graph: str | None) -> str | None:
    """The transform graph's transformed_metadata/schema.pbtxt (the schema of Transform's
    transformed examples),
    or None without a graph or without that file."""
    path = (
        os.path.join(transform_graph, "transformed_metadata", "schema.pbtxt")
        if transform_graph
        else None
    )
    return path if path and os.path.isfile(path) else None


def check_examples_and_schema(request: FitRequest) -> ExampleInputs:
    """Split file patterns and the schema file of a train or tune request, checked without
    TensorFlow.

    The records themselves are decoded against the schema once TensorFlow is loaded anyway
    (`record_checks.check_first_records`, called as the strategy is made), before any user code
    runs.
    """
    train_files, eval_files = request.train_files, request.eval_files  # resolved at intake
    n_files = example_files.check_readable(train_files + eval_files)
    example_files.check_splits_hold_records(train_files + eval_files)
    schema_file = resolve_schema_file(request.schema)
    schema = schemas.load_schema(schema_file) if schema_file else None
    log.info(
        "examples: %s (train splits %s, eval splits %s, %d files)%s",
        request.examples,
        ",".join(request.train_splits),
        ",".join(request.eval_splits),
        n_files,
        f"; schema {schema_file} ({len(schema.feature)} features)" if schema is not None else "",
    )
    return ExampleInputs(
        train_files,
        eval_files,
        schema_file,
        transformed_schema_file(request.transform_graph),
    )


def _data_accessor(request: FitRequest, examples: ExampleInputs, shards: int) -> Any:
    """FnArgs.data_accessor: raw examples read through the transform graph when asked, sharded
    by example over `shards` training workers (0: not sharded)."""
    from generic_trainer import data
    from generic_trainer.fit import sharding

    accessor = data.DataAccessor(
        transform_graph=request.transform_graph,
        raw_schema=examples.schema_file,
        cache=request.cache_examples,
    )
    return sharding.ShardingDataAccessor(accessor, shards) if shards else accessor


def build_fn_args(
    request: FitRequest,
    examples: ExampleInputs,
    *,
    working_dir: str,
    strategy: tf.distribute.Strategy,
    num_gpus: int,
    is_chief: bool,
    task_type: str,
    task_index: int,
    num_workers: int,
    shard_data: bool = False,
    serving_model_dir: str = "",
    eval_model_dir: str = "",
    model_run_dir: str = "",
    backup_and_restore: BackupAndRestore | None = None,
) -> FnArgs:
    """The FnArgs of a train or tune run: what the request says (files, steps, schema, transform
    graph, base model, hyperparameters, custom config, checkpoint dir), and this replica's part
    (where it writes, its place in the cluster); with `shard_data` (several training workers) the
    data accessor shards by example when a split has fewer files than workers."""
    from generic_trainer.artifacts import outputs

    return FnArgs(
        working_dir=working_dir,
        train_files=list(examples.train_files),
        eval_files=list(examples.eval_files),
        train_steps=request.train_steps,
        eval_steps=request.eval_steps,
        schema_path=examples.schema_file,
        transform_graph_path=request.transform_graph,
        data_accessor=_data_accessor(request, examples, num_workers if shard_data else 0),
        serving_model_dir=serving_model_dir,
        eval_model_dir=eval_model_dir,
        model_run_dir=model_run_dir,
        base_model=outputs.serving_model_path(request.base_model) if request.base_model else None,
        hyperparameters=dict(request.hyperparameters)
        if request.hyperparameters is not None
        else None,
        custom_config=dict(request.custom_config),
        strategy=strategy,
        num_gpus=num_gpus,
        is_chief=is_chief,
        task_type=task_type,
        task_index=task_index,
        num_workers=num_workers,
        checkpoint_dir=request.checkpoint_dir,
        backup_and_restore=backup_and_restore,
    )
