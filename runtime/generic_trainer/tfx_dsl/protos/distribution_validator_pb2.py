"""TFX 1.21's `tfx/proto/distribution_validator.proto`: `DistributionValidatorConfig`,
`FeatureComparator` (declared as `declare` says; they use tensorflow_metadata's messages)."""

from generic_trainer.tfx_dsl.protos import declare as _declare

_FILE = _declare.ProtoFile(
    "tfx/proto/distribution_validator.proto",
    "tfx.components.distribution_validator",
    {
        "FeatureComparator": [
            "tensorflow.metadata.v0.Path path = 1",
            "tensorflow.metadata.v0.FeatureComparator distribution_comparator = 2",
        ],
        "DistributionValidatorConfig": [
            {
                "DatasetConfig": [
                    "repeated FeatureComparator feature = 1",
                    "tensorflow.metadata.v0.NumericValueComparator num_examples_comparator = 2",
                ]
            },
            "DatasetConfig default_slice_config = 1",
        ],
    },
    dependencies={
        "tensorflow_metadata/proto/v0/path.proto": "tensorflow_metadata.proto.v0.path_pb2",
        "tensorflow_metadata/proto/v0/schema.proto": "tensorflow_metadata.proto.v0.schema_pb2",
    },
)
globals().update(_declare.build(_FILE, __name__))
