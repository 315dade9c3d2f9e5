"""The `tfx` import paths of the proto messages, for `tfx_hook`'s module table.

`tfx.proto.<file>_pb2` has every name of the module here of that name (`FORWARDS`); `tfx.v1.proto`
has the names TFX 1.21's `tfx/v1/proto/__init__.py` imports, plus `Filesystem` (listed in its
`__all__`: `PushDestination.Filesystem`). Its `orchestration` (ml-pipelines-sdk's `RunState`) is
not served. Nothing is imported here: the hook imports a module when a user's file does.
"""

from __future__ import annotations

PACKAGE = "generic_trainer.tfx_dsl.protos"

# tfx.v1.proto's names, by the module that defines them.
V1_PROTO = {
    "bulk_inferrer_pb2": (
        "ClassifyOutput DataSpec ModelSpec OutputColumnsSpec OutputExampleSpec PredictOutput "
        "PredictOutputCol RegressOutput"
    ),
    "distribution_validator_pb2": "DistributionValidatorConfig FeatureComparator",
    "evaluator_pb2": "FeatureSlicingSpec SingleSlicingSpec",
    "example_diff_pb2": "ExampleDiffConfig PairedExampleSkew",
    "example_gen_pb2": "CustomConfig Input Output PayloadFormat SplitConfig",
    "infra_validator_pb2": (
        "EnvVar EnvVarSource KubernetesConfig LocalDockerConfig PodOverrides RequestSpec "
        "SecretKeySelector ServingSpec TensorFlowServing TensorFlowServingRequestSpec "
        "ValidationSpec"
    ),
    "pusher_pb2": "PushDestination Versioning",
    "range_config_pb2": "RangeConfig RollingRange StaticRange",
    "trainer_pb2": "EvalArgs TrainArgs",
    "transform_pb2": "SplitsConfig",
    "tuner_pb2": "TuneArgs",
}


def forwards() -> dict[str, str]:
    """`tfx.proto.<file>_pb2` -> the module whose every public name it has."""
    return {f"tfx.proto.{module}": f"{PACKAGE}.{module}" for module in V1_PROTO}


def modules() -> dict[str, dict[str, tuple[str, str]]]:
    """The hook's stand-in modules for the protos: name -> {attribute: (module, attribute)}."""
    v1 = {
        name: (f"{PACKAGE}.{module}", name)
        for module, names in V1_PROTO.items()
        for name in names.split()
    }
    v1["Filesystem"] = (f"{PACKAGE}.pusher_pb2:PushDestination", "Filesystem")
    pb2 = {name: {} for name in forwards()}
    return {"tfx.proto": {}, **pb2, "tfx.v1.proto": dict(sorted(v1.items()))}
