"""tensorflow-metadata Schemas: reading one, and the `tf.io.parse_example` spec tfx_bsl derives from
it.

`load_schema` reads a schema.pbtxt (or SchemaGen's directory holding one);
`feature_spec_from_schema` and `parser_config` follow tfx_bsl's tensor representation rules (dense,
var-len, sparse, ragged), so parsed tensors are the ones TFX's own reader gives. Errors name
`--schema` (UserInputError). TensorFlow and the protos are imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from generic_trainer.artifacts import bounded_parse, files
from generic_trainer.errors import UserInputError
from generic_trainer.records.example_files import one_file

if TYPE_CHECKING:
    import tensorflow as tf
    from tensorflow_metadata.proto.v0 import schema_pb2


def load_schema(path: str, input_name: str = "--schema") -> schema_pb2.Schema:
    """Reads a tensorflow-metadata Schema text proto.

    `path` is a `.pbtxt` file or a directory holding exactly one `*.pbtxt` (TFX SchemaGen writes
    `schema.pbtxt` into its artifact directory). Errors name `input_name`.
    """
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    path = one_file(path, input_name, "*.pbtxt", "SchemaGen's schema.pbtxt")
    if files.classify(path) != files.REGULAR:
        raise UserInputError(
            input_name,
            f"{path} is {files.describe(path)}; expected a schema.pbtxt file or its directory",
        )
    try:
        schema = text_format.Parse(
            bounded_parse.read_text(path, input_name, files.MAX_SMALL_FILE), schema_pb2.Schema()
        )
    except (text_format.ParseError, UnicodeDecodeError) as e:
        raise UserInputError(
            input_name, f"{path} is not a text-format tensorflow-metadata Schema: {e}"
        ) from e
    if not schema.feature:
        raise UserInputError(input_name, f"{path} parses as a Schema but declares no features")
    return schema


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
    return parser_config(schema)[0]


def parser_config(schema: schema_pb2.Schema) -> tuple[dict[str, Any], dict[str, str]]:
    """(parse spec, {spec key: tensor name} for keys that must be renamed after parsing)."""
    import tensorflow as tf
    from tensorflow_metadata.proto.v0 import schema_pb2

    dtypes = {schema_pb2.INT: tf.int64, schema_pb2.FLOAT: tf.float32, schema_pb2.BYTES: tf.string}
    types = {f.name: f.type for f in schema.feature}

    def dtype_of(tensor: str, column: str) -> tf.DType:
        if column not in types:
            raise UserInputError(
                "--schema", f"tensor {tensor!r} refers to feature {column!r}, not in the schema"
            )
        if types[column] not in dtypes:
            type_name = schema_pb2.FeatureType.Name(types[column])
            raise UserInputError(
                "--schema",
                f"feature {column!r} has type {type_name}; only INT, FLOAT and BYTES can be parsed",
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
            raise UserInputError(
                "--schema", f"tensor representation {name!r} has no supported kind ({kind})"
            )
        if key in spec:
            raise UserInputError(
                "--schema", f"feature {key!r} is the source of more than one dense/var-len tensor"
            )
        spec[key] = feature
        if key != name:
            renames[key] = name
    return spec, renames


def _tensor_representations(
    schema: schema_pb2.Schema,
) -> dict[str, schema_pb2.TensorRepresentation]:
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


def _source_columns(rep: schema_pb2.TensorRepresentation) -> list[str]:
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


def _live(feature: schema_pb2.Feature | schema_pb2.SparseFeature) -> bool:
    """Whether tfx_bsl reads the feature (not deprecated, not in a lifecycle stage it skips)."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    skipped = {
        schema_pb2.DEPRECATED,
        schema_pb2.DISABLED,
        schema_pb2.PLANNED,
        schema_pb2.ALPHA,
        schema_pb2.DEBUG_ONLY,
        schema_pb2.VALIDATION_DERIVED,
    }
    return not (feature.deprecated or feature.lifecycle_stage in skipped)


