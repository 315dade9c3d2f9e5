"""`tfx.v1.dsl.components`: the `@component` decorator and its annotations.

A file may define a custom component; defining one works (TFX's penguin pipeline defines one at
import), and using it in a pipeline builds a `CustomComponentNode`, which `plan` refuses: this
image runs its own components, not arbitrary Python functions.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from generic_trainer.tfx_dsl.artifacts import Artifact
from generic_trainer.tfx_dsl.nodes import BaseNode, Channel


class _Annotation:
    """`Parameter[T]`, `InputArtifact[T]`, `OutputArtifact[T]`, ...: remembers T."""

    KIND = "annotation"

    def __init__(self, inner: Any):
        self.inner = inner

    def __class_getitem__(cls, inner: Any) -> _Annotation:
        return cls(inner)


class Parameter(_Annotation):
    """`tfx.dsl.components.Parameter[T]`."""

    KIND = "parameter"


class BeamComponentParameter(_Annotation):
    """`tfx.dsl.components.BeamComponentParameter[T]`."""

    KIND = "parameter"


class InputArtifact(_Annotation):
    """`tfx.dsl.components.InputArtifact[T]`."""

    KIND = "input"


class OutputArtifact(_Annotation):
    """`tfx.dsl.components.OutputArtifact[T]`."""

    KIND = "output"


class AsyncOutputArtifact(OutputArtifact):
    """`tfx.dsl.components.AsyncOutputArtifact[T]`."""


class OutputDict:
    """`tfx.dsl.components.OutputDict(name=type, ...)`: a function's returned values."""

    def __init__(self, **outputs: Any):
        self.outputs = outputs


class CustomComponentNode(BaseNode):
    """A node made by a custom `@component` function (refused by `plan`)."""

    TFX_NAME = "custom @component"
    function_name = ""


def _outputs(function: Callable[..., Any]) -> dict[str, type[Artifact]]:
    """The function's output artifacts (OutputArtifact parameters, an OutputDict return)."""
    outputs: dict[str, type[Artifact]] = {}
    for name, parameter in inspect.signature(function).parameters.items():
        note = parameter.annotation
        is_output = isinstance(note, OutputArtifact) or "OutputArtifact" in str(note)
        if is_output:
            inner = getattr(note, "inner", Artifact)
            is_artifact = isinstance(inner, type) and issubclass(inner, Artifact)
            outputs[name] = inner if is_artifact else Artifact
    returned = inspect.signature(function).return_annotation
    if isinstance(returned, OutputDict):
        outputs.update({name: Artifact for name in returned.outputs})
    return outputs


def _node_class(function: Callable[..., Any]) -> type[CustomComponentNode]:
    outputs = _outputs(function)

    def __init__(self: CustomComponentNode, **kwargs: Any) -> None:  # noqa: N807
        channels = {k: v for k, v in kwargs.items() if isinstance(v, Channel)}
        others = {k: v for k, v in kwargs.items() if k not in channels and v is not None}
        CustomComponentNode.__init__(self, channels, others, outputs)

    return type(
        function.__name__,
        (CustomComponentNode,),
        {"__init__": __init__, "function_name": function.__name__, "__doc__": function.__doc__},
    )


def component(function: Callable[..., Any] | None = None, **options: Any) -> Any:
    """`@tfx.dsl.components.component` (with or without options): a node class per function."""
    if function is None:
        return lambda wrapped: _node_class(wrapped)
    return _node_class(function)
