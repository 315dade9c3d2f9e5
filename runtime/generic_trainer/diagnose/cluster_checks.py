"""The cluster train would join and the strategy it would choose (fit/cluster.py's own functions),
with the chief's address resolved the way the replicas will connect to it."""

from __future__ import annotations

import socket
import threading
from collections.abc import Mapping

from generic_trainer.diagnose.report import Check, fail, ok
from generic_trainer.errors import UserInputError
from generic_trainer.fit import cluster as clusters

RESOLVE_TIMEOUT_S = 5.0
CLUSTER_FIX = (
    'TF_CONFIG is {"cluster": {"chief": ["host:port"], "worker": [...]}, "task": {"type": ..., '
    '"index": ...}}, the same on every replica but the task (Vertex AI sets CLUSTER_SPEC itself)'
)


def cluster_check(environ: Mapping[str, str]) -> tuple[Check, clusters.Cluster | None]:
    """(the check, the cluster or None when its spec cannot be read) of TF_CONFIG / CLUSTER_SPEC."""
    try:
        cluster = clusters.resolve(environ)
    except UserInputError as e:
        return fail("cluster", str(e), CLUSTER_FIX), None
    if cluster.source == "none":
        return ok("cluster", "none (no TF_CONFIG or CLUSTER_SPEC): one machine"), cluster
    task_type, task_index, address = clusters.leader(cluster)
    replicas = ", ".join(
        f"{t}:{i}={a}"
        for t in ("chief", "worker")
        for i, a in enumerate(cluster.cluster.get(t, ()))
    )
    me = f"{cluster.task_type}:{cluster.task_index}" + (" (chief)" if cluster.is_chief else "")
    detail = (
        f"{cluster.source}: {cluster.num_workers} replica(s) ({replicas}); this one is {me}; "
        f"leader {task_type}:{task_index}"
    )
    host = address.rsplit(":", 1)[0].strip("[]")
    resolved, error = resolve_host(host)
    if resolved is None:
        return (
            fail(
                "cluster",
                f"{detail}: its host {host!r} does not resolve ({error})",
                "every replica must reach the leader's host:port: check the addresses in "
                f"{cluster.source} and this machine's DNS",
            ),
            cluster,
        )
    return ok("cluster", f"{detail} at {address}, which resolves to {resolved}"), cluster


def resolve_host(host: str, timeout_s: float = RESOLVE_TIMEOUT_S) -> tuple[str | None, str]:
    """(the host's first address or None, why not), asking the resolver for at most `timeout_s`."""
    answer: list[tuple[str | None, str]] = []

    def ask() -> None:
        try:
            infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
            answer.append((", ".join(dict.fromkeys(str(i[4][0]) for i in infos)), ""))
        except OSError as e:
            answer.append((None, str(e)))

    thread = threading.Thread(target=ask, name="doctor-resolve", daemon=True)
    thread.start()
    thread.join(timeout_s)
    return answer[0] if answer else (None, f"no answer within {timeout_s:g} s")


def strategy_check(
    requested: str,
    num_gpus: int,
    cluster: clusters.Cluster | None,
    environ: Mapping[str, str],
) -> Check:
    """The strategy train would choose (fit/cluster.py's choose_strategy) for the GPUs TensorFlow
    registers."""
    if cluster is None:
        return fail("strategy", "not chosen: the cluster spec cannot be read", CLUSTER_FIX)
    try:
        name = clusters.choose_strategy(requested, num_gpus, cluster)
    except UserInputError as e:
        return fail("strategy", str(e), "use --strategy auto, or fix the cluster spec")
    why = {
        "default": "no tf.distribute wrapper, as in a plain script"
        + (
            "; Keras' auto jit compiles the step with XLA on the GPU if every layer supports it"
            " (a StringLookup does not)"
            if num_gpus == 1
            else ""
        ),
        "mirrored": f"one replica per GPU ({num_gpus})",
        "multi_worker_mirrored": f"all-reduce over {cluster.num_workers} replica(s)",
        "one_device": "one device",
    }[name]
    wanted = clusters.prefetch_wanted(environ.get(clusters.PREFETCH_ENV))
    device = clusters.prefetch_device(name, num_gpus, wanted is not False)
    prefetch = f"; batches prefetched to {device}" if device else ""
    return ok("strategy", f"{name} (--strategy {requested}, {num_gpus} GPU(s)): {why}{prefetch}")
