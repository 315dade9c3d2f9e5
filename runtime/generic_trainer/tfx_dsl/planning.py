"""`plan(pipeline)`: what each node of a TFX pipeline becomes on this image (a `steps.Plan`).

Each node becomes a step of one of this image's components (`plan_nodes.MAPPINGS`), an
`importer` (Importer, ImportSchemaGen) or a `resolver` (Resolver) step; SchemaGen is folded
into the import_examples step whose examples its statistics describe (`infer_feature_shape`
kept; its `schema` is that step's `output_schema`); StatisticsGen, ExampleValidator,
ExampleDiff and DistributionValidator are `NotRun` (they need TFDV, which cannot be installed
here), and a step that runs may not consume their outputs. A custom `@component`, a cloud-only
component or an argument the image cannot honour is refused with a UserInputError naming it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from generic_trainer.errors import UserInputError
from generic_trainer.tfx_dsl import cloud, plan_graph
from generic_trainer.tfx_dsl.custom import CustomComponentNode
from generic_trainer.tfx_dsl.dsl import Importer, Resolver, ResolverStrategy
from generic_trainer.tfx_dsl.nodes import BaseNode, Channel, OutputChannel
from generic_trainer.tfx_dsl.plan_nodes import MAPPINGS, OUTPUTS
from generic_trainer.tfx_dsl.plan_values import Values, local_path
from generic_trainer.tfx_dsl.steps import NotRun, OutputRef, Plan, Step

TFDV = (
    "TFDV (tensorflow-data-validation 1.21) cannot be installed on this image (no wheel for "
    "its Python)"
)
NOT_RUN = {
    "StatisticsGen": f"{TFDV}: no statistics are computed, and none are faked",
    "ExampleValidator": f"{TFDV}: the examples are not checked for anomalies",
    "ExampleDiff": f"{TFDV}: no example diff is computed",
    "DistributionValidator": f"{TFDV}: distributions are not validated",
}
STRATEGIES = ("LatestBlessedModelStrategy", "LatestArtifactStrategy", "SpanRangeStrategy")
SERVING_NOTICE = (
    "serving_spec is not used: the model is tried by TensorFlow in this image's sandboxed "
    "serving process, not in a TF Serving container"
)
METADATA_NOTICE = (
    "metadata_connection_config is not used: KFP keeps the pipeline's metadata "
    "(kfp.local's records, KFP's or Vertex's ML Metadata)"
)


class _Planner:
    """Builds the plan node by node, producers first."""

    def __init__(self, pipeline: Any):
        self.pipeline = pipeline
        self.values = Values()
        self.steps: dict[str, dict[str, Any]] = {}
        self.not_run: dict[str, NotRun] = {}
        self.outputs: dict[tuple[str, str], OutputRef | NotRun] = {}
        self.stands_for: dict[str, str] = {}  # a folded node's id -> its step's id
        self.notices: list[str] = []

    def add(self, node: BaseNode) -> None:
        """Map one node (see the module doc)."""
        name = getattr(node, "TFX_NAME", type(node).__name__)
        if isinstance(node, CustomComponentNode):
            raise UserInputError(
                node.id,
                f"a custom @component function ({node.function_name}) "
                "cannot run here: this image runs its own components only",
            )
        if getattr(node, "CLOUD", False):
            raise UserInputError(node.id, cloud.REFUSALS[name])
        if name in NOT_RUN:
            self.not_run[node.id] = NotRun(node.id, name, NOT_RUN[name])
            for key in node.outputs:
                self.outputs[(node.id, key)] = self.not_run[node.id]
        elif name == "SchemaGen":
            self._fold_schema_gen(node)
        elif name == "ImportSchemaGen":
            uri = local_path(self.values.json(node.exec_properties["schema_file"], node.id))
            self._step(node, "importer", {}, {"artifact_uri": uri, "artifact_type": "Schema"})
        elif isinstance(node, Importer):
            self._importer(node)
        elif isinstance(node, Resolver):
            self._resolver(node)
        elif name in MAPPINGS:
            component, renames, parameters = MAPPINGS[name]
            self._step(node, component, renames, parameters(node, self.values))
            if name == "InfraValidator":
                self.notices.append(f"{node.id}: {SERVING_NOTICE}")
        else:
            raise UserInputError(
                node.id,
                f"{name} is not supported on this image (its "
                f"components: {', '.join(sorted(set(OUTPUTS)))})",
            )

    def _step(self, node: BaseNode, component: str, renames: dict, parameters: dict) -> None:
        inputs = {}
        wired = {} if component == "resolver" else node.inputs  # a Resolver's channels are queries
        for argument, channel in wired.items():
            source = self.ref(node, argument, channel)  # first: a node that does not run, named
            if argument not in renames:
                raise UserInputError(
                    f"{node.id}.{argument}",
                    f"this image's {component} has no input for TFX's {argument}",
                )
            inputs[renames[argument]] = source
        self.steps[node.id] = {
            "id": node.id,
            "component": component,
            "inputs": inputs,
            "parameters": {k: v for k, v in parameters.items() if v is not None},
            "run_when": plan_graph.run_when(node, self.ref),
            "folds": [],
            "after": self.after(node),
        }
        produced = OUTPUTS.get(component)
        for key in node.outputs:
            if produced is None or key in produced:
                self.outputs[(node.id, key)] = OutputRef(node.id, key)

    def ref(self, node: BaseNode, argument: str, channel: Channel) -> OutputRef:
        """The step output that feeds `node`'s `argument`, or a refusal naming why none does."""
        where = f"{node.id}.{argument}"
        if not isinstance(channel, OutputChannel):
            raise UserInputError(
                where,
                f"{channel!r} is produced by no node: only a Resolver "
                "takes a Channel(type=...) of its own",
            )
        source = self.outputs.get((channel.producer.id, channel.output_key))
        if isinstance(source, NotRun):
            raise UserInputError(
                where,
                f"it comes from {source.id} ({source.tfx_component}), "
                f"which does not run here: {source.reason}",
            )
        if source is None:
            raise UserInputError(
                where,
                f"{channel.producer.id}'s output "
                f"{channel.output_key!r} is not written by this image's step",
            )
        return source

    def after(self, node: BaseNode) -> list[str]:
        """The steps `node` waits for beyond its inputs (explicit upstream nodes)."""
        ids = [self.stands_for.get(n.id, n.id) for n in node.upstream_nodes]
        return sorted({i for i in ids if i in self.steps})

    def _fold_schema_gen(self, node: BaseNode) -> None:
        statistics = node.inputs["statistics"]
        producer = getattr(statistics, "producer", None)
        examples = producer.inputs.get("examples") if producer is not None else None
        source = (
            self.outputs.get((examples.producer.id, examples.output_key))
            if isinstance(examples, OutputChannel)
            else None
        )
        step = self.steps.get(source.step) if isinstance(source, OutputRef) else None
        if (
            producer.TFX_NAME != "StatisticsGen"
            or step is None
            or (step["component"] != "import_examples")
        ):
            raise UserInputError(
                f"{node.id}.statistics",
                "SchemaGen is folded into the "
                "import_examples step: its statistics must be a StatisticsGen's "
                "of an ExampleGen's examples",
            )
        if node.exec_properties.get("exclude_splits"):
            raise UserInputError(
                f"{node.id}.exclude_splits",
                "the schema is inferred from every split here; exclude_splits cannot be honoured",
            )
        shape = bool(node.exec_properties.get("infer_feature_shape", True))
        if step["folds"] and step["parameters"].get("infer_feature_shape") != shape:
            raise UserInputError(
                f"{node.id}.infer_feature_shape",
                "two SchemaGens of one ExampleGen differ in infer_feature_shape",
            )
        step["parameters"]["infer_feature_shape"] = shape
        step["folds"].append(node.id)
        self.stands_for[node.id] = step["id"]
        self.outputs[(node.id, "schema")] = OutputRef(step["id"], "output_schema")

    def _importer(self, node: Importer) -> None:
        props = node.exec_properties
        self._step(
            node,
            "importer",
            {},
            {
                "artifact_uri": local_path(self.values.json(props["source_uri"], node.id)),
                "artifact_type": node.artifact_type.TYPE_NAME,
                "properties": self.values.json(
                    {**props["properties"], **props["custom_properties"]}, f"{node.id}.properties"
                ),
                "reimport": props["reimport"],
            },
        )

    def _resolver(self, node: Resolver) -> None:
        strategy = node.strategy_class
        name = getattr(strategy, "NAME", None)
        is_strategy = isinstance(strategy, type) and issubclass(strategy, ResolverStrategy)
        if not is_strategy or name not in STRATEGIES:
            raise UserInputError(
                f"{node.id}.strategy_class",
                f"{strategy!r}: the resolver step knows {', '.join(STRATEGIES)}",
            )
        plan_graph.check_strategy(node, name)
        producers = {
            k: c.producer_component_id for k, c in node.inputs.items() if c.producer_component_id
        }
        parameters = {
            "strategy": name,
            "artifact_types": {k: c.type_name for k, c in node.inputs.items()},
            "producers": producers or None,
            "config": self.values.json(node.config, f"{node.id}.config") or None,
            "pipeline_name": self.pipeline.pipeline_name,
            "pipeline_root": local_path(self.pipeline.pipeline_root),
        }
        self._step(node, "resolver", {}, parameters)
        wait = {self.stands_for.get(p, p) for p in producers.values()} & set(self.steps)
        self.steps[node.id]["after"] = sorted(set(self.steps[node.id]["after"]) | wait)

    def notices_for(self, pipeline: Any) -> list[str]:
        if pipeline.metadata_connection_config is not None:
            self.notices.append(METADATA_NOTICE)
        if pipeline.platform_config is not None:
            self.notices.append("platform_config is not used (the steps' resources are KFP's)")
        return self.notices


