"""Reading TFX Examples artifacts: schema, split discovery, file checks and the tf.data factory.

`DataAccessor().tf_dataset_factory(file_patterns, options, schema)` is the one a user's
`run_fn` calls through `fn_args.data_accessor`. It follows tfx_bsl's `TFExampleRecord.TensorFlowDataset`
(the reader TFX's own data accessor uses): same parsing config inferred from the schema, same
tensors, same order of elements for the same options and seeds. It costs about half the CPU
(bench/README.md): file readers hand records over in blocks rather than one by one, and batches
are parsed in parallel (tfx_bsl parses on one thread), with the label popped in the same step.
Beyond tfx_bsl: compression is recognised per file by content, `sloppy_ordering`,
`parser_num_threads` and `prefetch_buffer_size` are honoured, and inputs a user can fix raise
`UserInputError`.

With `--transform-graph`, a module asking for features only the transform produces (TFX modules
ask for `transformed_metadata.schema` and a `*_xf` label, as TFX feeds them Transform's
materialised examples) gets raw examples parsed with the raw schema and the transform graph
applied in the same tf.data map (`transform_plan` decides; transformed examples are parsed as
they are). `record_batch_factory` gives tfx_bsl's Arrow RecordBatches (tfx_bsl imported only then).

TensorFlow is imported inside the functions that need it, so importing this module is cheap.
"""

from __future__ import annotations

import dataclasses
import glob
import gzip
import logging
import os
import re
import struct
import zlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from generic_trainer.errors import UserInputError

if TYPE_CHECKING:
    import pyarrow as pa
    import tensorflow as tf
    from tensorflow_metadata.proto.v0 import schema_pb2

log = logging.getLogger(__name__)

AUTOTUNE = -1  # the value of tf.data.AUTOTUNE, without importing TensorFlow
_READ_BLOCK = 128  # records a file reader hands over at a time
_READ_AHEAD = 2  # blocks a file reader reads ahead (memory: cycle length x 3 blocks)
_GZIP_MAGIC = b"\x1f\x8b"


# --------------------------------------------------------------------------------------------
# Schema and files
# --------------------------------------------------------------------------------------------


def one_file(path: str, input_name: str, pattern: str = "*", usual: str = "") -> str:
    """`path` itself, or when it is a directory the one file in it matching `pattern` (hidden files aside).

    TFX artifacts are directories holding one file (SchemaGen's schema.pbtxt, the Tuner's
    best_hyperparameters.txt); anything but exactly one is a UserInputError naming `input_name`
    (and `usual`, the file such a directory usually holds).
    """
    if not os.path.isdir(path):
        return path
    found = sorted(f for f in glob.glob(os.path.join(path, pattern)) if os.path.isfile(f))
    if len(found) != 1:
        kind = "file" if pattern == "*" else f"{pattern} file"
        what = f"no {kind}" if not found else f"{len(found)} {kind}s ({', '.join(found)})"
        raise UserInputError(input_name, f"directory {path} holds {what}; expected exactly one"
                                         + (f" ({usual})" if usual else ""))
    return found[0]


def load_schema(path: str, input_name: str = "--schema") -> schema_pb2.Schema:
    """Reads a tensorflow-metadata Schema text proto.

    `path` is a `.pbtxt` file or a directory holding exactly one `*.pbtxt` (TFX SchemaGen writes
    `schema.pbtxt` into its artifact directory). Errors name `input_name`.
    """
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    path = one_file(path, input_name, "*.pbtxt", "SchemaGen's schema.pbtxt")
    if not os.path.isfile(path):
        raise UserInputError(input_name, f"{path} does not exist; expected a schema.pbtxt file or its directory")
    try:
        with open(path, encoding="utf-8") as f:
            schema = text_format.Parse(f.read(), schema_pb2.Schema())
    except (text_format.ParseError, UnicodeDecodeError) as e:
        raise UserInputError(input_name, f"{path} is not a text-format tensorflow-metadata Schema: {e}") from e
    if not schema.feature:
        raise UserInputError(input_name, f"{path} parses as a Schema but declares no features")
    return schema


