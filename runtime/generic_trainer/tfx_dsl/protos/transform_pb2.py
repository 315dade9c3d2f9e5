"""TFX 1.21's `tfx/proto/transform.proto`: `SplitsConfig` (declared as `declare` says)."""

from generic_trainer.tfx_dsl.protos import declare as _declare

_FILE = _declare.ProtoFile(
    "tfx/proto/transform.proto",
    "tfx.components.transform",
    {"SplitsConfig": ["repeated string analyze = 1", "repeated string transform = 2"]},
)
globals().update(_declare.build(_FILE, __name__))
