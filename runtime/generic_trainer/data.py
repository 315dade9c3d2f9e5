"""`fn_args.data_accessor`: TFX's DataAccessor for tf.Example files, and when a transform graph is
applied.

`DataAccessor().tf_dataset_factory(file_patterns, options, schema)` is the one a user's `run_fn`
calls. It follows tfx_bsl's `TFExampleRecord.TensorFlowDataset` (the reader TFX's own data accessor
uses; the pipeline itself is example_dataset.py). Beyond tfx_bsl: compression is recognised per
file by content, `sloppy_ordering`, `parser_num_threads` and `prefetch_buffer_size` are honoured,
and inputs a user can fix raise `UserInputError`.

As tfx_bsl, the features of the schema a module gives are read from the files. With
`--transform-graph`, a feature the module asks for that the files lack and the transform graph
outputs (TFX modules ask for `transformed_metadata.schema` and a `*_xf` label, as TFX feeds them
Transform's materialised examples) comes from the raw examples parsed with the raw schema and the
transform graph applied in the same tf.data map (`transform_plan` decides); every other feature is
parsed as it is. `record_batch_factory` gives tfx_bsl's Arrow RecordBatches (tfx_bsl imported only
then).

User modules import `DataAccessor`, `DatasetOptions` and `load_schema` from here (the last two
live in example_dataset.py and schemas.py). TensorFlow is imported inside the functions that
need it, so importing this module is cheap.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from generic_trainer.errors import UserInputError
from generic_trainer.fit.transform_plan import Plan, required_feature, transform_plan
from generic_trainer.records.example_dataset import (
    DatasetOptions,
    as_dataset_options,
    check_batch_size,
    make_dataset,
)
from generic_trainer.records.example_files import compression_fn
from generic_trainer.records.schemas import load_schema, parser_config

if TYPE_CHECKING:
    import pyarrow as pa
    import tensorflow as tf
    from tensorflow_metadata.proto.v0 import schema_pb2

__all__ = ["DataAccessor", "DatasetOptions", "load_schema", "transform_plan"]

log = logging.getLogger(__name__)


class DataAccessor:
    """What `fn_args.data_accessor` is: TFX's DataAccessor for tf.Example files.

    `transform_graph` (`--transform-graph`) and `raw_schema` (`--schema`) let
    `tf_dataset_factory` give transformed features from raw examples: see `transform_plan`.
    """

    data_view_decode_fn = None  # TFX's is None unless the examples carry a Data View (none here)

    def __init__(
        self,
        transform_graph: str | None = None,
        raw_schema: str | None = None,
        examples: str = "--examples",
        cache: str = "auto",
    ):
        self.transform_graph = transform_graph
        self.raw_schema = raw_schema
        self.cache = cache  # --cache-examples: auto | memory | off (example_dataset.make_dataset)
        self.examples = examples  # how errors name the examples input
        self._schemas: tuple[schema_pb2.Schema, str, schema_pb2.Schema] | None = None
        self._transform_layer: Any = None
        self._logged: set[str] = set()

    def tf_dataset_factory(
        self,
        file_patterns: str | Sequence[str],
        options: object,
        schema: schema_pb2.Schema | str,
    ) -> tf.data.Dataset:
        """A dataset of parsed batches, as tfx_bsl's
        `TFExampleRecord(...).TensorFlowDataset(options)`.

        `options`: `DatasetOptions` or tfx_bsl's `TensorFlowDatasetOptions`. `schema`: a Schema
        proto or the path of one. Elements are dicts of tensors (dense `[batch, *shape]`,
        `tf.SparseTensor` for var-len features), or `(features, label)` with `label_key`.
        The schema's features are read from the files, as tfx_bsl reads them. With a transform
        graph, features asked for that the files lack and the graph outputs come from the graph
        applied to the examples in the pipeline (`transform_plan`); the others are read as they are.
        """
        options = as_dataset_options(options)
        if isinstance(schema, (str, os.PathLike)):
            schema = load_schema(os.fspath(schema))
        if schema is None:
            raise UserInputError(
                "schema", "tf_dataset_factory needs a schema (fn_args.schema_path)"
            )
        patterns = [file_patterns] if isinstance(file_patterns, str) else list(file_patterns)
        plan = self._plan(patterns, schema, options.label_key) if self.transform_graph else None
        if plan is not None and plan.apply:
            return self._transformed_dataset(patterns, options, schema, plan)
        return make_dataset(patterns, options, schema, cache=self.cache)

    def record_batch_factory(
        self,
        file_patterns: str | Sequence[str],
        options: object,
        schema: schema_pb2.Schema | str | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """Arrow RecordBatches of the examples, as tfx_bsl's
        `TFExampleRecord(...).RecordBatches(options)`.

        `options`: tfx_bsl's `RecordBatchesOptions` (batch_size, drop_final_batch, num_epochs,
        shuffle, shuffle_buffer_size, shuffle_seed) or any object with those attributes. With a
        schema, columns are its features (a `large_list` per feature, null where an example lacks
        it); without one, every feature found, types inferred. For sklearn-style modules that
        read numpy arrays.
        """
        from tfx_bsl.coders import example_coder
        from tfx_bsl.tfxio import dataset_util

        if not hasattr(options, "batch_size"):
            raise UserInputError(
                "options", f"expected RecordBatchesOptions, got {type(options).__name__}"
            )
        check_batch_size(options.batch_size)
        if isinstance(schema, (str, os.PathLike)):
            schema = load_schema(os.fspath(schema))
        patterns = [file_patterns] if isinstance(file_patterns, str) else list(file_patterns)
        compression_fn(patterns)  # no files: a UserInputError naming the patterns
        dataset = dataset_util.make_tf_record_dataset(
            patterns,
            options.batch_size,
            getattr(options, "drop_final_batch", False),
            getattr(options, "num_epochs", None),
            getattr(options, "shuffle", True),
            getattr(options, "shuffle_buffer_size", 10000),
            getattr(options, "shuffle_seed", None),
        )
        decoder = example_coder.ExamplesToRecordBatchDecoder(
            schema.SerializeToString() if schema else None
        )
        return (decoder.DecodeBatch(batch) for batch in dataset.as_numpy_iterator())

    # -- transformed features from raw examples -------------------------------------------------

    def _transform_schemas(self) -> tuple[schema_pb2.Schema, str, schema_pb2.Schema]:
        """(raw schema, where it came from, transformed schema) of the transform graph."""
        if self._schemas is None:
            graph = self.transform_graph
            transformed_path = os.path.join(graph, "transformed_metadata", "schema.pbtxt")
            if not os.path.isfile(transformed_path):
                raise UserInputError(
                    "--transform-graph",
                    f"{graph} has no transformed_metadata/schema.pbtxt; "
                    "expected a tensorflow-transform output directory (TFX's TransformGraph)",
                )
            transformed = load_schema(transformed_path, "--transform-graph")
            raw_path = os.path.join(graph, "metadata", "schema.pbtxt")
            if os.path.isfile(raw_path):
                raw, source = load_schema(raw_path, "--transform-graph"), raw_path
            elif self.raw_schema:
                raw, source = load_schema(self.raw_schema), self.raw_schema
            else:
                raise UserInputError(
                    "--schema",
                    f"the transform graph {graph} has no metadata/schema.pbtxt (the raw "
                    "schema), so raw examples cannot be parsed to apply it: pass the raw schema "
                    "(SchemaGen's) as --schema",
                )
            self._schemas = (raw, source, transformed)
        return self._schemas

    def _plan(self, patterns: list[str], schema: schema_pb2.Schema, label_key: str | None) -> Plan:
        raw, raw_source, transformed = self._transform_schemas()
        record, files = _first_record_kinds(patterns)
        plan = transform_plan(
            schema,
            label_key,
            raw,
            transformed,
            record,
            files,
            where=(
                f"{', '.join(patterns)} ({self.examples})",
                f"raw schema {raw_source}",
                f"{self.transform_graph}/transformed_metadata",
            ),
        )
        if plan.apply:
            missing = [f.name for f in raw.feature if required_feature(f) and f.name not in record]
            if missing:
                raise UserInputError(
                    self.examples,
                    f"{files[0]} lacks raw features {', '.join(missing)} that the "
                    f"raw schema ({raw_source}) requires, so the transform graph cannot be applied "
                    f"to give {', '.join(plan.from_transform)}",
                )
        key = f"{plan.apply}|{','.join(patterns)}"
        if key not in self._logged:
            self._logged.add(key)
            if plan.apply:
                log.info(
                    "%s: applying the transform graph %s in the input pipeline (%s)",
                    ", ".join(patterns),
                    self.transform_graph,
                    plan.reason,
                )
            else:
                log.info(
                    "%s: parsing the examples as they are (%s)", ", ".join(patterns), plan.reason
                )
        return plan

    def _transformed_dataset(
        self, patterns: list[str], options: DatasetOptions, schema: schema_pb2.Schema, plan: Plan
    ) -> tf.data.Dataset:
        """Examples parsed with the raw schema (and the features asked for that the files hold), the
        transform
        graph applied; its outputs in `plan.from_transform`, the other features as parsed."""
        from tensorflow_metadata.proto.v0 import schema_pb2

        raw = self._transform_schemas()[0]
        spec, renames = parser_config(raw)
        raw_inputs = {renames.get(key, key) for key in spec}
        parsed = schema_pb2.Schema()
        parsed.CopyFrom(raw)
        for feature in schema.feature:
            if feature.name not in plan.from_transform and feature.name not in raw_inputs:
                parsed.feature.add().CopyFrom(feature)
        spec, renames = parser_config(schema)
        keep = sorted(
            {renames.get(key, key) for key in spec}
            | ({options.label_key} if options.label_key else set())
        )
        layer, from_transform = self._layer(), set(plan.from_transform)

        def transform(features: dict[str, Any]) -> dict[str, Any]:
            outputs = layer({key: value for key, value in features.items() if key in raw_inputs})
            return {key: outputs[key] if key in from_transform else features[key] for key in keep}

        return make_dataset(
            patterns, options, parsed, transform=transform, keep=keep, cache=self.cache
        )

    def _layer(self) -> Any:
        """The transform graph as a function of parsed raw features (TFT's
        transform_features_layer)."""
        if self._transform_layer is None:
            import tensorflow_transform as tft

            self._transform_layer = tft.TFTransformOutput(
                self.transform_graph
            ).transform_features_layer()
        return self._transform_layer


def _first_record_kinds(patterns: list[str]) -> tuple[dict[str, str | None] | None, list[str]]:
    """({feature name: tf.train.Feature kind} of the first record found, files matched)."""
    import tensorflow as tf

    compression_of = compression_fn(patterns)
    files = [f for p in patterns for f in sorted(tf.io.gfile.glob(p))]
    for path in files:
        for serialized in tf.data.TFRecordDataset(path, compression_of(path)).take(1):
            example = tf.train.Example.FromString(serialized.numpy())
            return {k: v.WhichOneof("kind") for k, v in example.features.feature.items()}, files
    return None, files
