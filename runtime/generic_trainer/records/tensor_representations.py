"""The tensors a Schema's examples parse into: tfx_bsl's tensor representations.

A schema's explicit default group (`tensor_representation_group[""]`) wins where it has one; the
other features get the representation tfx_bsl infers: a `sparse_feature` a SparseTensor, a feature
with `shape` a dense tensor (it must have `presence.min_fraction: 1`), any other a var-len sparse
tensor (ragged when `represent_variable_length_as_ragged`). Deprecated and not-yet/no-longer-live
features are left out. Errors name `--schema` (UserInputError).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from generic_trainer.errors import UserInputError

if TYPE_CHECKING:
    from tensorflow_metadata.proto.v0 import schema_pb2


def tensor_representations(
    schema: schema_pb2.Schema,
) -> dict[str, schema_pb2.TensorRepresentation]:
    """The tensors a schema's examples parse into, as tfx_bsl's
    InferTensorRepresentationsFromMixedSchema gives them.

    Args:
      schema: the Schema.

    Returns:
      {tensor name: its representation}: the explicit group "" plus those inferred for the
      features it does not use.

    Raises:
      UserInputError: a feature no representation suits (named with `--schema`).
    """
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
    """The features a representation reads."""
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
    """tfx_bsl's inferred representations: sparse features, then dense, var-len or ragged."""
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
    """A sparse_feature's SparseTensor; its index and value features are taken from `remaining`."""
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
                    "int_domain with min 0 and a max",
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
