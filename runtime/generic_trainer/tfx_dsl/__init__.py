"""TFX's pipeline DSL (`tfx.v1.dsl`, `tfx.v1.components`, `tfx.proto`) for pipeline files run here.

A TFX pipeline file builds a `Pipeline` of TFX nodes; `plan` turns it into a `steps.Plan` of this
image's components, which `tfx_kfp` compiles to a KFP pipeline or runs locally. Nothing here
imports TensorFlow.
"""
