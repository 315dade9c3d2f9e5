"""kfp.local's `dsl.If` on a named output parameter of a task, made to work (kfp 2.17).

kfp.local's condition evaluator (`orchestrator.enhanced_dag_orchestrator.ConditionEvaluator`)
finds a task's output in a condition only when the output is called `Output`; a named one
(`pipelinechannel--generic-evaluator-blessed`) is looked up as a pipeline input, not found, and
the condition silently taken as false: the pusher under TFX's Cond would never run. Within
`named_outputs_in_conditions()`, a reference kfp.local cannot resolve is read as
`<task>-<output>`, split at its last dash (output names are Python identifiers: no dash).
Pinned to kfp 2.17 (host_tasks.py checks the version).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

PREFIX = "pipelinechannel--"


def task_output(channel_ref: str, io_store: Any) -> Any:
    """The value of `pipelinechannel--<task>-<output>` in `io_store`; None when there is none.

    Args:
      channel_ref: the condition's channel reference.
      io_store: kfp.local's IOStore of the DAG evaluating the condition.

    Returns:
      The task's output parameter value, or None.
    """
    task, _, output = channel_ref.removeprefix(PREFIX).rpartition("-")
    if not task or not output:
        return None
    try:
        return io_store.get_task_output(task, output)
    except (ValueError, KeyError):
        return None


@contextlib.contextmanager
def named_outputs_in_conditions() -> Iterator[None]:
    """Within the block, kfp.local's conditions read named task outputs too.

    Yields:
      Nothing.
    """
    from kfp.local.orchestrator import enhanced_dag_orchestrator

    evaluator = enhanced_dag_orchestrator.ConditionEvaluator
    original = evaluator.__dict__["_resolve_pipeline_channel"]

    def resolve(channel_ref: str, io_store: Any) -> Any:
        value = original.__func__(channel_ref, io_store)
        return task_output(channel_ref, io_store) if value is None else value

    evaluator._resolve_pipeline_channel = staticmethod(resolve)
    try:
        yield
    finally:
        evaluator._resolve_pipeline_channel = original
