"""This replica's place in the cluster: a `Cluster` from TF_CONFIG or CLUSTER_SPEC.

Vertex AI sets CLUSTER_SPEC (worker pools `workerpool0..3`) and usually TF_CONFIG; Kubeflow's
TFJob sets TF_CONFIG. Both become one `Cluster`. The request builders (intake) call `resolve` with
the environment they were given; nothing below them reads it. No TensorFlow here.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

from generic_trainer.artifacts import bounded_parse
from generic_trainer.errors import UserInputError

# Vertex worker pools -> TensorFlow task types.
_POOL_TO_TASK = {
    "workerpool0": "chief",
    "workerpool1": "worker",
    "workerpool2": "ps",
    "workerpool3": "evaluator",
}
TRAINING_TYPES = ("chief", "worker")


@dataclasses.dataclass(frozen=True)
class Cluster:
    """The training cluster as TensorFlow sees it (`cluster` uses chief/worker/ps/evaluator)."""

    cluster: Mapping[str, tuple[str, ...]]
    task_type: str
    task_index: int
    source: str  # "TF_CONFIG", "CLUSTER_SPEC" or "none"

    @property
    def num_workers(self) -> int:
        """Replicas that train: the chief and the workers."""
        return sum(len(self.cluster.get(t, ())) for t in TRAINING_TYPES)

    @property
    def is_multi_worker(self) -> bool:
        return self.num_workers > 1

    @property
    def is_chief(self) -> bool:
        """The chief publishes outputs; with no chief in the cluster, worker 0 does."""
        if self.task_type == "chief":
            return True
        return self.task_type == "worker" and self.task_index == 0 and not self.cluster.get("chief")

    def tf_config(self) -> dict:
        """TF_CONFIG as TensorFlow's cluster resolver reads it."""
        return {
            "cluster": {k: list(v) for k, v in self.cluster.items()},
            "task": {"type": self.task_type, "index": self.task_index},
        }


SINGLE = Cluster(cluster={}, task_type="chief", task_index=0, source="none")


def _normalize(
    cluster: Mapping[str, list], task_type: str, task_index: int, source: str
) -> Cluster:
    rename = {"master": "chief"}
    spec = {rename.get(k, k): tuple(v) for k, v in cluster.items() if v}
    task_type = rename.get(task_type, task_type)
    if task_type not in spec:
        raise UserInputError(
            source, f"task type {task_type!r} is not in the cluster {sorted(spec)}"
        )
    if not 0 <= task_index < len(spec[task_type]):
        raise UserInputError(source, f"task index {task_index} out of range for {task_type!r}")
    return Cluster(cluster=spec, task_type=task_type, task_index=task_index, source=source)


def _parse_json(name: str, value: str) -> dict:
    parsed = bounded_parse.load_json(value, name)
    if not isinstance(parsed, dict) or "cluster" not in parsed or "task" not in parsed:
        raise UserInputError(
            name, 'expected {"cluster": {...}, "task": {"type": ..., "index": ...}}'
        )
    return parsed


def configured(environ: Mapping[str, str] | None = None) -> bool:
    """Whether TF_CONFIG or CLUSTER_SPEC is set (not blank): this process is one replica of a
    cluster."""
    environ = os.environ if environ is None else environ
    return any(environ.get(name, "").strip() for name in ("TF_CONFIG", "CLUSTER_SPEC"))


def resolve(environ: Mapping[str, str] | None = None) -> Cluster:
    """The cluster from TF_CONFIG (preferred: TensorFlow's own form) or Vertex's CLUSTER_SPEC."""
    environ = os.environ if environ is None else environ
    if environ.get("TF_CONFIG", "").strip():
        cfg = _parse_json("TF_CONFIG", environ["TF_CONFIG"])
        if cfg["cluster"]:
            task = cfg["task"]
            return _normalize(
                cfg["cluster"], task.get("type", "worker"), int(task.get("index", 0)), "TF_CONFIG"
            )
    if environ.get("CLUSTER_SPEC", "").strip():
        cfg = _parse_json("CLUSTER_SPEC", environ["CLUSTER_SPEC"])
        cluster = {_POOL_TO_TASK.get(pool, pool): hosts for pool, hosts in cfg["cluster"].items()}
        task = cfg["task"]
        task_type = _POOL_TO_TASK.get(task.get("type", "workerpool0"), task.get("type"))
        return _normalize(cluster, task_type, int(task.get("index", 0)), "CLUSTER_SPEC")
    return SINGLE