def split_file_patterns(examples_dir: str, splits: Sequence[str], input_name: str = "--examples") -> list[str]:
    """Returns one file pattern (`<dir>/Split-<name>/*`) per split of a TFX Examples artifact.

    Also accepts the old TFX layout `<dir>/<name>/`.
    """
    if not os.path.isdir(examples_dir):
        raise UserInputError(input_name, f"directory {examples_dir} does not exist")
    present = sorted(
        e.name[len("Split-") :] if e.name.startswith("Split-") else e.name
        for e in os.scandir(examples_dir)
        if e.is_dir()
    )
    patterns = []
    for split in splits:
        split_dir = next(
            (d for d in (f"Split-{split}", split) if os.path.isdir(os.path.join(examples_dir, d))), None
        )
        if split_dir is None:
            raise UserInputError(
                input_name,
                f"{examples_dir} has no split {split!r} (no Split-{split}/ directory); "
                f"splits present: {', '.join(present) or 'none'}",
            )
        path = os.path.join(examples_dir, split_dir)
        if not any(e.is_file() and not e.name.startswith(".") for e in os.scandir(path)):
            raise UserInputError(input_name, f"split {split!r} ({path}) holds no files")
        patterns.append(os.path.join(path, "*"))
    return patterns


def check_readable(file_patterns: Sequence[str], input_name: str = "--examples") -> int:
    """Checks that every file matched is a readable TFRecord file; returns the number of files.

    Reads only the first record of each file (checksums included). Compression is recognised by
    content, so a gzipped file whose name lacks `.gz` passes (the dataset factory reads it too).
    """
    count = 0
    for pattern in file_patterns:
        files = sorted(f for f in glob.glob(pattern) if os.path.isfile(f))
        if not files:
            raise UserInputError(input_name, f"no files match {pattern}")
        for path in files:
            problem = _first_record_problem(path)
            if problem:
                raise UserInputError(input_name, f"{path} is not a readable TFRecord file: {problem}")
        count += len(files)
    return count


