"""Input sharding on several workers: `fn_args.data_accessor` when the cluster has more than one
worker.

Under MultiWorkerMirroredStrategy, tf.data's AUTO sharding gives each worker its own files, and
fails at the first batch ("Could not apply FILE based sharding") when a split has fewer files than
there are workers, as small TFX example splits often do. For such a split the datasets this
accessor returns shard by example instead (policy DATA: every worker reads all files and keeps
its share of the batches); splits with enough files keep FILE sharding.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import tensorflow as tf
    from tensorflow_metadata.proto.v0 import schema_pb2

    from generic_trainer.data import DataAccessor

log = logging.getLogger(__name__)


class ShardingDataAccessor:
    """Wraps a DataAccessor; everything but `tf_dataset_factory` is the wrapped one's."""

    def __init__(self, accessor: DataAccessor, num_workers: int):
        self._accessor = accessor
        self.num_workers = num_workers
        self._logged: set[tuple[str, ...]] = set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._accessor, name)

    def tf_dataset_factory(
        self, file_patterns: str | Sequence[str], options: object, schema: schema_pb2.Schema | str
    ) -> tf.data.Dataset:
        import tensorflow as tf

        dataset = self._accessor.tf_dataset_factory(file_patterns, options, schema)
        patterns = (file_patterns,) if isinstance(file_patterns, str) else tuple(file_patterns)
        n_files = sum(len(tf.io.gfile.glob(p)) for p in patterns)
        if n_files >= self.num_workers:
            return dataset
        if patterns not in self._logged:
            self._logged.add(patterns)
            log.info(
                "%d file(s) for %d workers in %s: sharding by example (each worker reads every "
                "file)",
                n_files,
                self.num_workers,
                ", ".join(patterns),
            )
        data_options = tf.data.Options()
        data_options.experimental_distribute.auto_shard_policy = (
            tf.data.experimental.AutoShardPolicy.DATA
        )
        return dataset.with_options(data_options)
