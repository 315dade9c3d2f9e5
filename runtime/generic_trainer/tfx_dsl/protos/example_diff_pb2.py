"""TFX 1.21's `tfx/proto/example_diff.proto`: `ExampleDiffConfig`, `PairedExampleSkew`
(declared as `declare` says)."""

from generic_trainer.tfx_dsl.protos import declare as _declare

_FILE = _declare.ProtoFile(
    "tfx/proto/example_diff.proto",
    "tfx.components.example_diff",
    {
        "PairedExampleSkew": [
            "repeated string identifier_features = 1",
            "uint32 skew_sample_size = 2",
            "repeated string ignore_features = 3",
            "uint32 float_round_ndigits = 4",
            "bool allow_duplicate_identifiers = 5",
            {"ConfusionConfig": ["string feature_name = 1"]},
            "repeated ConfusionConfig confusion_config = 6",
        ],
        "ExampleDiffConfig": ["PairedExampleSkew paired_example_skew = 1"],
    },
)
globals().update(_declare.build(_FILE, __name__))
