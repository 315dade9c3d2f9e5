"""TFX 1.21's `tfx/proto/bulk_inferrer.proto`: `ModelSpec`, `DataSpec`, `OutputExampleSpec`
and the output column specs (declared as `declare` says)."""

from generic_trainer.tfx_dsl.protos import declare as _declare

_FILE = _declare.ProtoFile(
    "tfx/proto/bulk_inferrer.proto",
    "tfx.components.bulkinferrer",
    {
        "ModelSpec": [
            "repeated string model_signature_name = 2",
            "repeated string tag = 5",
            "reserved 1, 3, 4, 6",
        ],
        "DataSpec": ["repeated string example_splits = 2", "reserved 1, 3, 4"],
        "OutputExampleSpec": [
            "repeated OutputColumnsSpec output_columns_spec = 3",
            "reserved 1, 2, 4",
        ],
        "OutputColumnsSpec": [
            "string signature_name = 1",
            "oneof output_type ClassifyOutput classify_output = 2",
            "oneof output_type RegressOutput regress_output = 3",
            "oneof output_type PredictOutput predict_output = 4",
        ],
        "ClassifyOutput": ["string label_column = 1", "string score_column = 2"],
        "RegressOutput": ["string value_column = 1"],
        "PredictOutput": ["repeated PredictOutputCol output_columns = 1"],
        "PredictOutputCol": ["string output_key = 1", "string output_column = 2"],
    },
)
globals().update(_declare.build(_FILE, __name__))
