"""TFX's pipeline DSL (`tfx.v1.dsl`, `tfx.v1.components`, `tfx.proto`) for pipeline files run here.

A TFX pipeline file builds a `Pipeline` of TFX nodes; `plan` turns it into a `steps.Plan` of this
image's components, which `tfx_kfp` compiles to a KFP pipeline or runs locally. Nothing here
imports TensorFlow (nor TFMA).

The entry points (what `tfx_kfp` and the `tfx-pipeline` verb use):
  - `capture.run_pipeline_file(path, args, home, capture=True) -> list[CapturedRun]`: run a
    pipeline file as `python FILE ARGS` with the `tfx` hook; in capture mode each runner's
    `.run(pipeline)` is recorded (`CapturedRun(runner, pipeline)`) and nothing runs.
  - `capture.take(runner, pipeline) -> bool`: what each runner's `.run()` calls first; True means
    captured (return at once).
  - `planning.plan(pipeline, python_path=None) -> steps.Plan`: what each node becomes.
  - `render.render_plan(plan) -> str`: the text `tfx-pipeline plan` prints.

Modules: `nodes` (nodes, channels, placeholders, Cond), `artifacts` (standard artifact types),
`components` (TFX's components and their 1.21 signatures), `dsl` (Pipeline, Importer, Resolver,
strategies, RuntimeParameter, metadata configs), `custom` (`@component`), `cloud` (cloud-only
components, refused), `hook_paths` (the import paths the `tfx` hook serves), `planning` with
`plan_graph`, `plan_nodes`, `plan_judges`, `plan_values`, `capture`, `render`, `proto_utils`,
`protos` (TFX's proto messages), `steps` (the Plan).
"""
