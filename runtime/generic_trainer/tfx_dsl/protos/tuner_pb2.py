"""TFX 1.21's `tfx/proto/tuner.proto`: `TuneArgs` (declared as `declare` says)."""

from generic_trainer.tfx_dsl.protos import declare as _declare

_FILE = _declare.ProtoFile(
    "tfx/proto/tuner.proto",
    "tfx.components.tuner",
    {"TuneArgs": ["int32 num_parallel_trials = 1", "reserved 2, 3, 4"]},
)
globals().update(_declare.build(_FILE, __name__))
