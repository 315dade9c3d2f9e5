"""What a TFX pipeline becomes on this image: the plan the DSL hands to the KFP builder.

The DSL (`tfx_dsl`) reads the user's `Pipeline` and writes a `Plan`; the KFP side (`tfx_kfp`)
reads only the `Plan`. Each TFX node is a `Step` (a component of this image), is folded into one
(its id listed in that step's `folds`), or is a `NotRun` with the reason. Parameter values are
plain JSON values (protos already written as the JSON text the component's parameter takes) or a
`ParameterRef` to a pipeline parameter.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

# Components a Step may name: the image's components (components/<name>/component.yaml) and the
# two steps that have no verb of their own.
COMPONENTS = (
    "import_examples",
    "transform",
    "tuner",
    "trainer",
    "evaluator",
    "infra_validator",
    "pusher",
    "bulk_inferrer",
    "importer",  # KFP's dsl.importer: parameters artifact_uri, artifact_type, properties
    "resolver",  # reads the records evaluate/push leave under pipeline_root
)
# An OutputRef to an importer or resolver step names TFX's output key: an Importer's `result`
# (or its output_key), ImportSchemaGen's `schema`, a Resolver's channel names (`model`, ...).


@dataclasses.dataclass(frozen=True)
class OutputRef:
    """An input fed by another step's output artifact.

    Attributes:
      step: the producing `Step.id`.
      output: the producing component's output name (e.g. `model`, `blessing`).
    """

    step: str
    output: str


@dataclasses.dataclass(frozen=True)
class ParameterRef:
    """A parameter value taken from the pipeline parameter `name` (a TFX RuntimeParameter)."""

    name: str


@dataclasses.dataclass(frozen=True)
class RunWhen:
    """A step runs only when `step`'s output parameter `output` equals `equals` (a TFX Cond)."""

    step: str
    output: str
    equals: Any


@dataclasses.dataclass(frozen=True)
class Step:
    """One component of this image in the pipeline.

    Attributes:
      id: the TFX node id (`Trainer`, `Trainer.mnist`, ...); unique in the plan.
      component: one of `COMPONENTS`.
      inputs: component input artifact name -> the output that feeds it.
      parameters: component parameter name -> JSON value or `ParameterRef`.
      run_when: conditions that must all hold (nested `Cond`s).
      folds: ids of TFX nodes this step also stands for (SchemaGen folded into import_examples).
      after: ids of steps that must finish first though no input joins them (TFX's
        `add_upstream_node`, a Resolver channel's `producer_component_id`).
    """

    id: str
    component: str
    inputs: Mapping[str, OutputRef] = dataclasses.field(default_factory=dict)
    parameters: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    run_when: tuple[RunWhen, ...] = ()
    folds: tuple[str, ...] = ()
    after: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class NotRun:
    """A TFX node that does not run here, and why (printed by `plan`, logged by the runners)."""

    id: str
    tfx_component: str
    reason: str


@dataclasses.dataclass(frozen=True)
class PipelineParameter:
    """A pipeline parameter (TFX RuntimeParameter): `ptype` is `str`, `int` or `float`."""

    name: str
    ptype: str
    default: Any = None


@dataclasses.dataclass(frozen=True)
class Plan:
    """A TFX pipeline as this image runs it; steps in an order where producers come first.

    Attributes:
      name: the pipeline name.
      root: the pipeline root (local path or gs://).
      enable_cache: TFX's `enable_cache`, mapped to KFP caching.
      steps: the steps that run.
      not_run: the nodes that do not.
      parameters: the pipeline parameters.
      beam_pipeline_args: the pipeline's `beam_pipeline_args`, for the Beam-running steps.
      notices: lines the runners log (e.g. metadata_connection_config not used).
      python_path: folders a step's dotted module name (`module_file` such as
        `models.preprocessing`, TFX's `preprocessing_fn=`/`run_fn=` paths) is imported from: the
        pipeline file's folder, as `python FILE` has it on sys.path.
    """

    name: str
    root: str
    enable_cache: bool = False
    steps: tuple[Step, ...] = ()
    not_run: tuple[NotRun, ...] = ()
    parameters: tuple[PipelineParameter, ...] = ()
    beam_pipeline_args: tuple[str, ...] = ()
    notices: tuple[str, ...] = ()
    python_path: tuple[str, ...] = ()
