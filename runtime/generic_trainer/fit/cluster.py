"""The tf.distribute strategy that fits this replica's place in the cluster.

The place itself, a `Cluster` from TF_CONFIG / CLUSTER_SPEC, is `cluster_spec.py`'s (its names are
also here). `choose_strategy` picks a strategy from it and the GPU count; `create_strategy` builds
it (several workers: waits for them, with a deadline). Everything but `create_strategy` runs
without TensorFlow.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Iterator

from generic_trainer import compat
from generic_trainer.compat import Patch
from generic_trainer.errors import EXIT_CLUSTER, ClusterError, UserInputError
from generic_trainer.fit.cluster_spec import SINGLE, TRAINING_TYPES, Cluster, configured, resolve

__all__ = [
    "SINGLE",
    "STRATEGIES",
    "Cluster",
    "choose_strategy",
    "configured",
    "create_strategy",
    "describe",
    "prefetch_device",
    "resolve",
]

log = logging.getLogger(__name__)

STRATEGIES = ("auto", "default", "one_device", "mirrored", "multi_worker_mirrored")

# How long replicas wait for each other at start when --cluster-timeout is not given (VMs of one
# Vertex job can come up minutes apart), and the extra time the last-resort watchdog allows.
DEFAULT_STARTUP_TIMEOUT_S = 900.0
WATCHDOG_GRACE_S = 60.0


def choose_strategy(requested: str, num_gpus: int, cluster: Cluster) -> str:
    """The strategy name for `requested` ("auto" or an explicit name) on this hardware and cluster.

    auto: multi_worker_mirrored on a cluster, mirrored on several GPUs, else the default strategy
    (no wrapper, like a plain script: Keras' auto jit applies on one GPU); an explicit name is taken
    as it is."""
    if requested not in STRATEGIES:
        raise UserInputError("--strategy", f"{requested!r} is not one of {', '.join(STRATEGIES)}")
    if cluster.task_type in ("ps", "evaluator"):
        raise UserInputError(
            cluster.source,
            f"this replica is a {cluster.task_type!r}; generic-trainer trains with chief and "
            "worker "
            "replicas only (all-reduce). Remove the parameter-server/evaluator worker pools.",
        )
    if requested == "auto":
        if cluster.is_multi_worker:
            return "multi_worker_mirrored"
        # One GPU (or none), one worker: no strategy wrapper, as in a plain Keras script. TensorFlow
        # places the
        # ops on the GPU itself, and Keras' jit_compile="auto" compiles the step with XLA there,
        # which it never
        # does under a tf.distribute strategy (OneDeviceStrategy included).
        return "mirrored" if num_gpus > 1 else "default"
    if cluster.is_multi_worker and requested != "multi_worker_mirrored":
        raise UserInputError(
            "--strategy",
            f"{cluster.source} names {cluster.num_workers} replicas but strategy {requested!r} "
            "trains on one; use 'auto' or 'multi_worker_mirrored'",
        )
    if requested == "multi_worker_mirrored" and not cluster.is_multi_worker:
        log.info(
            "multi_worker_mirrored asked for with no cluster: running it as a one-worker cluster"
        )
    if requested == "one_device" and num_gpus > 1:
        log.info("one_device asked for with %d GPUs: only the first is used", num_gpus)
    return requested


# --prefetch-to-device's default when the flag is not given (read at intake, into the request)
PREFETCH_ENV = "GENERIC_TRAINER_PREFETCH_TO_DEVICE"
PREFETCH_OFF, PREFETCH_ON = ("off", "0", "false", "no"), ("auto", "on", "1", "true", "yes", "")


def prefetch_wanted(value: str | None) -> bool | None:
    """--prefetch-to-device's value as a switch: False for off, True for auto (or unset), None for
    anything else (the caller names the input)."""
    text = "auto" if value is None else str(value).strip().lower()
    if text in PREFETCH_OFF:
        return False
    return True if text in PREFETCH_ON else None


def prefetch_device(strategy_name: str, num_gpus: int, enabled: bool = True) -> str | None:
    """The device `model.fit`'s batches are copied to ahead of the step.

    Args:
        strategy_name: the strategy chosen (`choose_strategy`).
        num_gpus: the GPUs the run uses.
        enabled: the request's `prefetch_to_device` (--prefetch-to-device off: False).

    Returns:
        The GPU of a one-GPU run under the default strategy, else None (a tf.distribute
        strategy's distributed dataset prefetches to its devices itself; on the CPU there is
        nothing to copy).
    """
    if not enabled:
        return None
    return "/device:GPU:0" if strategy_name == "default" and num_gpus == 1 else None


def count_gpus() -> int:
    """GPUs TensorFlow can see (imports TensorFlow)."""
    import tensorflow as tf

    return len(tf.config.list_physical_devices("GPU"))


def create_strategy(name: str, cluster: Cluster, num_gpus: int, timeout_s: float | None = None):
    """Build the `tf.distribute.Strategy` called `name`. Must run before any other TF op.

    On a multi-worker cluster this waits until every chief/worker replica has connected, at most
    `timeout_s` (default DEFAULT_STARTUP_TIMEOUT_S), then raises ClusterError naming who is missing.
    A replica that dies later is noticed by the coordination service's heartbeats: the collective
    ops on the others fail (UnavailableError) within about a minute instead of hanging.
    """
    import tensorflow as tf

    if name == "multi_worker_mirrored":
        if not cluster.is_multi_worker:
            return tf.distribute.MultiWorkerMirroredStrategy()
        timeout = float(timeout_s or DEFAULT_STARTUP_TIMEOUT_S)
        # TensorFlow's resolver reads TF_CONFIG; give it the normalized form (CLUSTER_SPEC,
        # "master").
        os.environ["TF_CONFIG"] = json.dumps(cluster.tf_config())
        peers = ", ".join(f"{t}:{i}={a}" for t, i, a in _tasks(cluster))
        log.info(
            "connecting %d replicas (%s), waiting at most %gs (--cluster-timeout)",
            cluster.num_workers,
            peers,
            timeout,
        )
        started = time.monotonic()
        with (
            _watchdog(timeout + WATCHDOG_GRACE_S, cluster, timeout),
            compat.patched(coordination_deadline(cluster, timeout)),
        ):
            try:
                strategy = tf.distribute.MultiWorkerMirroredStrategy()
            except tf.errors.OpError as e:
                raise ClusterError(startup_failure_message(cluster, timeout, e.message)) from None
        log.info(
            "all %d replicas connected in %.1f s", cluster.num_workers, time.monotonic() - started
        )
        return strategy
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "one_device":
        return tf.distribute.OneDeviceStrategy("/gpu:0" if num_gpus else "/cpu:0")
    return tf.distribute.get_strategy()


def _tasks(cluster: Cluster) -> list[tuple[str, int, str]]:
    return [(t, i, a) for t in TRAINING_TYPES for i, a in enumerate(cluster.cluster.get(t, ()))]


def leader(cluster: Cluster) -> tuple[str, int, str]:
    """The replica whose coordination service every other replica registers with (chief, else worker
    0)."""
    return _tasks(cluster)[0]


def coordination_deadline(cluster: Cluster, timeout_s: float) -> Patch | None:
    """The patch that starts TensorFlow's coordination service with a registration deadline.

    Args:
        cluster: this replica's cluster.
        timeout_s: how long the replicas may take to register.

    Returns:
        `compat.tf_coordination.CoordinationDeadline` (TensorFlow's default waits forever), or
        None when the service was configured already (MultiWorkerMirroredStrategy's own then).
    """
    from tensorflow.python.eager import context

    from generic_trainer.compat.tf_coordination import CoordinationDeadline

    if context.context().coordination_service is not None:
        return None
    task_type, task_index, _ = leader(cluster)
    jobs = [(t, len(cluster.cluster[t])) for t in TRAINING_TYPES if cluster.cluster.get(t)]
    return CoordinationDeadline(
        f"/job:{task_type}/replica:0/task:{task_index}", jobs, int(timeout_s * 1000)
    )


def startup_failure_message(cluster: Cluster, timeout_s: float, detail: str) -> str:
    """The ClusterError text when the replicas did not all connect in time."""
    lead_type, lead_index, lead_address = leader(cluster)
    me = f"{cluster.task_type}:{cluster.task_index}"
    missing: list[tuple[str, str]] = []
    if "timed out task names:" in detail:  # TensorFlow lists them one per line after this
        for line in detail.split("timed out task names:", 1)[1].strip().splitlines():
            found = re.fullmatch(r"\s*/job:(\w+)/replica:\d+/task:(\d+)\s*", line)
            if not found:
                break
            if found.groups() not in missing:
                missing.append(found.groups())
    if missing:
        names = ", ".join(
            f"{t}:{i} ({cluster.cluster[t][int(i)]})"
            for t, i in missing
            if t in cluster.cluster and int(i) < len(cluster.cluster[t])
        )
        who = f"replica(s) {names} never connected to {me}"
    elif (cluster.task_type, cluster.task_index) == (lead_type, lead_index):
        who = "not every replica connected"
    else:
        who = f"{me} could not register with the leader {lead_type}:{lead_index} at {lead_address}"
    first_line = detail.strip().splitlines()[0] if detail.strip() else ""
    return (
        f"the cluster from {cluster.source} did not form within {timeout_s:g} s "
        f"(--cluster-timeout): {who}. "
        "Every replica must be started with the same cluster spec and reach the others' host:port. "
        f"TensorFlow said: {first_line[:300]}"
    )


@contextlib.contextmanager
def _watchdog(deadline_s: float, cluster: Cluster, timeout_s: float) -> Iterator[None]:
    """Exit the process (code 5) if the block is still running after `deadline_s`.

    TensorFlow waits for peers inside C++ calls that neither Python signals nor exceptions can
    interrupt; its own deadline should fire first, this is the last resort against a hang.
    """
    done = threading.Event()

    def watch() -> None:
        if not done.wait(deadline_s):
            log.error(
                "train failed: %s",
                startup_failure_message(
                    cluster, timeout_s, f"still waiting after {deadline_s:g} s"
                ),
            )
            logging.shutdown()
            os._exit(EXIT_CLUSTER)

    thread = threading.Thread(target=watch, name="cluster-startup-watchdog", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()


def strategy_devices(strategy) -> tuple[str, ...]:
    """The devices the strategy's replicas run on (the default strategy: TensorFlow's logical
    devices)."""
    try:
        return tuple(strategy.extended.worker_devices)
    except (
        RuntimeError,
        AttributeError,
    ):  # the default strategy: whatever device TensorFlow places ops on
        import tensorflow as tf

        return tuple(d.name for d in tf.config.list_logical_devices())


def describe(strategy, cluster: Cluster) -> str:
    """One log line: strategy class, replicas in sync, devices, and this replica's role."""
    devices = strategy_devices(strategy)
    role = f"{cluster.task_type}:{cluster.task_index}" + (" (chief)" if cluster.is_chief else "")
    return (
        f"strategy={type(strategy).__name__} replicas_in_sync={strategy.num_replicas_in_sync} "
        f"devices={list(devices)} role={role} cluster_source={cluster.source} "
        f"workers={cluster.num_workers}"
    )