def _dotted_modules(steps: Sequence[Step]) -> bool:
    """Whether a step names its module by a dotted name (TFX's `run_fn='models.model.run_fn'`)."""
    modules = [str(s.parameters.get("module_file", "")) for s in steps]
    return any(m and not m.endswith(".py") and "://" not in m for m in modules)


def plan(pipeline: Any, python_path: Sequence[str] | None = None) -> Plan:
    """What `pipeline` becomes on this image.

    Args:
      pipeline: a `tfx_dsl.dsl.Pipeline` (what the pipeline file handed to a runner).
      python_path: folders dotted module names are imported from; None: the folder of the
        script that built the pipeline (`Pipeline.source_dir`), when a step names one.

    Returns:
      The Plan, steps in an order where producers come first.

    Raises:
      UserInputError: a node or argument this image cannot run, named.
    """
    plan_graph.check_pipeline(pipeline)
    planner = _Planner(pipeline)
    for node in plan_graph.ordered(pipeline.components):
        planner.add(node)
    planner.notices_for(pipeline)
    steps = tuple(
        Step(
            **{
                **s,
                "run_when": tuple(s["run_when"]),
                "folds": tuple(s["folds"]),
                "after": tuple(s["after"]),
            }
        )
        for s in planner.steps.values()
    )
    if python_path is None:
        source = getattr(pipeline, "source_dir", None)
        python_path = [source] if source and _dotted_modules(steps) else []
    return Plan(
        name=pipeline.pipeline_name,
        root=local_path(pipeline.pipeline_root),
        enable_cache=bool(pipeline.enable_cache),
        steps=steps,
        not_run=tuple(planner.not_run.values()),
        parameters=tuple(planner.values.parameters.values()),
        beam_pipeline_args=tuple(pipeline.beam_pipeline_args),
        notices=tuple(planner.notices),
        python_path=tuple(python_path),
    )
