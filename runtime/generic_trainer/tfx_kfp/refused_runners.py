"""TFX's runners that cannot run here, given so that a file naming them still plans.

`AirflowDagRunner` (Airflow) and `KubeflowDagRunner` (KFP v1's Argo workflow) take their TFX
arguments; in `tfx-pipeline plan` their `.run(pipeline)` hands the pipeline to tfx_dsl's capture
like every runner, and `plan` shows it with the refusal; in `tfx-pipeline run` it refuses,
naming the runners that work here.
"""

from __future__ import annotations

from typing import Any

from generic_trainer.errors import UserInputError

_INSTEAD = (
    "use tfx.orchestration.LocalDagRunner (runs the pipeline here, through kfp.local) or "
    "tfx.orchestration.experimental.KubeflowV2DagRunner (writes the KFP v2 pipeline file, for "
    "Kubeflow Pipelines or Vertex AI Pipelines); `generic-trainer tfx-pipeline plan FILE` shows "
    "what the pipeline becomes"
)


class _RefusedRunner:
    """A runner of TFX's that `tfx-pipeline run` refuses (`REFUSAL` says why and what instead)."""

    REFUSAL = ""

    def __init__(self, config: Any = None, *args: Any, **kwargs: Any) -> None:
        self.config = config

    def run(self, pipeline: Any) -> None:
        """Hand the pipeline to capture (`plan`), else refuse.

        Args:
          pipeline: the TFX Pipeline.

        Raises:
          UserInputError: when not planning: this runner cannot run here.
        """
        from generic_trainer.tfx_dsl import capture

        if not capture.take(self, pipeline):
            raise UserInputError(type(self).__name__, self.REFUSAL)


class AirflowDagRunner(_RefusedRunner):
    """TFX's AirflowDagRunner: Airflow is not part of this image."""

    REFUSAL = f"Airflow cannot run here (this image has no Airflow scheduler): {_INSTEAD}"


class AirflowPipelineConfig:
    """TFX's AirflowPipelineConfig: Airflow's DAG arguments (kept, not used)."""

    def __init__(self, airflow_dag_config: Any = None, **kwargs: Any) -> None:
        self.airflow_dag_config = airflow_dag_config


class KubeflowDagRunner(_RefusedRunner):
    """TFX's KubeflowDagRunner: KFP v1's Argo workflow of TFX's own container."""

    REFUSAL = (
        "KubeflowDagRunner writes a KFP v1 (Argo) workflow of TFX's own container, which this "
        f"image does not make: {_INSTEAD}"
    )


class KubeflowDagRunnerConfig:
    """TFX's KubeflowDagRunnerConfig (kept, not used)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.kwargs = kwargs


def get_default_kubeflow_metadata_config() -> None:
    """TFX's default KFP v1 metadata config: KFP keeps the metadata here (None)."""
    return None
