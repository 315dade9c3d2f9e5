"""`tfx.v1.extensions.google_cloud_ai_platform`: cloud-only components, refused by `plan`.

A pipeline file may name them (TFX's templates and penguin kubeflow pipeline do, behind flags),
so they construct with TFX's arguments; `plan` refuses a pipeline that holds one, naming it.
"""

from __future__ import annotations

from generic_trainer.tfx_dsl.components import component_class

Trainer = component_class("Trainer", cloud=True)
Pusher = component_class("Pusher", cloud=True)
Tuner = component_class("Tuner", cloud=True)

_CLOUD = "tfx.extensions.google_cloud_ai_platform"
# Why `plan` refuses each (what to use instead).
REFUSALS = {
    "Trainer": f"{_CLOUD}.Trainer runs the training as an AI Platform / Vertex AI custom job of "
    "TFX's own container, which this image does not launch: use tfx.components.Trainer (this "
    "image's train step) and run the pipeline KubeflowV2DagRunner writes on Vertex AI "
    "Pipelines, where that step runs on Vertex",
    "Pusher": f"{_CLOUD}.Pusher deploys the model to an AI Platform / Vertex AI endpoint; this "
    "image's push step copies it to a filesystem push_destination only: use "
    "tfx.components.Pusher(push_destination=...) and deploy from there",
    "Tuner": f"{_CLOUD}.Tuner runs its trials as AI Platform / Vertex AI jobs, which this image "
    "does not launch: use tfx.components.Tuner (this image's tune step)",
}

# TFX's custom_config keys (their values as in TFX 1.21).
TRAINING_ARGS_KEY = "ai_platform_training_args"
ENABLE_VERTEX_KEY = "ai_platform_enable_vertex"
VERTEX_REGION_KEY = "ai_platform_vertex_region"
SERVING_ARGS_KEY = "ai_platform_serving_args"
VERTEX_CONTAINER_IMAGE_URI_KEY = "ai_platform_vertex_container_image_uri"
JOB_ID_KEY = "ai_platform_training_job_id"
LABELS_KEY = "ai_platform_training_labels"
ENABLE_UCAIP_KEY = "ai_platform_training_enable_ucaip"
UCAIP_REGION_KEY = "ai_platform_training_ucaip_region"
TUNING_ARGS_KEY = "ai_platform_tuning_args"
REMOTE_TRIALS_WORKING_DIR_KEY = "remote_trials_working_dir"
PUSHER_SERVING_ARGS_KEY = "ai_platform_serving_args"
VERTEX_CONTAINER_IMAGE_URI_KEY = "ai_platform_vertex_container_image_uri"
JOB_ID_KEY = "ai_platform_training_job_id"
LABELS_KEY = "ai_platform_training_labels"
ENABLE_UCAIP_KEY = "ai_platform_training_enable_ucaip"
UCAIP_REGION_KEY = "ai_platform_training_ucaip_region"
ENDPOINT_ARGS_KEY = "endpoint"
