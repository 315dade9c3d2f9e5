"""`tfx.v1.dsl`: Pipeline, Importer, Resolver and its strategies, RuntimeParameter.

These record what a pipeline file says; `plan` decides what each becomes on this image.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from generic_trainer.tfx_dsl.artifacts import Artifact
from generic_trainer.tfx_dsl.nodes import BaseNode, Channel


class Pipeline:
    """`tfx.v1.dsl.Pipeline` (`tfx.orchestration.pipeline.Pipeline`), TFX 1.21's arguments."""

    def __init__(
        self,
        pipeline_name: str,
        pipeline_root: str | Any = "",
        metadata_connection_config: Any = None,
        components: Sequence[BaseNode] | None = None,
        enable_cache: bool = False,
        beam_pipeline_args: Sequence[str] | None = None,
        platform_config: Any = None,
        execution_mode: Any = None,
        inputs: Any = None,
        outputs: Any = None,
        dsl_context_registry: Any = None,
        **kwargs: Any,
    ):
        self.pipeline_name = pipeline_name
        self.pipeline_root = pipeline_root
        self.metadata_connection_config = metadata_connection_config
        self.components = list(components or [])
        self.enable_cache = enable_cache
        self.beam_pipeline_args = list(beam_pipeline_args or [])
        self.platform_config = platform_config
        self.execution_mode = execution_mode
        self.additional_pipeline_args = dict(kwargs.pop("additional_pipeline_args", {}) or {})
        # The folder of the script that builds the pipeline (`python FILE` has it on sys.path):
        # where dotted module names such as `models.preprocessing` are imported from.
        script = sys.argv[0] if sys.argv and sys.argv[0] else ""
        self.source_dir = os.path.dirname(os.path.abspath(script)) if script else os.getcwd()
        self.unsupported = {
            key: value
            for key, value in {"inputs": inputs, "outputs": outputs, **kwargs}.items()
            if value is not None
        }

    @property
    def id(self) -> str:
        return self.pipeline_name

    def __repr__(self) -> str:
        return f"Pipeline({self.pipeline_name!r}, {len(self.components)} components)"


class Importer(BaseNode):
    """`tfx.v1.dsl.Importer`: an artifact from a URI; its output key is `result`."""

    TFX_NAME = "Importer"

    def __init__(
        self,
        source_uri: str,
        artifact_type: type[Artifact],
        reimport: bool | None = False,
        properties: Mapping[str, Any] | None = None,
        custom_properties: Mapping[str, Any] | None = None,
        output_key: str | None = None,
    ):
        if not (isinstance(artifact_type, type) and issubclass(artifact_type, Artifact)):
            raise TypeError(
                f"Importer(artifact_type=...) takes an artifact class, not {artifact_type!r}"
            )
        key = output_key or "result"
        super().__init__(
            inputs={},
            exec_properties={
                "source_uri": source_uri,
                "reimport": bool(reimport),
                "properties": dict(properties or {}),
                "custom_properties": dict(custom_properties or {}),
            },
            outputs={key: artifact_type},
        )
        self.artifact_type = artifact_type


class ResolverStrategy:
    """`tfx.dsl.input_resolution.resolver_strategy.ResolverStrategy`: base of the strategies."""

    NAME = "ResolverStrategy"


class LatestBlessedModelStrategy(ResolverStrategy):
    """The latest Model the evaluator blessed, with its ModelBlessing."""

    NAME = "LatestBlessedModelStrategy"


class LatestArtifactStrategy(ResolverStrategy):
    """The latest artifact of each channel's type."""

    NAME = "LatestArtifactStrategy"


class SpanRangeStrategy(ResolverStrategy):
    """Examples of a range of spans (`config={'range_config': RangeConfig}`)."""

    NAME = "SpanRangeStrategy"


# TFX's legacy names for the same strategies (`tfx.dsl.experimental.*_resolver`).
LatestBlessedModelResolver = LatestBlessedModelStrategy
LatestArtifactsResolver = LatestArtifactStrategy
SpansResolver = SpanRangeStrategy


class Resolver(BaseNode):
    """`tfx.v1.dsl.Resolver(strategy_class=..., config=..., **channels)`: outputs are the
    channels' names."""

    TFX_NAME = "Resolver"

    def __init__(
        self,
        strategy_class: type | None = None,
        config: Mapping[str, Any] | None = None,
        **channels: Channel,
    ):
        for name, channel in channels.items():
            if not isinstance(channel, Channel):
                raise TypeError(f"Resolver({name}=...) takes a Channel, not {channel!r}")
        super().__init__(
            inputs=channels,
            exec_properties={"strategy_class": strategy_class, "config": dict(config or {})},
            outputs={name: channel.type for name, channel in channels.items()},
        )
        self.strategy_class = strategy_class
        self.config = dict(config or {})


class RuntimeParameter:
    """`tfx.v1.dsl.experimental.RuntimeParameter`: a value given when the pipeline runs."""

    def __init__(
        self,
        name: str,
        ptype: type | None = None,
        default: Any = None,
        description: str | None = None,
    ):
        if ptype not in (str, int, float, bool, None):
            raise TypeError(f"RuntimeParameter {name!r}: ptype must be str, int, float or bool")
        if default is not None and ptype is not None and not isinstance(default, ptype):
            raise TypeError(
                f"RuntimeParameter {name!r}: default {default!r} is not a {ptype.__name__}"
            )
        self.name = name
        self.ptype = ptype
        self.default = default
        self.description = description

    def __repr__(self) -> str:
        return f"RuntimeParameter({self.name!r}, ptype={getattr(self.ptype, '__name__', None)})"


class ConnectionConfig:
    """ml_metadata's `ConnectionConfig`, as `sqlite_metadata_connection_config` makes it; KFP
    keeps the metadata here, so it is recorded and not used."""

    def __init__(self, **fields: Any):
        self.fields = fields

    def __repr__(self) -> str:
        return f"ConnectionConfig({self.fields!r})"


def sqlite_metadata_connection_config(metadata_db_uri: str) -> ConnectionConfig:
    """`tfx.orchestration.metadata.sqlite_metadata_connection_config` (recorded, not used)."""
    return ConnectionConfig(sqlite={"filename_uri": metadata_db_uri, "connection_mode": 3})


def mysql_metadata_connection_config(
    host: str, port: int, database: str, username: str, password: str
) -> ConnectionConfig:
    """`tfx.orchestration.metadata.mysql_metadata_connection_config` (recorded, not used; the
    password is not kept)."""
    return ConnectionConfig(
        mysql={"host": host, "port": port, "database": database, "user": username}
    )
