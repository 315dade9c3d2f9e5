"""TensorFlow's coordination service given a registration deadline while a strategy starts.

Assumes (tensorflow 2.16 to 2.21): `context.context()._coordination_service_config` holds the
`CoordinationServiceConfig` proto that `configure_coordination_service` builds and
`coordination_service` returns; `MultiWorkerMirroredStrategy()` reads it once, when it configures
the context (it configures its own, with no deadline, when it is None), and nothing reads it
after. So the patch is applied around the strategy's construction and undone after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from generic_trainer.compat.base import Patch, Versions


class CoordinationDeadline(Patch):
    """The leader and every replica give up when the cluster has not registered in `timeout_ms`.

    Args:
        leader: the service leader's task, e.g. "/job:chief/replica:0/task:0".
        jobs: (job name, task count) of the jobs that register (chief, worker).
        timeout_ms: the registration deadline; with `cluster_register_with_barrier` the leader,
            too, gives up when a replica never registers.
    """

    versions = (Versions("tensorflow", "2.16", "2.22"),)
    lost = "a replica that never connects is waited for until the watchdog ends the run"

    def __init__(self, leader: str, jobs: Sequence[tuple[str, int]], timeout_ms: int):
        super().__init__()
        self.leader, self.jobs, self.timeout_ms = leader, tuple(jobs), timeout_ms

    def missing(self) -> list[str]:
        from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2
        from tensorflow.python.eager import context

        found = []
        if not hasattr(context.context(), "_coordination_service_config"):
            found.append("Context._coordination_service_config")
        fields = coordination_config_pb2.CoordinationServiceConfig.DESCRIPTOR.fields_by_name
        if "cluster_register_with_barrier" not in fields:
            found.append("CoordinationServiceConfig.cluster_register_with_barrier")
        return found

    def replacements(self) -> list[tuple[Any, str, Any]]:
        from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2 as pb
        from tensorflow.python.eager import context

        config = pb.CoordinationServiceConfig(
            service_type="standalone",
            service_leader=self.leader,
            enable_health_check=True,  # configure_coordination_service's default
            cluster_register_timeout_in_ms=self.timeout_ms,
            cluster_register_with_barrier=True,
            coordinated_job_list=[pb.CoordinatedJob(name=n, num_tasks=k) for n, k in self.jobs],
        )
        return [(context.context(), "_coordination_service_config", config)]
