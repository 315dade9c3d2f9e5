"""TFX 1.21's `tfx/proto/trainer.proto`: `TrainArgs`, `EvalArgs` (declared as `declare` says)."""

from generic_trainer.tfx_dsl.protos import declare as _declare

_FILE = _declare.ProtoFile(
    "tfx/proto/trainer.proto",
    "tfx.components.trainer",
    {
        "TrainArgs": [
            "repeated string splits = 1",
            "int32 num_steps = 2",
            "reserved 3, 4, 5, 6, 7, 8, 9",
        ],
        "EvalArgs": ["repeated string splits = 1", "int32 num_steps = 2", "reserved 3"],
    },
)
globals().update(_declare.build(_FILE, __name__))
