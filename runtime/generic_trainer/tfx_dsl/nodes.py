"""TFX's nodes, channels and placeholders as a pipeline file builds them (no TFX, no TensorFlow).

A node (`BaseNode`) keeps what `plan` needs: its id (`with_id`), its input channels, its other
arguments (TFX's exec properties), its output channels (`outputs[...]`) and the `Cond`s it was
made in. `channel.future()[0].custom_property('blessed') == 1` and `.future()[0].value` build
small placeholder objects that `plan` reads.
"""

from __future__ import annotations

import builtins
import contextvars
from collections.abc import Mapping
from typing import Any

from generic_trainer.tfx_dsl.artifacts import Artifact

_CONDITIONS: contextvars.ContextVar[tuple[Predicate, ...]] = contextvars.ContextVar(
    "tfx_dsl_conditions", default=()
)


class Channel:
    """`tfx.v1.dsl.Channel` / `tfx.types.Channel`: artifacts of one type (a Resolver's input)."""

    def __init__(
        self,
        type: type[Artifact],  # noqa: A002 - TFX's argument name
        additional_properties: Mapping[str, Any] | None = None,
        additional_custom_properties: Mapping[str, Any] | None = None,
        artifacts: Any = None,
        producer_component_id: str | None = None,
        output_key: str | None = None,
    ):
        if not (isinstance(type, builtins.type) and issubclass(type, Artifact)):
            raise TypeError(f"Channel(type=...) takes a standard artifact class, not {type!r}")
        self.type = type
        self.type_name = type.TYPE_NAME
        self.additional_properties = dict(additional_properties or {})
        self.additional_custom_properties = dict(additional_custom_properties or {})
        self._producer_component_id = producer_component_id
        self.output_key = output_key

    @property
    def producer_component_id(self) -> str | None:
        return self._producer_component_id

    def future(self) -> ChannelFuture:
        """The placeholder of this channel's artifacts at run time (`.future()[0]...`)."""
        return ChannelFuture(self)

    def __repr__(self) -> str:
        return f"Channel(type={self.type_name}, producer={self.producer_component_id!r})"


class OutputChannel(Channel):
    """A node's output (`node.outputs['model']`): the producer is the node, whatever its id."""

    def __init__(self, producer: BaseNode, output_key: str, artifact_type: type[Artifact]):
        super().__init__(type=artifact_type, output_key=output_key)
        self.producer = producer

    @property
    def producer_component_id(self) -> str:
        return self.producer.id


class ChannelFuture:
    """`channel.future()`: index it (`[0]`) for one artifact's placeholders."""

    def __init__(self, channel: Channel):
        self.channel = channel

    def __getitem__(self, index: int) -> ArtifactFuture:
        return ArtifactFuture(self.channel, index)

    @property
    def value(self) -> ValuePlaceholder:
        return ValuePlaceholder(self.channel, 0)


class ArtifactFuture:
    """`channel.future()[i]`: `.custom_property(name)`, `.property(name)`, `.value`, `.uri`."""

    def __init__(self, channel: Channel, index: int):
        self.channel = channel
        self.index = index

    def custom_property(self, name: str) -> PropertyPlaceholder:
        return PropertyPlaceholder(self.channel, self.index, name, custom=True)

    @property
    def value(self) -> ValuePlaceholder:
        return ValuePlaceholder(self.channel, self.index)

    @property
    def uri(self) -> ValuePlaceholder:
        return ValuePlaceholder(self.channel, self.index, what="uri")

    def property(self, name: str) -> PropertyPlaceholder:  # last: it shadows the builtin here
        return PropertyPlaceholder(self.channel, self.index, name, custom=False)


