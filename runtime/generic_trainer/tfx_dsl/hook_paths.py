"""The `tfx` (and `ml_metadata`) import paths TFX pipeline files use, for the `tfx` import hook.

`tfx_hook` merges `DSL_MODULES` into its table: stand-in module -> {attribute: (module,
attribute)}. The runner names point at `generic_trainer.tfx_kfp.runners` (the KFP side).
"""

from __future__ import annotations

from generic_trainer.tfx_dsl.artifacts import NAMES as _ARTIFACT_NAMES
from generic_trainer.tfx_dsl.components import SPECS

_DSL = "generic_trainer.tfx_dsl.dsl"
_NODES = "generic_trainer.tfx_dsl.nodes"
_ART = "generic_trainer.tfx_dsl.artifacts"
_COMP = "generic_trainer.tfx_dsl.components"
_CUSTOM = "generic_trainer.tfx_dsl.custom"
_CLOUD = "generic_trainer.tfx_dsl.cloud"
_PROTO_UTILS = "generic_trainer.tfx_dsl.proto_utils"
_EXECUTORS = "generic_trainer.tfx_dsl.executors"
RUNNERS = "generic_trainer.tfx_kfp.runners"
REFUSED_RUNNERS = "generic_trainer.tfx_kfp.refused_runners"

_COMPONENTS = {name: (_COMP, name) for name in SPECS if name != "FileBasedExampleGen"}
_ARTIFACTS = {name: (_ART, name) for name in _ARTIFACT_NAMES}
_METADATA = {
    name: (_DSL, name)
    for name in ("sqlite_metadata_connection_config", "mysql_metadata_connection_config")
}
_STRATEGIES = {
    name: (_DSL, name)
    for name in ("LatestBlessedModelStrategy", "LatestArtifactStrategy", "SpanRangeStrategy")
}
_ANNOTATIONS = {
    name: (_CUSTOM, name)
    for name in (
        "Parameter",
        "BeamComponentParameter",
        "InputArtifact",
        "OutputArtifact",
        "AsyncOutputArtifact",
        "OutputDict",
    )
}
_V2 = {name: (RUNNERS, name) for name in ("KubeflowV2DagRunner", "KubeflowV2DagRunnerConfig")}
_V1 = {
    name: (REFUSED_RUNNERS, name)
    for name in (
        "KubeflowDagRunner",
        "KubeflowDagRunnerConfig",
        "get_default_kubeflow_metadata_config",
    )
}
_AIRFLOW = {name: (REFUSED_RUNNERS, name) for name in ("AirflowDagRunner", "AirflowPipelineConfig")}
_CLOUD_KEYS = (
    "TRAINING_ARGS_KEY",
    "ENABLE_VERTEX_KEY",
    "VERTEX_REGION_KEY",
    "SERVING_ARGS_KEY",
    "VERTEX_CONTAINER_IMAGE_URI_KEY",
    "JOB_ID_KEY",
    "LABELS_KEY",
    "ENABLE_UCAIP_KEY",
    "UCAIP_REGION_KEY",
)
_CLOUD_EXPERIMENTAL_KEYS = (
    "TUNING_ARGS_KEY",
    "REMOTE_TRIALS_WORKING_DIR_KEY",
    "PUSHER_SERVING_ARGS_KEY",
    "ENDPOINT_ARGS_KEY",
)

