"""Answers the tf.distribute strategies a user module creates with the one the runtime chose.

TFX module files create `tf.distribute.MirroredStrategy()` inside `run_fn` and build their model
in its scope. The runtime already calls `run_fn` inside the strategy it chose for the replica's
GPUs and the cluster, and TensorFlow refuses a second one ("Mixing different tf.distribute.Strategy
objects"). While the user's function runs, `substitute(strategy)` puts stand-ins in
`tf.distribute` / `tf.distribute.experimental`: creating a MirroredStrategy, MultiWorkerMirrored-
Strategy, OneDeviceStrategy or CentralStorageStrategy returns the runtime's strategy (logged once
per kind), after checking that devices the module names exist; TPUStrategy and
ParameterServerStrategy fail with UserCodeError. `isinstance` against the stand-ins still checks
against TensorFlow's classes. `tf.distribute.get_strategy()` needs no stand-in: inside the
runtime's scope it already returns the runtime's strategy. Everything is restored on exit
(`compat.strategy_classes` replaces the classes).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from typing import Any

from generic_trainer import compat
from generic_trainer.errors import UserCodeError

log = logging.getLogger(__name__)

REFUSED = ("TPUStrategy", "ParameterServerStrategy")


def public_name(strategy: Any) -> str:
    """The tf.distribute name of `strategy`'s class (MultiWorkerMirroredStrategy, not
    CollectiveAllReduceStrategy)."""
    import tensorflow as tf

    for name in (
        "MultiWorkerMirroredStrategy",
        "MirroredStrategy",
        "OneDeviceStrategy",
        "TPUStrategy",
    ):
        if isinstance(strategy, getattr(tf.distribute, name)):
            return name
    return type(strategy).__name__


def describe(strategy: Any) -> str:
    """`MultiWorkerMirroredStrategy over 2 workers`, `MirroredStrategy over 2 devices (...)`, ..."""
    name = public_name(strategy)
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is not None:
        jobs = resolver.cluster_spec().as_dict()
        workers = sum(
            len(tasks) for job, tasks in jobs.items() if job in ("chief", "worker", "master")
        )
        if workers > 1:
            return f"{name} over {workers} workers"
    try:
        devices = list(strategy.extended.worker_devices)
    except (RuntimeError, AttributeError):
        return f"{name} (TensorFlow's default strategy, one device)"
    plural = "s" if len(devices) != 1 else ""
    return f"{name} over {len(devices)} device{plural} ({', '.join(devices)})"


def missing_devices(devices: Sequence[str], available: Sequence[str]) -> list[str]:
    """The devices in `devices` that none of `available` (logical device names) is."""
    import tensorflow as tf

    have = set()
    for name in available:
        spec = tf.DeviceSpec.from_string(name)
        have.add((spec.device_type.upper(), spec.device_index or 0))
    missing = []
    for device in devices:
        spec = tf.DeviceSpec.from_string(str(device))
        if spec.device_type is None:
            continue  # a job or task, not a device of this replica: nothing to check here
        if ((spec.device_type or "").upper(), spec.device_index or 0) not in have:
            missing.append(str(device))
    return missing


class _Answer:
    """What a module's strategy constructor gets while `substitute` is active."""

    def __init__(self, strategy: Any):
        self.strategy = strategy
        self.logged: set[str] = set()

    def substitute(self, kind: str, args: tuple, kwargs: dict) -> Any:
        import tensorflow as tf

        devices = kwargs.get("devices") or kwargs.get("device") or kwargs.get("compute_devices")
        if (
            devices is None
            and args
            and kind in ("MirroredStrategy", "OneDeviceStrategy", "CentralStorageStrategy")
        ):
            devices = args[0]
        if isinstance(devices, str):
            devices = [devices]
        if devices:
            available = [d.name for d in tf.config.list_logical_devices()]
            missing = missing_devices(devices, available)
            if missing:
                raise UserCodeError(
                    f"the module asked for {kind} on {', '.join(missing)}, which this replica does "
                    "not have (it has "
                    f"{', '.join(available)}). Leave the devices out: the runtime trains with "
                    f"{describe(self.strategy)}"
                    f", chosen for this replica's GPUs and the cluster (--strategy)."
                )
        if kind not in self.logged:
            self.logged.add(kind)
            log.info(
                "module asked for %s%s; using %s",
                kind,
                f" on {', '.join(map(str, devices))}" if devices else "",
                describe(self.strategy),
            )
        return self.strategy

    def refuse(self, kind: str) -> Any:
        raise UserCodeError(
            f"the module asked for {kind}, which generic-trainer cannot honour: it trains on the "
            "CPUs and GPUs of its "
            f"replicas, here with {describe(self.strategy)}. Remove the {kind} from the module "
            "(use fn_args.strategy, "
            "or build the model without a strategy scope: run_fn is already called inside the "
            "runtime's)."
        )


class _StandIn(type):
    """Metaclass of the stand-in classes: calling one asks `_Answer`; isinstance/issubclass use TF's
    class."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return cls._answer(cls.__name__, args, kwargs)

    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, cls._original)

    def __subclasscheck__(cls, subclass: type) -> bool:
        return issubclass(subclass, cls._original)


def _stand_in(name: str, original: type, answer) -> type:
    return _StandIn(
        name,
        (),
        {
            "_original": original,
            "_answer": staticmethod(answer),
            "__doc__": f"generic-trainer's stand-in for tf.distribute.{name}",
        },
    )


@contextlib.contextmanager
def substitute(strategy: Any) -> Iterator[None]:
    """While the block runs, strategies the user's code creates are answered with `strategy`
    (the classes are replaced by `compat.strategy_classes`)."""
    from generic_trainer.compat import strategy_classes

    answer = _Answer(strategy)

    def stand_in(name: str, original: type) -> type:
        if name in REFUSED:
            return _stand_in(name, original, lambda kind, args, kwargs: answer.refuse(kind))
        return _stand_in(name, original, answer.substitute)

    with compat.patched(strategy_classes.StrategyStandIns(stand_in)):
        yield
