"""TFX's standard artifact types (`tfx.v1.types.standard_artifacts`), as names a pipeline uses.

A pipeline file names them in `Channel(type=Model)`, `Importer(artifact_type=Schema)` and custom
component annotations; `plan` reads `TYPE_NAME`. They hold no data: artifacts live in KFP.
"""

from __future__ import annotations


class Artifact:
    """`tfx.types.Artifact`: the base of the artifact types."""

    TYPE_NAME = "Artifact"


def _artifact(name: str, base: type[Artifact] = Artifact) -> type[Artifact]:
    return type(name, (base,), {"TYPE_NAME": name, "__doc__": f"TFX's {name} artifact type."})


class ValueArtifact(Artifact):
    """`tfx.types.ValueArtifact`: an artifact holding one small value."""

    TYPE_NAME = "ValueArtifact"


_TYPES = (
    "Examples",
    "ExampleAnomalies",
    "ExampleStatistics",
    "ExampleValidationMetrics",
    "ExamplesDiff",
    "Schema",
    "TransformGraph",
    "TransformCache",
    "Model",
    "ModelRun",
    "ModelBlessing",
    "ModelEvaluation",
    "InfraBlessing",
    "PushedModel",
    "InferenceResult",
    "HyperParameters",
    "TunerResults",
    "DataView",
    "Config",
)
_VALUE_TYPES = ("String", "Integer", "Float", "Bytes", "Boolean", "JsonValue")

STANDARD_ARTIFACTS: dict[str, type[Artifact]] = {name: _artifact(name) for name in _TYPES}
STANDARD_ARTIFACTS.update({name: _artifact(name, ValueArtifact) for name in _VALUE_TYPES})
# TFX's examples name the statistics type both ways.
STANDARD_ARTIFACTS["Statistics"] = STANDARD_ARTIFACTS["ExampleStatistics"]

globals().update(STANDARD_ARTIFACTS)
NAMES = tuple(STANDARD_ARTIFACTS) + ("Artifact", "ValueArtifact")
