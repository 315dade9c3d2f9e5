"""Strategy classes of `tf.distribute` and `tf.distribute.experimental` replaced by stand-ins.

Assumes: user code reaches the strategy classes as attributes of the `tf.distribute` /
`tf.distribute.experimental` modules (`tf.distribute.MirroredStrategy(...)`), looked up at call
time, so a module attribute set there is what it calls; each name is a class there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from generic_trainer.compat.base import Patch, Versions

STRATEGY_NAMES = (
    "MirroredStrategy",
    "MultiWorkerMirroredStrategy",
    "OneDeviceStrategy",
    "CentralStorageStrategy",
    "TPUStrategy",
    "ParameterServerStrategy",
)


def namespaces() -> tuple[Any, Any]:
    """`tf.distribute` and `tf.distribute.experimental`."""
    import tensorflow as tf

    return tf.distribute, tf.distribute.experimental


class StrategyStandIns(Patch):
    """Every strategy class named in `STRATEGY_NAMES` found in the namespaces is replaced by
    `stand_in(name, original_class)`."""

    versions = (Versions("tensorflow", "2.13", "2.22"),)
    lost = (
        "a module creating its own tf.distribute strategy fails inside the runtime's strategy scope"
    )

    def __init__(self, stand_in: Callable[[str, type], type]):
        super().__init__()
        self.stand_in = stand_in

    def missing(self) -> list[str]:
        distribute = namespaces()[0]
        return [
            f"tf.distribute.{name}"
            for name in ("MirroredStrategy", "MultiWorkerMirroredStrategy")
            if not isinstance(getattr(distribute, name, None), type)
        ]

    def replacements(self) -> list[tuple[Any, str, Any]]:
        out = []
        for namespace in namespaces():
            for name in STRATEGY_NAMES:
                original = getattr(namespace, name, None)
                if isinstance(original, type):
                    out.append((namespace, name, self.stand_in(name, original)))
        return out