class Placeholder:
    """A value known only when the pipeline runs; comparing it builds a `Predicate`."""

    channel: Channel

    def __eq__(self, other: Any) -> Predicate:  # type: ignore[override]
        return Predicate(self, "==", other)

    def __ne__(self, other: Any) -> Predicate:  # type: ignore[override]
        return Predicate(self, "!=", other)

    def __gt__(self, other: Any) -> Predicate:
        return Predicate(self, ">", other)

    def __lt__(self, other: Any) -> Predicate:
        return Predicate(self, "<", other)

    __hash__ = None  # type: ignore[assignment]


class PropertyPlaceholder(Placeholder):
    """`future()[i].custom_property(name)` (custom) or `.property(name)`."""

    def __init__(self, channel: Channel, index: int, name: str, custom: bool):
        self.channel, self.index, self.name, self.custom = channel, index, name, custom

    def __repr__(self) -> str:
        kind = "custom_property" if self.custom else "property"
        return f"{self.channel.producer_component_id}.{self.channel.output_key}[{self.index}]" + (
            f".{kind}({self.name!r})"
        )


class ValuePlaceholder(Placeholder):
    """`future()[i].value` (a value artifact's content) or `.uri`."""

    def __init__(self, channel: Channel, index: int, what: str = "value"):
        self.channel, self.index, self.what = channel, index, what

    def __repr__(self) -> str:
        return f"{self.channel.producer_component_id}.{self.channel.output_key}[{self.index}]" + (
            f".{self.what}"
        )


class Predicate:
    """`placeholder == value` (and `!=`, `>`, `<`): what a `Cond` tests."""

    def __init__(self, left: Placeholder, op: str, right: Any):
        self.left, self.op, self.right = left, op, right

    def __bool__(self) -> bool:
        raise TypeError(
            "a TFX placeholder comparison has no truth value until the pipeline runs: "
            "use it in tfx.dsl.Cond(...)"
        )

    def __repr__(self) -> str:
        return f"{self.left!r} {self.op} {self.right!r}"


class Cond:
    """`with tfx.dsl.Cond(predicate):` the nodes made inside run only when it holds."""

    def __init__(self, predicate: Predicate):
        if not isinstance(predicate, Predicate):
            raise TypeError(f"Cond takes a placeholder comparison, not {predicate!r}")
        self.predicate = predicate
        self._token: contextvars.Token | None = None

    def __enter__(self) -> Cond:
        self._token = _CONDITIONS.set(_CONDITIONS.get() + (self.predicate,))
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._token is not None:
            _CONDITIONS.reset(self._token)


class BaseNode:
    """A TFX node: its id, input channels, other arguments, outputs and conditions.

    Attributes:
      inputs: argument name -> Channel (only those given).
      exec_properties: argument name -> value (only those given, not None).
      outputs: output key -> OutputChannel.
      conditions: the `Cond` predicates the node was made in, outermost first.
    """

    def __init__(
        self,
        inputs: Mapping[str, Channel],
        exec_properties: Mapping[str, Any],
        outputs: Mapping[str, type[Artifact]],
    ):
        self._id: str | None = None
        self.inputs = dict(inputs)
        self.exec_properties = dict(exec_properties)
        self.outputs = {key: OutputChannel(self, key, kind) for key, kind in outputs.items()}
        self.conditions = _CONDITIONS.get()
        self.upstream_nodes: set[BaseNode] = set()
        self.downstream_nodes: set[BaseNode] = set()

    @property
    def id(self) -> str:
        """The node id: `with_id`'s, else the class name (as TFX)."""
        return self._id or type(self).__name__

    def with_id(self, id: str) -> BaseNode:  # noqa: A002 - TFX's argument name
        """Set the node id (TFX's `.with_id`); returns the node."""
        self._id = id
        return self

    def add_upstream_node(self, node: BaseNode) -> None:
        """Run after `node` (TFX's explicit dependency)."""
        self.upstream_nodes.add(node)
        node.downstream_nodes.add(self)

    def add_downstream_node(self, node: BaseNode) -> None:
        """Run before `node`."""
        node.add_upstream_node(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r})"
