"""TFX 1.21's `tfx/proto/evaluator.proto`: `SingleSlicingSpec`, `FeatureSlicingSpec` (declared
as `declare` says)."""

from generic_trainer.tfx_dsl.protos import declare as _declare

_FILE = _declare.ProtoFile(
    "tfx/proto/evaluator.proto",
    "tfx.components.evaluator",
    {
        "SingleSlicingSpec": ["repeated string column_for_slicing = 1", "reserved 2"],
        "FeatureSlicingSpec": ["repeated SingleSlicingSpec specs = 1", "reserved 2"],
    },
)
globals().update(_declare.build(_FILE, __name__))
