"""`render_plan(plan)`: the text `generic-trainer tfx-pipeline plan` prints, one block per node."""

from __future__ import annotations

import json
from typing import Any

from generic_trainer.tfx_dsl.steps import OutputRef, ParameterRef, Plan, Step

_WIDTH = 100


def _value(value: Any) -> str:
    if isinstance(value, ParameterRef):
        return f"<pipeline parameter {value.name}>"
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= 70 else text[:67] + "..."


def _step_lines(step: Step) -> list[str]:
    folded = f" (also stands for {', '.join(step.folds)})" if step.folds else ""
    lines = [f"{step.id}: runs as {step.component}{folded}"]
    for name, ref in sorted(step.inputs.items()):
        assert isinstance(ref, OutputRef)
        lines.append(f"    input {name} <- {ref.step}.{ref.output}")
    for name, value in sorted(step.parameters.items()):
        lines.append(f"    {name} = {_value(value)}")
    for when in step.run_when:
        lines.append(f"    runs only when {when.step}.{when.output} == {when.equals!r}")
    if step.after:
        lines.append(f"    after {', '.join(step.after)}")
    return lines


def render_plan(plan: Plan) -> str:
    """What each node of the pipeline becomes, for a person to read.

    Args:
      plan: the plan `tfx_dsl.plan.plan` made.

    Returns:
      Text: the pipeline's name, root and cache; each step with its inputs, parameters and
      conditions; each node that does not run, with why; the pipeline parameters and notices.
    """
    cache = "on" if plan.enable_cache else "off"
    lines = [f"pipeline {plan.name} (root {plan.root}, cache {cache})"]
    for step in plan.steps:
        lines.extend(_step_lines(step))
    for node in plan.not_run:
        lines.append(f"{node.id}: NOT RUN ({node.tfx_component}): {node.reason}")
    for parameter in plan.parameters:
        default = f", default {parameter.default!r}" if parameter.default is not None else ""
        lines.append(f"pipeline parameter {parameter.name} ({parameter.ptype}{default})")
    if plan.beam_pipeline_args:
        lines.append(f"beam_pipeline_args: {' '.join(plan.beam_pipeline_args)}")
    if plan.python_path:
        lines.append(f"dotted module names are imported from: {', '.join(plan.python_path)}")
    lines.extend(f"notice: {notice}" for notice in plan.notices)
    return "\n".join(lines) + "\n"
