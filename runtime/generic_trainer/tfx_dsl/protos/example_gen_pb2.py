"""TFX 1.21's `tfx/proto/example_gen.proto`: `Input`, `Output`, `SplitConfig`, `CustomConfig`
and the `PayloadFormat` and `FileFormat` enums (declared as `declare` says)."""

from generic_trainer.tfx_dsl.protos import declare as _declare

_FILE = _declare.ProtoFile(
    "tfx/proto/example_gen.proto",
    "tfx.components.example_gen",
    {
        "Input": [
            {"Split": ["string name = 1", "string pattern = 2"]},
            "repeated Split splits = 1",
        ],
        "CustomConfig": ["google.protobuf.Any custom_config = 1"],
        "Output": ["SplitConfig split_config = 3", "reserved 1, 2, 4"],
        "SplitConfig": [
            {"Split": ["string name = 1", "uint32 hash_buckets = 2", "reserved 3"]},
            "repeated Split splits = 1",
            "oneof splitting_method_config string partition_feature_name = 2",
        ],
    },
    enums={
        "PayloadFormat": [
            "FORMAT_UNSPECIFIED = 0",
            "FORMAT_TF_EXAMPLE = 6",
            "FORMAT_TF_SEQUENCE_EXAMPLE = 7",
            "FORMAT_PROTO = 11",
            "FORMAT_PARQUET = 15",
            "reserved 1 to 5, 8 to 10, 12 to 14, 16 to max",
        ],
        "FileFormat": [
            "FILE_FORMAT_UNSPECIFIED = 0",
            "FORMAT_TFRECORDS_GZIP = 5",
            "FILE_FORMAT_PARQUET = 16",
            "reserved 1 to 4, 6, 7 to 15, 17 to max",
        ],
    },
    dependencies={"google/protobuf/any.proto": "google.protobuf.any_pb2"},
)
globals().update(_declare.build(_FILE, __name__))
