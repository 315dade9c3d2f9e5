"""TFX 1.21's `tfx/proto/range_config.proto`: `RangeConfig`, `StaticRange`, `RollingRange`
(declared as `declare` says)."""

from generic_trainer.tfx_dsl.protos import declare as _declare

_FILE = _declare.ProtoFile(
    "tfx/proto/range_config.proto",
    "tfx.configs",
    {
        "StaticRange": ["int32 start_span_number = 1", "int32 end_span_number = 2"],
        "RollingRange": ["int32 start_span_number = 1", "int32 num_spans = 2", "reserved 3"],
        "RangeConfig": [
            "oneof range StaticRange static_range = 1",
            "oneof range RollingRange rolling_range = 2",
            "reserved 3, 4, 5",
        ],
    },
)
globals().update(_declare.build(_FILE, __name__))
