"""tensorflow-metadata Schemas: reading one, and the `tf.io.parse_example` spec tfx_bsl derives from
it.

`load_schema` reads a schema.pbtxt (or SchemaGen's directory holding one);
`feature_spec_from_schema` and `parser_config` parse the tensors tensor_representations.py gives
(dense, var-len, sparse, ragged), so parsed tensors are the ones TFX's own reader gives. Errors name
`--schema` (UserInputError). TensorFlow and the protos are imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from generic_trainer.artifacts import bounded_parse, files
from generic_trainer.errors import UserInputError
from generic_trainer.records.example_files import one_file
from generic_trainer.records.tensor_representations import tensor_representations

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
    """The `tf.io.parse_example` spec of a schema, and the keys to rename after parsing.

    Args:
      schema: the Schema.

    Returns:
      (the parse spec, {spec key: tensor name} for the keys that are not the tensor's name).

    Raises:
      UserInputError: a representation that cannot be parsed (named with `--schema`).
    """
    dtype_of = _dtype_lookup(schema)
    spec: dict[str, Any] = {}
    renames: dict[str, str] = {}
    for name, rep in tensor_representations(schema).items():
        key, feature = _parse_feature(name, rep, dtype_of)
        if key in spec:
            raise UserInputError(
                "--schema", f"feature {key!r} is the source of more than one dense/var-len tensor"
            )
        spec[key] = feature
        if key != name:
            renames[key] = name
    return spec, renames


def _dtype_lookup(schema: schema_pb2.Schema) -> Callable[[str, str], tf.DType]:
    """dtype_of(tensor, column): the parsed dtype of a schema feature (INT, FLOAT or BYTES)."""
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

    return dtype_of


def _parse_feature(
    name: str,
    rep: schema_pb2.TensorRepresentation,
    dtype_of: Callable[[str, str], tf.DType],
) -> tuple[str, Any]:
    """(the spec key, the tf.io feature) that parses tensor `name` of representation `rep`."""
    import tensorflow as tf

    kind = rep.WhichOneof("kind")
    if kind == "dense_tensor":
        column = rep.dense_tensor.column_name
        dtype = dtype_of(name, column)
        shape = [d.size for d in rep.dense_tensor.shape.dim]
        default = None
        if rep.dense_tensor.HasField("default_value"):
            default = _default_values(name, rep.dense_tensor.default_value, dtype, shape)
        return column, tf.io.FixedLenFeature(shape, dtype, default_value=default)
    if kind == "varlen_sparse_tensor":
        column = rep.varlen_sparse_tensor.column_name
        return column, tf.io.VarLenFeature(dtype_of(name, column))
    if kind == "sparse_tensor":
        sparse = rep.sparse_tensor
        feature = tf.io.SparseFeature(
            index_key=list(sparse.index_column_names),
            value_key=sparse.value_column_name,
            dtype=dtype_of(name, sparse.value_column_name),
            size=[d.size for d in sparse.dense_shape.dim],
            already_sorted=sparse.already_sorted,
        )
        return name, feature
    if kind == "ragged_tensor":
        return name, _ragged_feature(name, rep.ragged_tensor, dtype_of)
    raise UserInputError(
        "--schema", f"tensor representation {name!r} has no supported kind ({kind})"
    )


def _default_values(
    name: str,
    default: schema_pb2.TensorRepresentation.DefaultValue,
    dtype: tf.DType,
    shape: list[int],
) -> list[int | float | bytes]:
    """A dense tensor's default value, checked against its dtype, filled to its shape."""
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
    """The tf.io.RaggedFeature of a ragged representation (one feature path step)."""
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
