"""Parallel keras-tuner searches: who serves the oracle, the KERASTUNER_* variables, and deadlines.

keras-tuner searches in parallel when `KERASTUNER_ORACLE_IP`/`_PORT` and `KERASTUNER_TUNER_ID` are
set: the tuner whose id contains "chief" serves the oracle over gRPC and every other tuner asks it
for trials. keras-tuner's own chief only serves (it blocks forever) and waits forever for a worker
that died. Here, with CLUSTER_SPEC or TF_CONFIG naming several replicas:

- the chief serves the oracle from a thread (`oracle_server.OracleServer`) at its cluster address
  and runs trials itself too, like every worker;
- the server notes when it last heard from each worker; workers send heartbeats
  (`oracle_server.Heartbeat`) while
  a trial runs, so a silent worker holding a trial is gone: after `--worker-timeout` seconds the
  chief gives up with a ClusterError (the search state is saved; a re-run resumes and retries it);
- workers give up when the oracle is unreachable for as long (keras-tuner's own limit is an hour).

This module says who is who and sets the variables; `oracle_server.py` serves and beats. The
cluster itself comes from fit/cluster.py; keras-tuner and gRPC are imported only when serving.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import logging
import os
from collections.abc import Callable, Iterator

from generic_trainer.errors import UserInputError
from generic_trainer.fit.cluster import Cluster

log = logging.getLogger(__name__)

ENV_VARS = ("KERASTUNER_ORACLE_IP", "KERASTUNER_ORACLE_PORT", "KERASTUNER_TUNER_ID")
# keras-tuner: the tuner whose id contains "chief" serves the oracle; no other id may contain it.
ORACLE_TUNER_ID = "chief"
SINGLE_TUNER_ID = "tuner0"  # keras-tuner's default id


@dataclasses.dataclass(frozen=True)
class TunerRole:
    """This replica's part in a search."""

    distributed: bool
    serves_oracle: (
        bool  # the chief (or the only replica) holds the oracle and publishes the outputs
    )
    tuner_id: str  # the id this replica's trials run under
    oracle_host: str = ""
    oracle_port: int = 0
    remote_tuner_ids: tuple[str, ...] = ()  # on the chief: the other replicas' tuner ids
    task_type: str = "chief"
    task_index: int = 0
    num_replicas: int = 1  # replicas running trials

    @property
    def bind_address(self) -> str:
        """Where the chief listens: its loopback address when the cluster is local, else every
        interface."""
        host = self.oracle_host if _is_loopback(self.oracle_host) else "0.0.0.0"
        return f"{host}:{self.oracle_port}"


def tuner_id(task_type: str, task_index: int) -> str:
    """The keras-tuner id of a replica's trials (never containing "chief", which means "serves the
    oracle")."""
    return "tuner-primary" if task_type == "chief" else f"tuner-{task_type}-{task_index}"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolve_role(cluster: Cluster) -> TunerRole:
    """The role of this replica: alone, the chief (serves the oracle at its cluster address) or a
    worker."""
    if cluster.task_type not in ("chief", "worker"):
        raise UserInputError(
            cluster.source,
            f"this replica is a {cluster.task_type!r}; tuning runs trials on chief "
            "and worker replicas only. Remove the other worker pools.",
        )
    if not cluster.is_multi_worker:
        return TunerRole(distributed=False, serves_oracle=True, tuner_id=SINGLE_TUNER_ID)
    chief_type = "chief" if cluster.cluster.get("chief") else "worker"
    address = cluster.cluster[chief_type][0]
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise UserInputError(
            cluster.source, f"the chief's address {address!r} has no port (expected host:port)"
        )
    replicas = [(t, i) for t in ("chief", "worker") for i in range(len(cluster.cluster.get(t, ())))]
    me = (cluster.task_type, cluster.task_index)
    return TunerRole(
        distributed=True,
        serves_oracle=cluster.is_chief,
        tuner_id=tuner_id(*me),
        oracle_host=host.strip("[]"),
        oracle_port=int(port),
        remote_tuner_ids=tuple(tuner_id(*r) for r in replicas if r != me)
        if cluster.is_chief
        else (),
        task_type=cluster.task_type,
        task_index=cluster.task_index,
        num_replicas=len(replicas),
    )


@contextlib.contextmanager
def environment(
    role: TunerRole, tuner_id_now: str | None = None
) -> Iterator[Callable[[str], None]]:
    """KERASTUNER_* set for `role` within the block (cleared for a single replica), restored
    afterwards.

    Yields a function that changes KERASTUNER_TUNER_ID (the chief builds its tuner as the oracle's
    host, "chief", then runs trials under its own id).
    """
    saved = {k: os.environ.pop(k, None) for k in ENV_VARS}  # cleared; put back at the end

    def set_tuner_id(value: str) -> None:
        if role.distributed:
            os.environ["KERASTUNER_TUNER_ID"] = value

    if role.distributed:
        os.environ["KERASTUNER_ORACLE_IP"] = role.oracle_host
        os.environ["KERASTUNER_ORACLE_PORT"] = str(role.oracle_port)
        set_tuner_id(tuner_id_now or role.tuner_id)
    try:
        yield set_tuner_id
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
