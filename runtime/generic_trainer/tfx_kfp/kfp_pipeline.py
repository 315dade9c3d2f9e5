"""A `Plan` as a KFP pipeline: one task of this image's components per step, compiled by kfp.

Each `Step` becomes a task of its component (display name: the TFX node id), fed by the outputs
its `inputs` name; a `ParameterRef` becomes a pipeline parameter, `run_when` nested `dsl.If`s on the
producer's output parameter (the evaluator's and infra-validator's `blessed`), `importer` steps
`dsl.importer`, and `enable_cache` each task's KFP caching (the resolver is never cached: it must
read the records as they are when it runs). Under `records_dir(plan)` every evaluator records the
model it blesses, every transform its updated analyzer cache and every pusher the model it pushes
(model_records.py); a resolver reads those records.

kfp is imported inside the functions.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from generic_trainer.tfx_dsl.steps import ParameterRef, Plan, RunWhen, Step

# A component name of `steps.COMPONENTS` -> its kfp component for the image being built.
Components = Mapping[str, Any]
BEAM_COMPONENTS = ("import_examples", "transform", "evaluator", "bulk_inferrer")
RECORDS = "generic-trainer-records"
# TFX's strategy (tfx_dsl's parameter) -> the resolve verb's --strategy
RESOLVER_STRATEGIES = {
    "LatestBlessedModelStrategy": "latest_blessed_model",
    "latest_blessed_model": "latest_blessed_model",
    "LatestArtifactStrategy": "latest_artifact",
}
# What the resolve step cannot honour yet, and why (named in the refusal).
NOT_RESOLVED = {
    "SpanRangeStrategy": (
        "SpanRangeStrategy is not run here: the Examples of earlier runs are not recorded by "
        "span, and the resolve step hands on one artifact, not a range of spans (give "
        "ExampleGen the span to read with its input_config {SPAN} and range_config instead)"
    ),
}
RECORDING = ("evaluator", "transform", "pusher", "resolver")  # the components given records_dir
_PTYPES = {"str": str, "int": int, "float": float}
_ARTIFACT_CLASSES = {
    "Model": "Model",
    "Examples": "Dataset",
    "Dataset": "Dataset",
    "Metrics": "Metrics",
    "HTML": "HTML",
}


def records_dir(plan: Plan) -> str:
    """Where the plan's evaluators leave their records and its resolvers read them.

    Args:
      plan: the plan.

    Returns:
      `<pipeline_root>/generic-trainer-records/<pipeline name>`.
    """
    return f"{plan.root.rstrip('/')}/{RECORDS}/{plan.name}"


def pipeline_function(plan: Plan, components: Components) -> Callable[..., Any]:
    """The `@dsl.pipeline` function of `plan` (compile it, or call it under kfp.local).

    Args:
      plan: the plan (steps with producers first).
      components: component name -> kfp component (see `Components`).

    Returns:
      The kfp pipeline.
    """
    from kfp import dsl

    signature = pipeline_parameters(plan, components)
    names = [p.name for p in plan.parameters]

    def body(*channels: Any) -> None:
        arguments = dict(zip(names, channels, strict=True))
        tasks: dict[str, Any] = {}
        for step in plan.steps:
            with _conditions(step.run_when, tasks):
                tasks[step.id] = _task(plan, step, tasks, arguments, components)

    body.__name__ = body.__qualname__ = "pipeline"
    body.__signature__ = signature  # type: ignore[attr-defined]
    return dsl.pipeline(name=plan.name, pipeline_root=plan.root)(body)


def pipeline_parameters(plan: Plan, components: Components) -> inspect.Signature:
    """The KFP pipeline's parameters: one per RuntimeParameter, its name made a Python name.

    A `str` RuntimeParameter that feeds a dict or list input (TFX's `train_args` as JSON text)
    becomes a dict or list parameter, its default the JSON it holds.

    Args:
      plan: the plan.
      components: component name -> kfp component.

    Returns:
      The pipeline function's signature.
    """
    structs = {}
    for step in plan.steps:
        spec = getattr(components.get(step.component), "component_spec", None)
        for name, value in step.parameters.items():
            kind = spec.inputs[name].type if spec and name in (spec.inputs or {}) else None
            if isinstance(value, ParameterRef) and kind in ("Dict", "List"):
                structs[value.name] = dict if kind == "Dict" else list
    parameters = []
    for p in plan.parameters:
        annotation: Any = structs.get(p.name) or _PTYPES.get(p.ptype, str)
        default = p.default
        if annotation in (dict, list) and isinstance(default, str):
            default = json.loads(default)
        parameters.append(
            inspect.Parameter(
                p.name.replace("-", "_"),
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                default=inspect.Parameter.empty if default is None else default,
                annotation=annotation,
            )
        )
    return inspect.Signature(parameters)


@contextlib.contextmanager
def _conditions(conditions: tuple[RunWhen, ...], tasks: Mapping[str, Any]) -> Iterator[None]:
    from kfp import dsl

    with contextlib.ExitStack() as stack:
        for cond in conditions:
            produced = tasks[cond.step].outputs[cond.output]
            name = f"{cond.step} {cond.output} == {cond.equals!r}"
            stack.enter_context(dsl.If(produced == _condition_value(cond.equals), name=name))
        yield


def _condition_value(equals: Any) -> Any:
    """TFX compares the blessing's `blessed` property with 1; the output parameter is a bool."""
    return bool(equals) if isinstance(equals, int | float) and equals in (0, 1) else equals


def _value(value: Any, arguments: Mapping[str, Any]) -> Any:
    return arguments[value.name] if isinstance(value, ParameterRef) else value


def _task(
    plan: Plan,
    step: Step,
    tasks: Mapping[str, Any],
    arguments: Mapping[str, Any],
    components: Components,
) -> Any:
    """The kfp task of `step`, named after its TFX node, cached as the plan says."""
    values = {name: _value(v, arguments) for name, v in step.parameters.items()}
    if step.component == "importer":
        return _importer(step, values, plan.enable_cache)
    if step.component == "resolver":
        values = _resolver_parameters(step, values)
    component = components[step.component]
    declared = set(component.component_spec.inputs or {})
    declared |= set(component.component_spec.outputs or {})
    values.update({n: _output(tasks, step, n, ref) for n, ref in step.inputs.items()})
    if step.component in BEAM_COMPONENTS and "beam_pipeline_args" in declared:
        values.setdefault("beam_pipeline_args", list(plan.beam_pipeline_args))
    if step.component in RECORDING and "records_dir" in declared:
        values.setdefault("records_dir", records_dir(plan))
    unknown = sorted(set(values) - declared)
    if unknown:
        raise ValueError(f"step {step.id}: {step.component} takes no {', '.join(unknown)}")
    try:
        task = component(**values)
    except TypeError as error:  # a required input the node was not given
        from generic_trainer.errors import UserInputError

        raise UserInputError(step.id, f"cannot run as {step.component}: {error}") from None
    task.set_display_name(step.id)
    task.set_caching_options(plan.enable_cache and step.component != "resolver")
    for before in step.after:
        if before in tasks:
            task.after(tasks[before])
    return task


def _output(tasks: Mapping[str, Any], step: Step, name: str, ref: Any) -> Any:
    """The producer's output `ref` names: an importer's one artifact (TFX's `result`), a
    resolver's one artifact (`model`, whatever its channel's name), any other component's output
    of that name."""
    producer = tasks[ref.step]
    outputs = producer.outputs
    if "artifact" in outputs and len(outputs) == 1:  # dsl.importer
        return producer.output
    if set(outputs) == {"model", "found"}:  # the resolver
        return outputs["model"]
    if ref.output not in outputs:
        raise ValueError(
            f"step {step.id}: input {name}: {ref.step} has no output {ref.output!r} here "
            f"(it has {', '.join(sorted(outputs))})"
        )
    return outputs[ref.output]


def _resolver_parameters(step: Step, values: Mapping[str, Any]) -> dict[str, Any]:
    """The resolve component's parameters for a Resolver step (tfx_dsl names TFX's strategy)."""
    from generic_trainer.errors import UserInputError

    strategy = str(values.get("strategy", ""))
    if strategy not in RESOLVER_STRATEGIES:
        reason = NOT_RESOLVED.get(strategy) or (
            f"{strategy}: the resolve step resolves "
            "LatestBlessedModelStrategy and LatestArtifactStrategy"
        )
        raise UserInputError(f"{step.id}.strategy_class", reason)
    kept = {"strategy": RESOLVER_STRATEGIES[strategy]}
    if kept["strategy"] == "latest_artifact":
        kept["artifact_type"] = _latest_artifact_type(step, values)
    if values.get("pipeline_root") and values.get("pipeline_name"):
        root = str(values["pipeline_root"]).rstrip("/")
        kept["records_dir"] = f"{root}/{RECORDS}/{values['pipeline_name']}"
    return kept


def _latest_artifact_type(step: Step, values: Mapping[str, Any]) -> str:
    """The one artifact type a LatestArtifactStrategy resolver resolves; refuses what the
    records cannot honour (several channels, a producer filter, a type no step records)."""
    from generic_trainer.errors import UserInputError
    from generic_trainer.tfx_kfp.model_records import RECORDED

    types = dict(values.get("artifact_types") or {})
    if len(types) != 1:
        raise UserInputError(
            step.id,
            f"LatestArtifactStrategy over {len(types)} channels ({', '.join(types)}): the "
            "resolve step resolves one channel; give each its own Resolver",
        )
    (key, kind), producers = next(iter(types.items())), values.get("producers") or {}
    if producers:
        raise UserInputError(
            f"{step.id}.{key}",
            f"producer_component_id={producers[key]!r} cannot be honoured: the records are "
            "kept per pipeline and artifact type, not per producing node; leave it out",
        )
    if kind not in RECORDED:
        recorded = ", ".join(f"{k} (recorded by {v})" for k, v in RECORDED.items())
        raise UserInputError(
            f"{step.id}.{key}",
            f"LatestArtifactStrategy of {kind} is not run here: no step records {kind} "
            f"artifacts for later runs; it resolves {recorded}",
        )
    return str(kind)


def _importer(step: Step, values: Mapping[str, Any], enable_cache: bool) -> Any:
    """TFX's Importer: KFP's dsl.importer of the URI, typed as the TFX artifact type says."""
    from kfp import dsl

    kind = str(values.get("artifact_type", "Artifact")).rsplit(".", 1)[-1]
    task = dsl.importer(
        artifact_uri=values["artifact_uri"],
        artifact_class=getattr(dsl, _ARTIFACT_CLASSES.get(kind, "Artifact")),
        reimport=bool(values.get("reimport", False)),
        metadata=dict(values.get("properties") or {}),
    )
    task.set_display_name(step.id)
    task.set_caching_options(enable_cache)
    return task


def compile_plan(plan: Plan, components: Components, output: str) -> str:
    """Compile `plan` with kfp's own compiler into `output` (YAML, or JSON for a .json name).

    Args:
      plan: the plan.
      components: component name -> kfp component for the image.
      output: the pipeline file to write.

    Returns:
      `output`.
    """
    import tempfile

    from kfp import compiler

    from generic_trainer.artifacts import files

    suffix = ".json" if output.endswith(".json") else ".yaml"
    with tempfile.TemporaryDirectory(prefix="compile-") as work:
        staged = os.path.join(work, "pipeline" + suffix)
        compiler.Compiler().compile(pipeline_function(plan, components), staged)
        with open(staged, encoding="utf-8") as f:
            files.write_file_atomic(output, f.read())  # whole or not at all
    return output
