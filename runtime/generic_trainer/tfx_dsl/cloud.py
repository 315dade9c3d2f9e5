"""`tfx.v1.extensions.google_cloud_ai_platform`: cloud-only components, refused by `plan`.

A pipeline file may name them (TFX's templates and penguin kubeflow pipeline do, behind flags),
so they construct with TFX's arguments; `plan` refuses a pipeline that holds one, naming it.
"""

from __future__ import annotations

from generic_trainer.tfx_dsl.components import component_class

Trainer = component_class("Trainer", cloud=True)
Pusher = component_class("Pusher", cloud=True)
Tuner = component_class("Tuner", cloud=True)

# TFX's custom_config keys (their values as in TFX 1.21).
TRAINING_ARGS_KEY = "ai_platform_training_args"
ENABLE_VERTEX_KEY = "ai_platform_enable_vertex"
VERTEX_REGION_KEY = "ai_platform_vertex_region"
SERVING_ARGS_KEY = "ai_platform_serving_args"
TUNING_ARGS_KEY = "ai_platform_tuning_args"
REMOTE_TRIALS_WORKING_DIR_KEY = "remote_trials_working_dir"
PUSHER_SERVING_ARGS_KEY = "ai_platform_serving_args"
ENDPOINT_ARGS_KEY = "endpoint"
