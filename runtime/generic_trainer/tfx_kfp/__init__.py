"""A TFX pipeline's `Plan` (tfx_dsl.steps) on KFP: the pipeline of this image's components
(kfp_pipeline.py), compiled by kfp or run here through kfp.local with each step a host process
(local_run.py, host_tasks.py); TFX's runner classes (runners.py); the records evaluators, transforms
and pushers leave for a later run's resolver (model_records.py); where the runners get the
components (component_source.py).
"""
