"""The request of transform (tf.Transform on Beam): its typed fields and how raw inputs become them.

Paths Beam reads or writes stay gs:// URIs for a runner elsewhere, else they are local (/gcs)
paths (data_request.beam_inputs). The simple fields come from the checks declared in
transform_options.py (options.checked_fields).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Mapping
from typing import Any

from generic_trainer.artifacts.kfp_io import KfpOutputs
from generic_trainer.artifacts.redaction import redact, secret_key_names
from generic_trainer.artifacts.storage_settings import DEFAULT_SETTINGS, StorageSettings
from generic_trainer.errors import UserInputError
from generic_trainer.intake import options, transform_options
from generic_trainer.intake.data_request import BeamInputs, beam_inputs
from generic_trainer.intake.environment import storage_settings
from generic_trainer.intake.paths import (
    examples_dir,
    split_patterns,
)
from generic_trainer.intake.request import (
    RawInputs,
    existing_path,
    module_file,
)
from generic_trainer.intake.values import (
    ints_from_floats,
    json_object,
)

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class TransformRequest:
    """Every input of a transform run (tf.Transform's analyze and transform on Beam), resolved."""

    examples: str  # local path (checked); Beam reads examples_uri
    schema: str
    module_file: str
    transform_graph: str
    examples_uri: str = ""
    preprocessing_fn: str = "preprocessing_fn"
    transformed_examples: str | None = None
    analyze_splits: tuple[str, ...] = ("train",)
    transform_splits: tuple[str, ...] = ()  # (): every split of the examples, as TFX
    module_sha256: str | None = None
    beam_args: tuple[str, ...] = ()
    gcs_root: str = "/gcs"
    kfp: KfpOutputs | None = None
    storage: StorageSettings = DEFAULT_SETTINGS  # from the environment (intake/environment.py)
    custom_config: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    more_examples: tuple[tuple[str, str], ...] = ()  # further Examples dirs (spans): (path, uri)
    analyzer_cache: str | None = None  # as Beam reads it (gs:// for a remote runner)
    updated_analyzer_cache: str | None = None
    # --examples resolved once: per Examples dir (example_dirs' order), (split, its file pattern
    # `<dir>/Split-<name>/*`) for every split read: those analyzed and those transformed.
    split_files: tuple[tuple[tuple[str, str], ...], ...] = ()
    records_dir: str | None = None  # the updated analyzer cache is recorded there (resolve)

    def example_dirs(self) -> tuple[tuple[str, str], ...]:
        """Every Examples dir read, oldest span first: (local path, the URI Beam reads)."""
        return ((self.examples, self.examples_uri or self.examples), *self.more_examples)


def build_transform_request(
    values: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    kfp: KfpOutputs | None = None,
) -> TransformRequest:
    """Validate raw values (keyed by flag name, dashes as underscores) into a TransformRequest."""
    beam = beam_inputs(values, environ, kfp)
    gcs_root = beam.raw.gcs_root
    schema = existing_path("--schema", values.get("schema"), gcs_root)
    if not schema:
        raise UserInputError(
            "--schema", "required: the raw examples' tensorflow-metadata Schema (file or its dir)"
        )
    graph_path = beam.new_dir(
        "--transform-graph",
        beam.output("transform_graph", "transform_graph"),
        "where the transform graph goes (transform_fn/, transformed_metadata/, metadata/)",
    )
    outputs = _transform_outputs(beam, graph_path)
    [(examples, examples_uri), *more] = _example_dirs(beam)
    request = TransformRequest(
        examples=examples,
        examples_uri=examples_uri,
        more_examples=tuple(more),
        schema=schema,
        module_file=module_file(values),
        transform_graph=graph_path,
        beam_args=beam.beam_args,
        gcs_root=gcs_root,
        kfp=kfp,
        storage=storage_settings(beam.raw.environ),
        custom_config=_custom_config(beam.raw),
        analyzer_cache=_analyzer_cache(beam),
        **outputs,
        **options.checked_fields(transform_options.TRANSFORM, beam.raw),
    )
    return dataclasses.replace(request, split_files=_split_files(request))


def _split_files(request: TransformRequest) -> tuple[tuple[tuple[str, str], ...], ...]:
    """TransformRequest.split_files: the splits analyzed, and when transformed examples are asked
    for the splits transformed (those given, else every split: each Examples dir must hold the
    same), resolved in each Examples dir."""
    dirs = request.example_dirs()
    wanted = set(request.analyze_splits)
    if request.transformed_examples:
        wanted |= set(request.transform_splits or _every_split([path for path, _ in dirs]))
    splits = sorted(wanted)
    return tuple(tuple(zip(splits, split_patterns(path, splits), strict=True)) for path, _ in dirs)


def _every_split(paths: list[str]) -> set[str]:
    """The splits of the Examples dirs (Split-<name>/, or the old layout's <name>/), the same in
    each."""
    found = [
        {e.name.removeprefix("Split-") for e in os.scandir(path) if e.is_dir()} for path in paths
    ]
    if any(f != found[0] for f in found):
        raise UserInputError(
            "--examples",
            "the Examples dirs hold different splits ("
            + "; ".join(",".join(sorted(f)) for f in found)
            + "); give --transform-splits",
        )
    return found[0]


def _transform_outputs(beam: BeamInputs, graph_path: str) -> dict[str, str | None]:
    """transformed_examples and updated_analyzer_cache: new dirs, each apart from the others."""
    outputs: dict[str, str | None] = {}
    taken = {graph_path: "--transform-graph"}
    for key in ("transformed_examples", "updated_analyzer_cache"):
        flag = "--" + key.replace("_", "-")
        value = beam.output(key, key)
        path = beam.new_dir(flag, value, "") if value else None
        if path and path in taken:
            raise UserInputError(flag, f"must differ from {taken[path]}")
        if path:
            taken[path] = flag
        outputs[key] = path
    return outputs


def _example_dirs(beam: BeamInputs) -> list[tuple[str, str]]:
    """--examples DIR[,DIR...] (KFP: the artifact, then more_examples): (local path, URI Beam
    reads) per dir."""
    value = beam.raw.values.get("examples")
    dirs = [d.strip() for d in str(value).split(",") if d.strip()] if value else [value]
    more = beam.raw.values.get("more_examples") or []
    if not isinstance(more, (list, tuple)) or not all(isinstance(d, str) and d for d in more):
        raise UserInputError("more_examples", f"expected a list of Examples URIs, got {more!r}")
    dirs += list(more)
    if len(set(dirs)) != len(dirs):
        raise UserInputError("--examples", f"an Examples dir appears twice in {value!r}")
    gcs_root = beam.raw.gcs_root
    return [(examples_dir({"examples": d}, gcs_root), beam.path(d)) for d in dirs]


def _custom_config(raw: RawInputs) -> dict[str, Any]:
    custom_config = json_object("--custom-config", raw.values.get("custom_config"))
    secret_key_names(custom_config)
    return ints_from_floats(custom_config) if raw.kfp else custom_config


def _analyzer_cache(beam: BeamInputs) -> str | None:
    """--analyzer-cache: an existing dir (a KFP run without one gives none), as Beam reads it."""
    value = beam.raw.values.get("analyzer_cache")
    if not value:
        return None
    path = existing_path("--analyzer-cache", value, beam.raw.gcs_root)
    if not os.path.isdir(path):
        raise UserInputError(
            "--analyzer-cache", f"{value} is not a directory (an earlier run's analyzer cache)"
        )
    from generic_trainer.tfx_kfp.model_records import resolved_nothing

    if resolved_nothing(path):  # TFX: an empty channel; the analyzers read every dataset
        log.info("--analyzer-cache: the resolver found no earlier cache; none is used")
        return None
    return beam.path(value)


def describe_transform(r: TransformRequest) -> list[str]:
    """The log lines saying what a transform run will do."""
    return [
        f"transform request: examples={','.join(p for p, _ in r.example_dirs())} "
        f"schema={r.schema} module={r.module_file} "
        f"preprocessing_fn={r.preprocessing_fn} analyze_splits={','.join(r.analyze_splits)} "
        f"transform_splits={','.join(r.transform_splits) or '(every split)'} "
        f"transform_graph={r.transform_graph} transformed_examples={r.transformed_examples} "
        f"analyzer_cache={r.analyzer_cache} updated_analyzer_cache={r.updated_analyzer_cache} "
        f"custom_config={json.dumps(redact(dict(r.custom_config)))} beam_args={list(r.beam_args)}"
    ]