def _is_gzip(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == _GZIP_MAGIC


def _first_record_problem(path: str) -> str | None:
    """What is wrong with the first record of a TFRecord file, or None (an empty file is fine)."""
    try:
        opener = gzip.open if _is_gzip(path) else open
        with opener(path, "rb") as f:
            header = f.read(12)
            if not header:
                return None
            if len(header) < 12:
                return "it ends inside the first record header"
            (length,) = struct.unpack("<Q", header[:8])
            if _masked_crc32c(header[:8]) != struct.unpack("<I", header[8:])[0]:
                return "the first record header fails its checksum (not TFRecord data)"
            data = f.read(length)
            footer = f.read(4)
            if len(data) < length or len(footer) < 4:
                return "it ends inside the first record"
            if _masked_crc32c(data) != struct.unpack("<I", footer)[0]:
                return "the first record fails its checksum"
    except (OSError, EOFError, zlib.error) as e:
        return f"{type(e).__name__}: {e}"
    return None


def _masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC32C of `data`."""
    try:
        import google_crc32c  # a dependency of google-cloud-storage; C implementation

        crc = google_crc32c.value(data)
    except ImportError:
        crc = _crc32c_py(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _crc32c_py(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


# --------------------------------------------------------------------------------------------
# Schema -> tf.io parsing config (tfx_bsl's tensor representation rules)
# --------------------------------------------------------------------------------------------


def feature_spec_from_schema(schema: schema_pb2.Schema) -> dict[str, Any]:
    """The `tf.io.parse_example` spec tfx_bsl derives from a schema.

    Rules (tfx_bsl's): the schema's default tensor representation group wins where it has one;
    otherwise a `sparse_feature` gives `tf.io.SparseFeature`, a feature with `shape` gives
    `tf.io.FixedLenFeature` (it must have `presence.min_fraction: 1`), any other gives
    `tf.io.VarLenFeature` (`tf.io.RaggedFeature` when `represent_variable_length_as_ragged`).
    Deprecated and not-yet/no-longer-live features are left out. INT -> int64, FLOAT -> float32,
    BYTES -> string. Keys are tf.Example feature names (the tensor name for sparse and ragged
    representations).
    """
    return _parser_config(schema)[0]


def _parser_config(schema: schema_pb2.Schema) -> tuple[dict[str, Any], dict[str, str]]:
    """(parse spec, {spec key: tensor name} for keys that must be renamed after parsing)."""
    import tensorflow as tf
    from tensorflow_metadata.proto.v0 import schema_pb2

    dtypes = {schema_pb2.INT: tf.int64, schema_pb2.FLOAT: tf.float32, schema_pb2.BYTES: tf.string}
    types = {f.name: f.type for f in schema.feature}

    def dtype_of(tensor: str, column: str) -> tf.DType:
        if column not in types:
            raise UserInputError("--schema", f"tensor {tensor!r} refers to feature {column!r}, not in the schema")
        if types[column] not in dtypes:
            type_name = schema_pb2.FeatureType.Name(types[column])
            raise UserInputError(
                "--schema", f"feature {column!r} has type {type_name}; only INT, FLOAT and BYTES can be parsed"
            )
        return dtypes[types[column]]

    spec: dict[str, Any] = {}
    renames: dict[str, str] = {}
    for name, rep in _tensor_representations(schema).items():
        kind = rep.WhichOneof("kind")
        if kind == "dense_tensor":
            column = rep.dense_tensor.column_name
            dtype = dtype_of(name, column)
            shape = [d.size for d in rep.dense_tensor.shape.dim]
            default = None
            if rep.dense_tensor.HasField("default_value"):
                default = _default_values(name, rep.dense_tensor.default_value, dtype, shape)
            key, feature = column, tf.io.FixedLenFeature(shape, dtype, default_value=default)
        elif kind == "varlen_sparse_tensor":
            column = rep.varlen_sparse_tensor.column_name
            key, feature = column, tf.io.VarLenFeature(dtype_of(name, column))
        elif kind == "sparse_tensor":
            sparse = rep.sparse_tensor
            feature = tf.io.SparseFeature(
                index_key=list(sparse.index_column_names),
                value_key=sparse.value_column_name,
                dtype=dtype_of(name, sparse.value_column_name),
                size=[d.size for d in sparse.dense_shape.dim],
                already_sorted=sparse.already_sorted,
            )
            key = name
        elif kind == "ragged_tensor":
            key, feature = name, _ragged_feature(name, rep.ragged_tensor, dtype_of)
        else:
            raise UserInputError("--schema", f"tensor representation {name!r} has no supported kind ({kind})")
        if key in spec:
            raise UserInputError("--schema", f"feature {key!r} is the source of more than one dense/var-len tensor")
        spec[key] = feature
        if key != name:
            renames[key] = name
    return spec, renames


def _tensor_representations(schema: schema_pb2.Schema) -> dict[str, Any]:
    """tfx_bsl's InferTensorRepresentationsFromMixedSchema: explicit group "" plus inferred ones."""
    inferred = _infer_tensor_representations(schema)
    if "" not in schema.tensor_representation_group:
        return inferred
    explicit = dict(schema.tensor_representation_group[""].tensor_representation)
    used = {column for rep in explicit.values() for column in _source_columns(rep)}
    for name, rep in inferred.items():
        if name not in used and name not in explicit:
            explicit[name] = rep
    return explicit


def _source_columns(rep: Any) -> list[str]:
    kind = rep.WhichOneof("kind")
    if kind == "dense_tensor":
        return [rep.dense_tensor.column_name]
    if kind == "varlen_sparse_tensor":
        return [rep.varlen_sparse_tensor.column_name]
    if kind == "sparse_tensor":
        return [*rep.sparse_tensor.index_column_names, rep.sparse_tensor.value_column_name]
    if kind == "ragged_tensor":
        lengths = [p.row_length for p in rep.ragged_tensor.partition if p.HasField("row_length")]
        return [*rep.ragged_tensor.feature_path.step[:1], *lengths]
    return []


def _infer_tensor_representations(schema: schema_pb2.Schema) -> dict[str, Any]:
    from tensorflow_metadata.proto.v0 import path_pb2, schema_pb2

    representation = schema_pb2.TensorRepresentation
    skipped_stages = {
        schema_pb2.DEPRECATED,
        schema_pb2.DISABLED,
        schema_pb2.PLANNED,
        schema_pb2.ALPHA,
        schema_pb2.DEBUG_ONLY,
        schema_pb2.VALIDATION_DERIVED,
    }

    def live(feature: Any) -> bool:
        return not (feature.deprecated or feature.lifecycle_stage in skipped_stages)

    result: dict[str, Any] = {}
    remaining = {f.name: f for f in schema.feature}
    for sparse in schema.sparse_feature:
        if not live(sparse):
            continue
        shape = schema_pb2.FixedShape()
        for index in sparse.index_feature:
            column = remaining.pop(index.name, None)
            if column is None:
                raise UserInputError(
                    "--schema", f"sparse_feature {sparse.name!r} names index feature {index.name!r}, not in the schema"
                )
            domain = column.int_domain
            if column.HasField("int_domain"):
                if not (domain.HasField("min") and domain.HasField("max")) or domain.min != 0:
                    raise UserInputError(
                        "--schema",
                        f"index feature {index.name!r} of sparse_feature {sparse.name!r} needs an int_domain "
                        "with min 0 and a max",
                    )
                shape.dim.add(size=domain.max + 1)
            else:
                shape.dim.add(size=-1)
        if remaining.pop(sparse.value_feature.name, None) is None:
            raise UserInputError(
                "--schema",
                f"sparse_feature {sparse.name!r} names value feature {sparse.value_feature.name!r}, "
                "not in the schema (or already used)",
            )
        result[sparse.name] = representation(
            sparse_tensor=representation.SparseTensor(
                dense_shape=shape,
                index_column_names=[i.name for i in sparse.index_feature],
                value_column_name=sparse.value_feature.name,
                already_sorted=sparse.is_sorted or None,
            )
        )

    for feature in remaining.values():
        if not live(feature):
            continue
        if feature.type == schema_pb2.STRUCT:
            raise UserInputError("--schema", f"feature {feature.name!r} is a STRUCT, which tf.Example cannot hold")
        if feature.HasField("shape"):
            if feature.presence.min_fraction != 1:
                raise UserInputError(
                    "--schema",
                    f"feature {feature.name!r} has a fixed shape but presence.min_fraction "
                    f"{feature.presence.min_fraction} != 1; use value_count instead of shape for a "
                    "feature that can be missing",
                )
            result[feature.name] = representation(
                dense_tensor=representation.DenseTensor(column_name=feature.name, shape=feature.shape)
            )
        elif schema.represent_variable_length_as_ragged:
            path = path_pb2.Path(step=[feature.name])
            result[feature.name] = representation(ragged_tensor=representation.RaggedTensor(feature_path=path))
        else:
            varlen = representation.VarLenSparseTensor(column_name=feature.name)
            result[feature.name] = representation(varlen_sparse_tensor=varlen)
    return result


def _default_values(name: str, default: Any, dtype: tf.DType, shape: list[int]) -> list[Any]:
    import tensorflow as tf

    kind = default.WhichOneof("kind")
    expected = {"int_value": tf.int64, "float_value": tf.float32, "bytes_value": tf.string}.get(kind)
    if expected != dtype:
        raise UserInputError("--schema", f"tensor {name!r}: default value {kind} does not suit type {dtype.name}")
    size = 1
    for d in shape:
        size *= d
    return [getattr(default, kind)] * size


def _ragged_feature(name: str, ragged: Any, dtype_of: Any) -> Any:
    import tensorflow as tf
    from tensorflow_metadata.proto.v0 import schema_pb2

    if len(ragged.feature_path.step) != 1:
        raise UserInputError("--schema", f"ragged tensor {name!r} needs a feature_path of exactly one step")
    partitions = []
    for p in ragged.partition:
        if p.HasField("uniform_row_length"):
            partitions.append(tf.io.RaggedFeature.UniformRowLength(p.uniform_row_length))
        elif p.HasField("row_length"):
            partitions.append(tf.io.RaggedFeature.RowLengths(p.row_length))
        else:
            raise UserInputError("--schema", f"ragged tensor {name!r} has an unsupported partition")
    int32 = ragged.row_partition_dtype == schema_pb2.TensorRepresentation.RowPartitionDType.INT32
    return tf.io.RaggedFeature(
        dtype=dtype_of(name, ragged.feature_path.step[0]),
        value_key=ragged.feature_path.step[0],
        partitions=partitions,
        row_splits_dtype=tf.int32 if int32 else tf.int64,
    )


# --------------------------------------------------------------------------------------------
# The dataset factory
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class DatasetOptions:
    """The fields and defaults of `tfx_bsl.public.tfxio.TensorFlowDatasetOptions`."""

    batch_size: int
    drop_final_batch: bool = False
    num_epochs: int | None = None
    shuffle: bool = True
    shuffle_buffer_size: int = 10000
    shuffle_seed: int | None = None
    prefetch_buffer_size: int = AUTOTUNE
    reader_num_threads: int = AUTOTUNE
    parser_num_threads: int = AUTOTUNE
    sloppy_ordering: bool = False
    label_key: str | None = None


def _as_options(options: Any) -> DatasetOptions:
    """A DatasetOptions from ours or any object with its attributes (tfx_bsl's options)."""
    if not isinstance(options, DatasetOptions):
        if not hasattr(options, "batch_size"):
            raise UserInputError(
                "options", f"expected TensorFlowDatasetOptions or DatasetOptions, got {type(options).__name__}"
            )
        fields = {f.name: getattr(options, f.name, f.default) for f in dataclasses.fields(DatasetOptions)}
        options = DatasetOptions(**fields)
    if isinstance(options.batch_size, bool) or not isinstance(options.batch_size, int) or options.batch_size < 1:
        raise UserInputError("options", f"batch_size must be a positive integer, got {options.batch_size!r}")
    return options


class DataAccessor:
    """What `fn_args.data_accessor` is: TFX's DataAccessor for tf.Example files.

    `transform_graph` (`--transform-graph`) and `raw_schema` (`--schema`) let
    `tf_dataset_factory` give transformed features from raw examples: see `transform_plan`.
    """

    data_view_decode_fn = None  # TFX's is None unless the examples carry a Data View (none here)

    def __init__(self, transform_graph: str | None = None, raw_schema: str | None = None,
                 examples: str = "--examples"):
        self.transform_graph = transform_graph
        self.raw_schema = raw_schema
        self.examples = examples  # how errors name the examples input
        self._schemas: tuple[schema_pb2.Schema, str, schema_pb2.Schema] | None = None
        self._transform_layer: Any = None
        self._logged: set[str] = set()

    def tf_dataset_factory(
        self,
        file_patterns: str | Sequence[str],
        options: Any,
        schema: schema_pb2.Schema | str,
    ) -> tf.data.Dataset:
        """A dataset of parsed batches, as tfx_bsl's `TFExampleRecord(...).TensorFlowDataset(options)`.

        `options`: `DatasetOptions` or tfx_bsl's `TensorFlowDatasetOptions`. `schema`: a Schema
        proto or the path of one. Elements are dicts of tensors (dense `[batch, *shape]`,
        `tf.SparseTensor` for var-len features), or `(features, label)` with `label_key`.
        With a transform graph, a schema asking for transformed features of raw examples gets
        the raw examples parsed and transformed in the pipeline (`transform_plan`).
        """
        options = _as_options(options)
        if isinstance(schema, (str, os.PathLike)):
            schema = load_schema(os.fspath(schema))
        if schema is None:
            raise UserInputError("schema", "tf_dataset_factory needs a schema (fn_args.schema_path)")
        patterns = [file_patterns] if isinstance(file_patterns, str) else list(file_patterns)
        if self.transform_graph and self._transform_on_the_fly(patterns, schema, options.label_key):
            spec, renames = _parser_config(schema)
            keep = {renames.get(key, key) for key in spec} | ({options.label_key} if options.label_key else set())
            return _dataset(patterns, options, self._transform_schemas()[0], transform=self._layer(), keep=sorted(keep))
        return _dataset(patterns, options, schema)

    def record_batch_factory(
        self,
        file_patterns: str | Sequence[str],
        options: Any,
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
        if isinstance(options.batch_size, bool) or not isinstance(options.batch_size, int) or options.batch_size < 1:
            raise UserInputError("options", f"batch_size must be a positive integer, got {options.batch_size!r}")
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


def _dataset(patterns: list[str], options: DatasetOptions, schema: schema_pb2.Schema, transform: Any = None,
             keep: Sequence[str] | None = None) -> tf.data.Dataset:
    """The batches of tfx_bsl's TensorFlowDataset; with `transform`, parsed batches go through it and
    its outputs named in `keep` are the features."""
    import tensorflow as tf

    spec, renames = _parser_config(schema)
    tensor_names = {renames.get(key, key) for key in spec} if transform is None else set(keep or ())
    label_key = options.label_key
    if label_key is not None and label_key not in tensor_names:
        raise UserInputError(
            "label_key", f"{label_key!r} is not a tensor of the schema; tensors: {', '.join(sorted(tensor_names))}"
        )

    compression_of = compression_fn(patterns)

    threads = options.reader_num_threads

    def read(path: tf.Tensor) -> tf.data.Dataset:
        records = tf.data.TFRecordDataset(path, compression_of(path))
        if threads == 1:
            return records
        # Each open file is read and decompressed in a background thread that hands records
        # over in blocks: tfx_bsl's parallel interleave hands them over one by one, which costs
        # more CPU than reading them. The order of records does not change.
        return records.batch(_READ_BLOCK).prefetch(_READ_AHEAD).unbatch()

    files = tf.data.Dataset.list_files(patterns, shuffle=options.shuffle, seed=options.shuffle_seed)
    dataset = files.interleave(read, cycle_length=_cycle_length(threads))
    if options.shuffle:
        dataset = dataset.shuffle(options.shuffle_buffer_size, options.shuffle_seed)
    if options.num_epochs != 1:
        dataset = dataset.repeat(options.num_epochs)
    drop = options.drop_final_batch or options.num_epochs is None
    dataset = dataset.batch(options.batch_size, drop_remainder=drop)

    def parse(serialized: tf.Tensor) -> Any:
        parsed = tf.io.parse_example(serialized, spec)
        for value in parsed.values():
            if isinstance(value, tf.SparseTensor):  # keep the static batch size, as tfx_bsl does
                value.set_shape(serialized.shape.concatenate([None] * (value.shape.rank - 1)))
        features = {renames.get(key, key): value for key, value in parsed.items()}
        if transform is not None:
            outputs = transform(features)
            features = {key: outputs[key] for key in keep}
        if label_key is None:
            return features
        return features, features.pop(label_key)

    dataset = dataset.map(parse, num_parallel_calls=options.parser_num_threads)
    dataset = dataset.prefetch(options.prefetch_buffer_size)
    tf_options = tf.data.Options()
    tf_options.deterministic = not options.sloppy_ordering
    return dataset.with_options(tf_options)


def _cycle_length(reader_num_threads: int) -> int:
    """The cycle length of tfx_bsl's interleave (num_parallel_calls=reader_num_threads, default
    cycle_length), as TensorFlow's parallel interleave sets it: so records come in the same order."""
    cpus = len(os.sched_getaffinity(0))
    if reader_num_threads == AUTOTUNE:
        return -(-cpus // 3)  # one thread for the current and two for prefetched cycle elements
    return max(1, min(reader_num_threads, cpus))


def compression_fn(patterns: list[str]) -> Any:
    """A function path -> compression type ("GZIP" or "") for the files `patterns` match.

    Files of one directory whose names agree on a `.gz` suffix are taken to be compressed alike
    (one writer wrote them), so only the first of each such group is opened to look at its magic
    bytes: a gzipped file not named `.gz` (or the reverse) is read right.
    """
    import tensorflow as tf

    files = [f for p in patterns for f in sorted(tf.io.gfile.glob(p))]
    if not files:
        raise UserInputError("file_patterns", f"no files match {', '.join(patterns) or '(no patterns given)'}")
    group_gzip: dict[tuple[str, bool], bool] = {}
    gzipped = []
    for f in files:
        group = (os.path.dirname(f), f.endswith(".gz"))
        if group not in group_gzip:
            with tf.io.gfile.GFile(f, "rb") as handle:
                group_gzip[group] = handle.read(2) == _GZIP_MAGIC
        if group_gzip[group]:
            gzipped.append(f)
    if len(gzipped) in (0, len(files)):
        kind = "GZIP" if gzipped else ""
        return lambda path: kind
    gzipped_names = tf.constant(gzipped)
    return lambda path: tf.where(tf.reduce_any(tf.equal(gzipped_names, path)), "GZIP", "")


# --------------------------------------------------------------------------------------------
# Record checks: bad data is bad input (exit 2), named by split, file, record and feature
# --------------------------------------------------------------------------------------------

_FIRST_RECORDS = 16  # records decoded per split before run_fn runs (plus the first of each file)
_MAX_FILES_CHECKED = 64  # files per split whose first record is decoded too
_LOCATE_RECORDS = 200_000  # records scanned, at most, to locate a record the input pipeline could not decode
_DECODE_PATTERNS = (
    re.compile(r"Feature: (?P<feature>\S+) \(data type: (?P<dtype>\w+)\) is required but could not be found"),
    re.compile(r"Key: (?P<feature>[^,\s]+), Index: \d+\.\s+(?P<detail>[^\[]*?)\s*(\[|$)"),
    re.compile(r"(?P<detail>Could not parse example input)"),
)


def split_name(file_pattern: str) -> str:
    """The split a file pattern of `split_file_patterns` reads (`<dir>/Split-train/*` -> `train`)."""
    name = os.path.basename(os.path.dirname(file_pattern))
    return name[len("Split-"):] if name.startswith("Split-") else name


def read_records(path: str, limit: int | None = None) -> Iterator[bytes]:
    """The records of a TFRecord file (gzipped or plain), without TensorFlow; stops after `limit`.

    Stops quietly at a damaged record: `check_readable` and TensorFlow's reader report damage.
    """
    opener = gzip.open if _is_gzip(path) else open
    count = 0
    with opener(path, "rb") as f:
        while limit is None or count < limit:
            header = f.read(12)
            if len(header) < 12:
                return
            (length,) = struct.unpack("<Q", header[:8])
            data = f.read(length)
            if len(data) < length or len(f.read(4)) < 4:
                return
            count += 1
            yield data


def _split_files(pattern: str) -> list[str]:
    return sorted(f for f in glob.glob(pattern) if os.path.isfile(f))


def check_splits_hold_records(file_patterns: Sequence[str], input_name: str = "--examples") -> None:
    """Each split's files hold at least one record (a split of empty files is refused, without TensorFlow)."""
    for pattern in file_patterns:
        files = _split_files(pattern)
        if not any(next(read_records(f, 1), None) is not None for f in files):
            raise UserInputError(input_name, f"split {split_name(pattern)!r} holds no records: its "
                                             f"{len(files)} file(s) in {os.path.dirname(pattern)} are empty")


def _sample(pattern: str) -> Iterator[tuple[str, int, bytes]]:
    """(file, record index, record): the split's first records, then the first record of each other file."""
    files = _split_files(pattern)
    taken = 0
    for path in files:
        for index, record in enumerate(read_records(path, _FIRST_RECORDS - taken)):
            taken += 1
            yield path, index, record
        if taken >= _FIRST_RECORDS:
            break
    for path in files[:_MAX_FILES_CHECKED]:
        for record in read_records(path, 1):
            yield path, 0, record


def _decode_problem(record: bytes, spec: dict[str, Any] | None) -> str | None:
    """Why `record` does not decode (as a tf.Example, against the parse spec when given), or None."""
    import tensorflow as tf
    from google.protobuf.message import DecodeError

    if spec is None:
        try:
            tf.train.Example.FromString(record)
        except DecodeError:
            return "it is not a serialized tf.Example"
        return None
    try:
        tf.io.parse_example(tf.constant([record]), spec)
    except tf.errors.InvalidArgumentError as e:
        return _describe_decode_error(e.message) or " ".join(e.message.split())[:300]
    return None


def _describe_decode_error(message: str) -> str | None:
    """`feature 'x': <what TensorFlow said>` for a tf.io.parse_example error message, or None for other errors."""
    for pattern in _DECODE_PATTERNS:
        match = pattern.search(message)
        if match:
            groups = match.groupdict()
            if groups.get("dtype"):
                return f"feature {groups['feature']!r} ({groups['dtype']}) is required by the schema but missing"
            detail = " ".join((groups.get("detail") or "").split()).rstrip(".")
            if detail.startswith("Could not parse"):
                return "it is not a serialized tf.Example"
            return f"feature {groups['feature']!r}: {detail}"
    return None


def _bad_record(file_patterns: Sequence[str], spec: dict[str, Any] | None, records: Any,
                batch: int = 512) -> str | None:
    """The first record `records(pattern)` yields that does not decode, described, or None.

    Records are decoded a batch at a time; only a batch that fails is decoded record by record.
    """
    def first_problem(pattern: str, chunk: list[tuple[str, int, bytes]]) -> str | None:
        if spec is not None and _decode_problem_batch([r for _, _, r in chunk], spec) is None:
            return None
        for path, index, record in chunk:
            problem = _decode_problem(record, spec)
            if problem:
                return f"split {split_name(pattern)!r}, {path}, record {index}: {problem}"
        return None

    for pattern in file_patterns:
        chunk: list[tuple[str, int, bytes]] = []
        for item in records(pattern):
            chunk.append(item)
            if len(chunk) == batch:
                problem = first_problem(pattern, chunk)
                if problem:
                    return problem
                chunk = []
        problem = first_problem(pattern, chunk) if chunk else None
        if problem:
            return problem
    return None


def _decode_problem_batch(records: list[bytes], spec: dict[str, Any]) -> str | None:
    import tensorflow as tf

    try:
        tf.io.parse_example(tf.constant(records), spec)
    except tf.errors.InvalidArgumentError as e:
        return e.message
    return None


def _spec(schema_path: str | None) -> dict[str, Any] | None:
    return feature_spec_from_schema(load_schema(schema_path)) if schema_path else None


def check_first_records(file_patterns: Sequence[str], schema_path: str | None,
                        input_name: str = "--examples") -> None:
    """Decode the first records of each split (and the first of each file) before user code runs.

    Each must be a tf.Example and, with a schema, parse with `tf.io.parse_example` against the
    schema's feature spec (required features present, types and sizes as declared). Needs TensorFlow.
    """
    problem = _bad_record(file_patterns, _spec(schema_path), _sample)
    if problem:
        raise UserInputError(input_name, f"bad data in {problem}" + (
            f" (schema {schema_path})" if schema_path else ""))


def decode_error(error: BaseException, file_patterns: Sequence[str], schema_path: str | None,
                 input_name: str = "--examples") -> UserInputError | None:
    """A UserInputError for a decode error the input pipeline raised while user code ran, else None.

    tf.io.parse_example's InvalidArgumentError (missing feature, wrong type or size, not a
    tf.Example) and DataLossError (damaged TFRecord) are bad data, not the user's code: the files
    are scanned (up to a bound) to name the split, file and record. When every record decodes
    against the schema, the module's own parsing is at fault and None is returned (a user-code error).
    """
    import tensorflow as tf

    splits = ", ".join(repr(split_name(p)) for p in file_patterns)
    if isinstance(error, tf.errors.DataLossError):
        return UserInputError(input_name, f"a damaged TFRecord in one of the splits {splits}: {error.message}")
    what = _describe_decode_error(error.message) if isinstance(error, tf.errors.InvalidArgumentError) else None
    if what is None:
        return None
    cut_short = []

    def every_record(pattern: str) -> Iterator[tuple[str, int, bytes]]:
        budget = _LOCATE_RECORDS // max(1, len(file_patterns))
        for path in _split_files(pattern):
            for index, record in enumerate(read_records(path, budget)):
                budget -= 1
                yield path, index, record
            if budget <= 0:
                cut_short.append(pattern)
                return

    try:
        located = _bad_record(file_patterns, _spec(schema_path), every_record)
    except (UserInputError, OSError, tf.errors.OpError):
        located, cut_short = None, ["(scan failed)"]
    if located is None and not cut_short:
        return None  # every record decodes against the schema: the module's own parsing disagrees with it
    where = located or f"one of the splits {splits}: {what}"
    return UserInputError(input_name, f"bad data in {where} (found while the input pipeline read it"
                                      + (f"; schema {schema_path})" if schema_path else ")"))