def _infer_tensor_representations(
    schema: schema_pb2.Schema,
) -> dict[str, schema_pb2.TensorRepresentation]:
    from tensorflow_metadata.proto.v0 import path_pb2, schema_pb2

    representation = schema_pb2.TensorRepresentation
    remaining = {f.name: f for f in schema.feature}
    result = {
        sparse.name: _sparse_representation(sparse, remaining)
        for sparse in schema.sparse_feature
        if _live(sparse)
    }
    for feature in remaining.values():
        if not _live(feature):
            continue
        if feature.type == schema_pb2.STRUCT:
            raise UserInputError(
                "--schema", f"feature {feature.name!r} is a STRUCT, which tf.Example cannot hold"
            )
        if feature.HasField("shape"):
            if feature.presence.min_fraction != 1:
                raise UserInputError(
                    "--schema",
                    f"feature {feature.name!r} has a fixed shape but presence.min_fraction "
                    f"{feature.presence.min_fraction} != 1; use value_count instead of shape for a "
                    "feature that can be missing",
                )
            result[feature.name] = representation(
                dense_tensor=representation.DenseTensor(
                    column_name=feature.name, shape=feature.shape
                )
            )
        elif schema.represent_variable_length_as_ragged:
            path = path_pb2.Path(step=[feature.name])
            result[feature.name] = representation(
                ragged_tensor=representation.RaggedTensor(feature_path=path)
            )
        else:
            varlen = representation.VarLenSparseTensor(column_name=feature.name)
            result[feature.name] = representation(varlen_sparse_tensor=varlen)
    return result


def _sparse_representation(
    sparse: schema_pb2.SparseFeature, remaining: dict[str, schema_pb2.Feature]
) -> schema_pb2.TensorRepresentation:
    """A sparse_feature's SparseTensor; its index and value features are taken out of
    `remaining`."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    representation = schema_pb2.TensorRepresentation
    shape = schema_pb2.FixedShape()
    for index in sparse.index_feature:
        column = remaining.pop(index.name, None)
        if column is None:
            raise UserInputError(
                "--schema",
                f"sparse_feature {sparse.name!r} names index feature {index.name!r}, not in the "
                "schema",
            )
        domain = column.int_domain
        if column.HasField("int_domain"):
            if not (domain.HasField("min") and domain.HasField("max")) or domain.min != 0:
                raise UserInputError(
                    "--schema",
                    f"index feature {index.name!r} of sparse_feature {sparse.name!r} needs an "
                    "int_domain "
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
    return representation(
        sparse_tensor=representation.SparseTensor(
            dense_shape=shape,
            index_column_names=[i.name for i in sparse.index_feature],
            value_column_name=sparse.value_feature.name,
            already_sorted=sparse.is_sorted or None,
        )
    )


def _default_values(
    name: str,
    default: schema_pb2.TensorRepresentation.DefaultValue,
    dtype: tf.DType,
    shape: list[int],
) -> list[int | float | bytes]:
    import tensorflow as tf

    kind = default.WhichOneof("kind")
    expected = {"int_value": tf.int64, "float_value": tf.float32, "bytes_value": tf.string}.get(
        kind
    )
    if expected != dtype:
        raise UserInputError(
            "--schema", f"tensor {name!r}: default value {kind} does not suit type {dtype.name}"
        )
    size = 1
    for d in shape:
        size *= d
    return [getattr(default, kind)] * size


def _ragged_feature(
    name: str,
    ragged: schema_pb2.TensorRepresentation.RaggedTensor,
    dtype_of: Callable[[str, str], tf.DType],
) -> tf.io.RaggedFeature:
    import tensorflow as tf
    from tensorflow_metadata.proto.v0 import schema_pb2

    if len(ragged.feature_path.step) != 1:
        raise UserInputError(
            "--schema", f"ragged tensor {name!r} needs a feature_path of exactly one step"
        )
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
