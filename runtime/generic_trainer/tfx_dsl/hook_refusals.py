"""The `tfx` imports refused on purpose, each with why and what to do instead.

`tfx_hook` names the reason when a file imports one of these paths (or a name below it); any
other unknown `tfx` import gets the generic advice. Longest prefix wins.
"""

from __future__ import annotations

_CUSTOM = (
    "TFX's custom components (BaseComponent, executor classes, component specs, container "
    "components) are not run here: this image runs its own components only. Run that work "
    "before or after the pipeline, or add it as a KFP component beside this image's steps in "
    "the pipeline file KubeflowV2DagRunner writes"
)
_CLOUD = (
    "the AI Platform / Vertex executors run TFX's own containers and are not provided: use "
    "tfx.components.Trainer / Pusher (this image's train / push steps); the pipeline "
    "KubeflowV2DagRunner writes runs on Vertex AI Pipelines as it is"
)
_BIG_QUERY = (
    "the BigQuery components are cloud-only and not provided: export the table to CSV or "
    "TFRecord files and read them with CsvExampleGen / ImportExampleGen"
)
_MODEL_VALIDATOR = (
    "ModelValidator is deprecated in TFX and not run here: an Evaluator with thresholds in its "
    "eval_config (tfma.MetricThreshold) blesses the model, and the Pusher takes its `blessing`"
)

REFUSED: dict[str, str] = {
    "tfx.components.ModelValidator": _MODEL_VALIDATOR,
    "tfx.components.model_validator": _MODEL_VALIDATOR,
    "tfx.components.experimental.data_view": (
        "TFX's experimental DataView (a TFX-IO view of the examples, the ranking example's "
        "DataViewBinder and DataViewProvider) is not supported: this image's steps read the "
        "examples through their schema; give the Trainer the ExampleGen's or Transform's "
        "examples"
    ),
    "tfx.components.trainer.executor.Executor": (
        "TFX 1.21 has no such executor (the Estimator trainer_fn executor is gone): the "
        "Trainer runs the module's run_fn (GenericExecutor, TFX's default)"
    ),
    "tfx.dsl.components.base": _CUSTOM,
    "tfx.dsl.component.experimental.container_component": _CUSTOM,
    "tfx.dsl.component.experimental.placeholders": _CUSTOM,
    "tfx.types.component_spec": _CUSTOM,
    "tfx.types.experimental.simple_artifacts": _CUSTOM,
    "tfx.components.example_gen": (
        "TFX's ExampleGen executors (a custom ExampleGen, FileBasedExampleGen with a custom "
        "executor) are not run here: write the data as CSV or TFRecord files and read them with "
        "CsvExampleGen / ImportExampleGen"
    ),
    "tfx.orchestration.airflow": (
        "Airflow cannot run here: only AirflowDagRunner and AirflowPipelineConfig are given, "
        "so that `tfx-pipeline plan` shows the pipeline"
    ),
    "tfx.orchestration.kubeflow.base_component": _CUSTOM,
    "tfx.extensions.google_cloud_ai_platform": _CLOUD,
    "tfx.v1.extensions.google_cloud_ai_platform.BulkInferrer": (
        "the cloud BulkInferrer sends the examples to an AI Platform / Vertex AI model: use "
        "tfx.components.BulkInferrer (this image's bulk-infer step)"
    ),
    "tfx.extensions.google_cloud_big_query": _BIG_QUERY,
    "tfx.v1.extensions.google_cloud_big_query": _BIG_QUERY,
    "tfx.orchestration.experimental.interactive": (
        "InteractiveContext runs TFX's own executors in a notebook and is not provided: build "
        "a Pipeline and run it with tfx.orchestration.LocalDagRunner (`generic-trainer "
        "tfx-pipeline run FILE`)"
    ),
    "tfx.orchestration.portable": (
        "TFX's portable orchestrator and its ML Metadata store are not kept here: KFP keeps the "
        "pipeline's metadata; the outputs lie under the pipeline_root"
    ),
    "tfx.utils.dsl_utils": (
        "dsl_utils (csv_input, tfrecord_input) was removed in TFX 1.0: give the ExampleGen the "
        "folder itself, CsvExampleGen(input_base=folder)"
    ),
}


def reason_for(name: str) -> str | None:
    """Why the import `name` is refused, or None when it is not refused on purpose.

    Args:
      name: the dotted import (`tfx.dsl.components.base.base_component`).

    Returns:
      The reason and what to do, or None.
    """
    for prefix in sorted(REFUSED, key=len, reverse=True):
        if name == prefix or name.startswith(prefix + "."):
            return REFUSED[prefix]
    return None


def on_the_way(name: str) -> bool:
    """Whether `name` is a package above a refused path (`tfx.components.experimental`): it
    imports as an empty stand-in, so that the refused name below is the one the error names."""
    return any(prefix.startswith(name + ".") for prefix in REFUSED)
