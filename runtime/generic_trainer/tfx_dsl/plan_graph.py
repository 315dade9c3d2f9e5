"""The shape of a TFX pipeline for `plan`: node order, ids, Cond predicates, resolver channels."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from generic_trainer.errors import UserInputError
from generic_trainer.tfx_dsl.dsl import RuntimeParameter
from generic_trainer.tfx_dsl.nodes import BaseNode, OutputChannel, PropertyPlaceholder
from generic_trainer.tfx_dsl.steps import OutputRef, RunWhen

# The outputs whose `custom_property('blessed')` a Cond may test: node -> output key.
BLESSINGS = {"Evaluator": "blessing", "InfraValidator": "blessing"}


def check_pipeline(pipeline: Any) -> None:
    """Refuse a Pipeline this image cannot take as a whole (named arguments, ids)."""
    if not isinstance(pipeline.pipeline_name, str) or not pipeline.pipeline_name:
        raise UserInputError("pipeline_name", "a non-empty string is needed")
    if isinstance(pipeline.pipeline_root, RuntimeParameter) or not isinstance(
        pipeline.pipeline_root, str
    ):
        raise UserInputError("pipeline_root", "a path or URI string is needed here")
    for name in getattr(pipeline, "unsupported", {}):
        raise UserInputError(f"Pipeline.{name}", "is not supported on this image")
    seen: set[str] = set()
    for node in pipeline.components:
        if not isinstance(node, BaseNode):
            raise UserInputError("Pipeline.components", f"{node!r} is not a TFX node")
        if node.id in seen:
            raise UserInputError(node.id, "two nodes have this id: give one `.with_id(...)`")
        seen.add(node.id)


def _dependencies(node: BaseNode, by_id: dict[str, BaseNode]) -> set[str]:
    """The ids of the nodes `node` must follow; refuses a producer missing from the pipeline."""
    found = {n.id for n in node.upstream_nodes}
    channels = list(node.inputs.items()) + [
        (f"Cond({predicate!r})", predicate.left.channel) for predicate in node.conditions
    ]
    for argument, channel in channels:
        producer = channel.producer_component_id
        if producer is None:
            continue
        if producer not in by_id or (
            isinstance(channel, OutputChannel) and by_id[producer] is not channel.producer
        ):
            raise UserInputError(
                f"{node.id}.{argument}",
                f"it comes from {producer}, which is not in the Pipeline's components",
            )
        found.add(producer)
    return found & set(by_id)


def ordered(components: Sequence[BaseNode]) -> list[BaseNode]:
    """The nodes with every producer before its consumers (TFX's order); ties keep the list's
    order. Refuses a cycle."""
    by_id = {node.id: node for node in components}
    waiting = {node.id: _dependencies(node, by_id) for node in components}
    done: list[BaseNode] = []
    while waiting:
        ready = [
            n for n in components if n.id in waiting and not waiting[n.id] - {d.id for d in done}
        ]
        if not ready:
            raise UserInputError(
                "Pipeline.components", f"a dependency cycle among {sorted(waiting)}"
            )
        for node in ready:
            done.append(node)
            del waiting[node.id]
    return done


def run_when(node: BaseNode, ref: Callable[[BaseNode, str, Any], OutputRef]) -> list[RunWhen]:
    """The node's `Cond`s as RunWhens on a blessing's `blessed` output parameter."""
    found = []
    for predicate in node.conditions:
        left = predicate.left
        channel = left.channel
        producer = getattr(channel, "producer", None)
        expected = BLESSINGS.get(getattr(producer, "TFX_NAME", ""))
        supported = (
            isinstance(left, PropertyPlaceholder)
            and left.name == "blessed"
            and predicate.op == "=="
            and channel.output_key == expected
            and isinstance(predicate.right, int)
        )
        if not supported:
            raise UserInputError(
                f"{node.id}.Cond",
                f"{predicate!r}: a Cond here tests an Evaluator's or InfraValidator's "
                "blessing: `.outputs['blessing'].future()[0].custom_property('blessed') == 1`",
            )
        source = ref(node, f"Cond({predicate!r})", channel)
        found.append(RunWhen(step=source.step, output="blessed", equals=int(predicate.right)))
    return found


def check_strategy(node: Any, name: str) -> None:
    """Refuse a Resolver whose channels do not fit its strategy."""
    types = {key: channel.type_name for key, channel in node.inputs.items()}
    if name == "LatestBlessedModelStrategy":
        wanted = {"Model", "ModelBlessing"}
        if sorted(types.values()) != sorted(wanted):
            raise UserInputError(
                node.id,
                f"LatestBlessedModelStrategy takes one Model and one ModelBlessing "
                f"channel, got {types}",
            )
    if name == "SpanRangeStrategy" and set(types.values()) != {"Examples"}:
        raise UserInputError(node.id, f"SpanRangeStrategy takes Examples channels, got {types}")
    if not types:
        raise UserInputError(node.id, "a Resolver needs at least one channel")
