"""`fn_args.data_accessor`: TFX's DataAccessor for tf.Example files, and when a transform graph is applied.

`DataAccessor().tf_dataset_factory(file_patterns, options, schema)` is the one a user's `run_fn`
calls. It follows tfx_bsl's `TFExampleRecord.TensorFlowDataset` (the reader TFX's own data accessor
uses; the pipeline itself is example_dataset.py). Beyond tfx_bsl: compression is recognised per
file by content, `sloppy_ordering`, `parser_num_threads` and `prefetch_buffer_size` are honoured,
and inputs a user can fix raise `UserInputError`.

With `--transform-graph`, a module asking for features only the transform produces (TFX modules
ask for `transformed_metadata.schema` and a `*_xf` label, as TFX feeds them Transform's
materialised examples) gets raw examples parsed with the raw schema and the transform graph
applied in the same tf.data map (`transform_plan` decides; transformed examples are parsed as
they are). `record_batch_factory` gives tfx_bsl's Arrow RecordBatches (tfx_bsl imported only then).

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
from generic_trainer.records.example_dataset import DatasetOptions, as_dataset_options, check_batch_size, make_dataset
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

    def __init__(self, transform_graph: str | None = None, raw_schema: str | None = None,
                 examples: str = "--examples", cache: str = "auto"):
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
        """A dataset of parsed batches, as tfx_bsl's `TFExampleRecord(...).TensorFlowDataset(options)`.

        `options`: `DatasetOptions` or tfx_bsl's `TensorFlowDatasetOptions`. `schema`: a Schema
        proto or the path of one. Elements are dicts of tensors (dense `[batch, *shape]`,
        `tf.SparseTensor` for var-len features), or `(features, label)` with `label_key`.
        With a transform graph, a schema asking for transformed features of raw examples gets
        the raw examples parsed and transformed in the pipeline (`transform_plan`).
        """
        options = as_dataset_options(options)
        if isinstance(schema, (str, os.PathLike)):
            schema = load_schema(os.fspath(schema))
        if schema is None:
            raise UserInputError("schema", "tf_dataset_factory needs a schema (fn_args.schema_path)")
        patterns = [file_patterns] if isinstance(file_patterns, str) else list(file_patterns)
        if self.transform_graph and self._transform_on_the_fly(patterns, schema, options.label_key):
            spec, renames = parser_config(schema)
            keep = {renames.get(key, key) for key in spec} | ({options.label_key} if options.label_key else set())
            return make_dataset(patterns, options, self._transform_schemas()[0], transform=self._layer(),
                                keep=sorted(keep), cache=self.cache)
        return make_dataset(patterns, options, schema, cache=self.cache)

    def record_batch_factory(
        self,
        file_patterns: str | Sequence[str],
        options: object,
        schema: schema_pb2.Schema | str | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """Arrow RecordBatches of the examples, as tfx_bsl's `TFExampleRecord(...).RecordBatches(options)`.

        `options`: tfx_bsl's `RecordBatchesOptions` (batch_size, drop_final_batch, num_epochs,
        shuffle, shuffle_buffer_size, shuffle_seed) or any object with those attributes. With a
        schema, columns are its features (a `large_list` per feature, null where an example lacks
        it); without one, every feature found, types inferred. For sklearn-style modules that
        read numpy arrays.
        """
        from tfx_bsl.coders import example_coder
        from tfx_bsl.tfxio import dataset_util

        if not hasattr(options, "batch_size"):
            raise UserInputError("options", f"expected RecordBatchesOptions, got {type(options).__name__}")
        check_batch_size(options.batch_size)
        if isinstance(schema, (str, os.PathLike)):
            schema = load_schema(os.fspath(schema))
        patterns = [file_patterns] if isinstance(file_patterns, str) else list(file_patterns)
        compression_fn(patterns)  # no files: a UserInputError naming the patterns
        dataset = dataset_util.make_tf_record_dataset(
            patterns, options.batch_size, getattr(options, "drop_final_batch", False),
            getattr(options, "num_epochs", None), getattr(options, "shuffle", True),
            getattr(options, "shuffle_buffer_size", 10000), getattr(options, "shuffle_seed", None))
        decoder = example_coder.ExamplesToRecordBatchDecoder(schema.SerializeToString() if schema else None)
        return (decoder.DecodeBatch(batch) for batch in dataset.as_numpy_iterator())

    # -- transformed features from raw examples -------------------------------------------------

    def _transform_schemas(self) -> tuple[schema_pb2.Schema, str, schema_pb2.Schema]:
        """(raw schema, where it came from, transformed schema) of the transform graph."""
        if self._schemas is None:
            graph = self.transform_graph
            transformed_path = os.path.join(graph, "transformed_metadata", "schema.pbtxt")
            if not os.path.isfile(transformed_path):
                raise UserInputError("--transform-graph", f"{graph} has no transformed_metadata/schema.pbtxt; "
                                     "expected a tensorflow-transform output directory (TFX's TransformGraph)")
            transformed = load_schema(transformed_path, "--transform-graph")
            raw_path = os.path.join(graph, "metadata", "schema.pbtxt")
            if os.path.isfile(raw_path):
                raw, source = load_schema(raw_path, "--transform-graph"), raw_path
            elif self.raw_schema:
                raw, source = load_schema(self.raw_schema), self.raw_schema
            else:
                raise UserInputError("--schema", f"the transform graph {graph} has no metadata/schema.pbtxt (the raw "
                                     "schema), so raw examples cannot be parsed to apply it: pass the raw schema "
                                     "(SchemaGen's) as --schema")
            self._schemas = (raw, source, transformed)
        return self._schemas

    def _transform_on_the_fly(self, patterns: list[str], schema: schema_pb2.Schema, label_key: str | None) -> bool:
        raw, raw_source, transformed = self._transform_schemas()
        record, files = _first_record_kinds(patterns)
        apply, reason = transform_plan(schema, label_key, raw, transformed, record, files,
                                       where=(f"{', '.join(patterns)} ({self.examples})",
                                              f"raw schema {raw_source}",
                                              f"{self.transform_graph}/transformed_metadata"))
        if apply:
            missing = [f.name for f in raw.feature
                       if f.HasField("shape") and f.presence.min_fraction == 1 and f.name not in record]
            if missing:
                raise UserInputError(self.examples, f"{files[0]} lacks raw features {', '.join(missing)} that the "
                                     f"raw schema ({raw_source}) requires, so the transform graph cannot be applied")
        key = f"{apply}|{','.join(patterns)}"
        if key not in self._logged:
            self._logged.add(key)
            if apply:
                log.info("%s: applying the transform graph %s in the input pipeline (%s)", ", ".join(patterns),
                         self.transform_graph, reason)
            else:
                log.info("%s: parsing the examples as they are (%s)", ", ".join(patterns), reason)
        return apply

    def _layer(self) -> Any:
        """The transform graph as a function of parsed raw features (TFT's transform_features_layer)."""
        if self._transform_layer is None:
            import tensorflow_transform as tft

            self._transform_layer = tft.TFTransformOutput(self.transform_graph).transform_features_layer()
        return self._transform_layer


_KINDS = {1: "bytes_list", 2: "int64_list", 3: "float_list"}  # schema_pb2 BYTES, INT, FLOAT -> tf.train.Feature
_MATERIALISED = "transformed_examples"  # how TFX's Transform names the files of its transformed examples


def transform_plan(
    requested: schema_pb2.Schema,
    label_key: str | None,
    raw: schema_pb2.Schema,
    transformed: schema_pb2.Schema,
    record: dict[str, str | None] | None,
    files: Sequence[str],
    where: tuple[str, str, str] = ("--examples", "the raw schema", "the transform graph's output"),
) -> tuple[bool, str]:
    """Whether a dataset asked for with `requested` (and `label_key`) needs the transform graph
    applied to the examples, and why.

    The module asks for transformed features when a feature it asks for (or its label) is a
    transformed feature and not a raw one of that type, or when `requested` is the transformed
    schema itself (and not the raw one). Then the examples are raw unless their first record
    (`record`: feature name -> tf.train.Feature kind) holds those transformed features; when raw
    and transformed features have the same names and types, files named like Transform's
    materialised output (`transformed_examples-*`) are taken as transformed, others as raw.
    `where` names (the examples, the raw schema, the transformed schema) in messages.
    A feature in neither schema is a UserInputError naming it.
    """
    raw_types = {f.name: f.type for f in raw.feature}
    xf_types = {f.name: f.type for f in transformed.feature}
    asked = {f.name: f.type for f in requested.feature}
    names = list(asked) + ([label_key] if label_key is not None and label_key not in asked else [])
    unknown = [n for n in names if n not in raw_types and n not in xf_types]
    if unknown:
        what = "label_key " if unknown == [label_key] else "feature(s) "
        raise UserInputError(where[0], f"the module asks for {what}{', '.join(map(repr, unknown))}, which is neither a "
                             f"raw feature ({where[1]}: {', '.join(sorted(raw_types))}) nor a transformed one "
                             f"({where[2]}: {', '.join(sorted(xf_types))})")
    if requested == raw:
        return False, "the module asks for the raw schema"

    def transformed_only(name: str) -> bool:
        if name not in xf_types:
            return False
        return name not in raw_types or (name in asked and asked[name] != raw_types[name])

    only = [n for n in names if transformed_only(n)]
    if not only and requested != transformed:
        return False, "every feature the module asks for is a raw feature"
    if record is None:
        return False, "the examples hold no records"
    if only:
        if all(record.get(n) == _KINDS.get(xf_types[n]) for n in only):
            return False, f"the examples hold the transformed features {', '.join(only)}"
        return True, f"the module asks for transformed features ({', '.join(only)}) and the examples are raw"
    extra = sorted(set(record) - set(xf_types))
    if extra:
        return True, f"the module asks for the transformed schema; the examples hold raw features ({', '.join(extra)})"
    if files and all(os.path.basename(f).startswith(_MATERIALISED) for f in files):
        return False, (f"the module asks for the transformed schema; files named {_MATERIALISED}-* are "
                       "Transform's output")
    return True, ("the module asks for the transformed schema, whose features have the names and types of the raw "
                  "ones; the examples are taken as raw (Transform's materialised examples are named "
                  f"{_MATERIALISED}-*)")


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

