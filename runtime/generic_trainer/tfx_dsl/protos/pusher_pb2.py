"""TFX 1.21's `tfx/proto/pusher.proto`: `PushDestination` (with `Filesystem`) and the
`Versioning` enum (declared as `declare` says)."""

from generic_trainer.tfx_dsl.protos import declare as _declare

_FILE = _declare.ProtoFile(
    "tfx/proto/pusher.proto",
    "tfx.components.pusher",
    {
        "PushDestination": [
            {
                "Filesystem": [
                    "string base_directory = 1",
                    "Versioning versioning = 6",
                    "reserved 2, 3, 4, 5, 7, 8, 9",
                ]
            },
            "oneof destination Filesystem filesystem = 3",
            "reserved 1, 2, 4, 5, 6",
        ],
    },
    enums={"Versioning": ["AUTO = 0", "UNIX_TIMESTAMP = 1"]},
)
globals().update(_declare.build(_FILE, __name__))