DSL_MODULES: dict[str, dict[str, tuple[str, str]]] = {
    # tfx.v1
    "tfx.v1.dsl": {
        "Pipeline": (_DSL, "Pipeline"),
        "Channel": (_NODES, "Channel"),
        "Importer": (_DSL, "Importer"),
        "Resolver": (_DSL, "Resolver"),
        "Cond": (_NODES, "Cond"),
    },
    "tfx.v1.dsl.experimental": {"RuntimeParameter": (_DSL, "RuntimeParameter"), **_STRATEGIES},
    "tfx.v1.dsl.components": {"component": (_CUSTOM, "component"), **_ANNOTATIONS},
    "tfx.v1.components": _COMPONENTS,
    "tfx.v1.types": {"Channel": (_NODES, "Channel"), "BaseChannel": (_NODES, "Channel")},
    "tfx.v1.types.standard_artifacts": _ARTIFACTS,
    "tfx.v1.orchestration": {
        "LocalDagRunner": (RUNNERS, "LocalDagRunner"),
        "BeamDagRunner": (RUNNERS, "BeamDagRunner"),
    },
    "tfx.v1.orchestration.metadata": _METADATA,
    "tfx.v1.orchestration.experimental": {**_V2, **_V1},
    "tfx.v1.extensions": {},
    "tfx.v1.extensions.google_cloud_ai_platform": {
        **{name: (_CLOUD, name) for name in ("Trainer", "Pusher", "Tuner")},
        **{key: (_CLOUD, key) for key in _CLOUD_KEYS},
    },
    "tfx.v1.extensions.google_cloud_ai_platform.experimental": {
        key: (_CLOUD, key) for key in _CLOUD_EXPERIMENTAL_KEYS
    },
    # legacy paths
    "tfx.components": _COMPONENTS,
    "tfx.orchestration": {
        "LocalDagRunner": (RUNNERS, "LocalDagRunner"),
        "BeamDagRunner": (RUNNERS, "BeamDagRunner"),
    },
    "tfx.orchestration.pipeline": {"Pipeline": (_DSL, "Pipeline")},
    "tfx.orchestration.metadata": _METADATA,
    "tfx.orchestration.data_types": {"RuntimeParameter": (_DSL, "RuntimeParameter")},
    "tfx.orchestration.local": {},
    "tfx.orchestration.local.local_dag_runner": {"LocalDagRunner": (RUNNERS, "LocalDagRunner")},
    "tfx.orchestration.beam": {},
    "tfx.orchestration.beam.beam_dag_runner": {"BeamDagRunner": (RUNNERS, "BeamDagRunner")},
    "tfx.orchestration.kubeflow": {},
    "tfx.orchestration.kubeflow.kubeflow_dag_runner": dict(_V1),
    "tfx.orchestration.airflow": {},
    "tfx.orchestration.airflow.airflow_dag_runner": dict(_AIRFLOW),
    "tfx.orchestration.kubeflow.v2": {},
    "tfx.orchestration.kubeflow.v2.kubeflow_v2_dag_runner": dict(_V2),
    "tfx.dsl.components": {"component": (_CUSTOM, "component"), **_ANNOTATIONS},
    "tfx.dsl.components.common": {},
    "tfx.dsl.components.base": {},
    "tfx.dsl.components.base.executor_spec": {
        "ExecutorClassSpec": (_EXECUTORS, "ExecutorClassSpec")
    },
    "tfx.dsl.components.common.resolver": {
        "Resolver": (_DSL, "Resolver"),
        "ResolverStrategy": (_DSL, "ResolverStrategy"),
    },
    "tfx.dsl.components.common.importer": {"Importer": (_DSL, "Importer")},
    "tfx.dsl.component": {},
    "tfx.dsl.component.experimental": {},
    "tfx.dsl.component.experimental.decorators": {"component": (_CUSTOM, "component")},
    "tfx.dsl.component.experimental.annotations": _ANNOTATIONS,
    "tfx.dsl.experimental": {},
    "tfx.dsl.experimental.latest_blessed_model_resolver": {
        "LatestBlessedModelResolver": (_DSL, "LatestBlessedModelResolver")
    },
    "tfx.dsl.experimental.latest_artifacts_resolver": {
        "LatestArtifactsResolver": (_DSL, "LatestArtifactsResolver")
    },
    "tfx.dsl.experimental.conditionals": {},
    "tfx.dsl.experimental.conditionals.conditional": {"Cond": (_NODES, "Cond")},
    "tfx.dsl.input_resolution": {},
    "tfx.dsl.input_resolution.strategies": {},
    "tfx.dsl.input_resolution.strategies.latest_blessed_model_strategy": {
        "LatestBlessedModelStrategy": (_DSL, "LatestBlessedModelStrategy")
    },
    "tfx.dsl.input_resolution.strategies.latest_artifact_strategy": {
        "LatestArtifactStrategy": (_DSL, "LatestArtifactStrategy")
    },
    "tfx.dsl.input_resolution.strategies.span_range_strategy": {
        "SpanRangeStrategy": (_DSL, "SpanRangeStrategy")
    },
    "tfx.types": {
        "Channel": (_NODES, "Channel"),
        "Artifact": (_ART, "Artifact"),
        "ValueArtifact": (_ART, "ValueArtifact"),
    },
    "tfx.types.channel": {"Channel": (_NODES, "Channel")},
    "tfx.types.artifact": {"Artifact": (_ART, "Artifact")},
    "tfx.types.standard_artifacts": _ARTIFACTS,
    "tfx.utils.proto_utils": {
        name: (_PROTO_UTILS, name) for name in ("proto_to_json", "json_to_proto")
    },
    # ml_metadata (type annotations of TFX's templates)
    "ml_metadata": {},
    "ml_metadata.proto": {},
    "ml_metadata.proto.metadata_store_pb2": {"ConnectionConfig": (_DSL, "ConnectionConfig")},
}
