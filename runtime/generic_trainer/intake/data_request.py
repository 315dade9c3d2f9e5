"""The requests of the data verbs, import-examples and transform (Beam pipelines): their typed
fields and how raw inputs become them.

Paths Beam reads or writes stay gs:// URIs for a runner elsewhere (a non-local `--runner` in the
Beam args), else they are local (/gcs) paths. The simple fields come from the checks declared in
data_options.py (options.checked_fields).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from generic_trainer.artifacts.kfp_io import KfpOutputs
from generic_trainer.errors import UserInputError
from generic_trainer.intake import example_gen_inputs, example_gen_options, options
from generic_trainer.intake.paths import (
    data_path,
    new_output_dir,
)
from generic_trainer.intake.request import (
    RawInputs,
    raw_inputs,
)


@dataclasses.dataclass(frozen=True)
class BeamInputs:
    """A data verb's raw inputs with its Beam args: where its paths point depends on where Beam
    runs."""

    raw: RawInputs
    beam_args: tuple[str, ...]
    local: bool  # the runner runs here: gs:// paths are read through the /gcs mount

    def path(self, value: str) -> str:
        """A path Beam reads or writes: gs:// stays a URI for a remote runner, else the local (/gcs)
        path."""
        return data_path(value, self.raw.gcs_root, self.local)

    def output(self, key: str, artifact: str) -> str | None:
        """An output's raw value: the flag's (`key`), else the local path of the KFP output
        `artifact`."""
        kfp = self.raw.kfp
        return self.raw.values.get(key) or (kfp.path(artifact) if kfp else None)

    def new_dir(self, flag: str, value: str | None, what: str) -> str:
        """An output dir that must be new (or empty), as `path` maps it; `what` says what goes there
        when missing."""
        return new_output_dir(flag, value, self.raw.gcs_root, self.local, what)


def beam_inputs(
    values: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    kfp: KfpOutputs | None = None,
) -> BeamInputs:
    """The preamble of both data verbs' builders: raw_inputs, then --beam-pipeline-args and where
    Beam runs."""
    from generic_trainer.beam.beam_run import is_local_runner, parse_beam_args

    beam_args = parse_beam_args(values.get("beam_pipeline_args"))
    return BeamInputs(raw_inputs(values, environ, kfp), beam_args, is_local_runner(beam_args))


@dataclasses.dataclass(frozen=True)
class ImportExamplesRequest:
    """Every input of an import-examples run: tables (CSV or Parquet) or TFRecords to TFX Examples,
    resolved.

    Either `input_pattern` with hash `splits` ((name, buckets), ...), or `input_splits` ((name,
    pattern), ...). Patterns and outputs are local paths (gs:// through the /gcs mount), or gs://
    URIs when Beam runs elsewhere (a non-local `--runner` in `beam_args`).
    """

    output: str
    format: str = "csv"
    input_pattern: str | None = None
    splits: tuple[tuple[str, int], ...] = example_gen_inputs.DEFAULT_SPLITS
    input_splits: tuple[tuple[str, str], ...] = ()
    schema: str | None = None
    schema_output: str | None = (
        None  # also write schema.pbtxt here (the KFP `output_schema` artifact)
    )
    beam_args: tuple[str, ...] = ()
    gcs_root: str = "/gcs"
    kfp: KfpOutputs | None = None
    payload_format: str = "FORMAT_TF_EXAMPLE"  # TFX's payload_format (tfrecord input)
    partition_feature: str | None = None  # TFX's partition_feature_name
    infer_feature_shape: bool = True  # SchemaGen's infer_feature_shape
    range_config: Mapping[str, Any] | None = None  # TFX's RangeConfig (JSON form)


def build_import_examples_request(
    values: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    kfp: KfpOutputs | None = None,
) -> ImportExamplesRequest:
    """Validate raw values (keyed by flag name, dashes as underscores) into an
    ImportExamplesRequest."""
    beam = beam_inputs(values, environ, kfp)
    fmt = (values.get("format") or "csv").lower()
    if fmt not in ("csv", "parquet", "tfrecord"):
        raise UserInputError(
            "--format", f"expected csv, parquet or tfrecord, got {values.get('format')!r}"
        )
    pattern, input_splits = example_gen_inputs.input_patterns(beam.path, values)
    if input_splits and values.get("splits") not in (None, "", {}):
        raise UserInputError(
            "--splits", "hash splits are for --input; with --input-splits each pattern is a split"
        )
    fields = options.checked_fields(example_gen_options.IMPORT_EXAMPLES, beam.raw)
    example_gen_inputs.check_import_options(fmt, fields, input_splits)
    schema_output = beam.output("schema_output", "output_schema")
    return ImportExamplesRequest(
        output=beam.new_dir(
            "--output",
            beam.output("output", "examples"),
            "the Examples directory to write (Split-<name>/*.gz and schema.pbtxt)",
        ),
        format=fmt,
        input_pattern=pattern,
        splits=example_gen_inputs.hash_splits(values.get("splits")) if pattern else (),
        input_splits=input_splits,
        schema_output=beam.path(schema_output) if schema_output else None,
        beam_args=beam.beam_args,
        gcs_root=beam.raw.gcs_root,
        kfp=kfp,
        range_config=example_gen_inputs.range_config(values.get("range_config")),
        **fields,
    )


def describe_import_examples(r: ImportExamplesRequest) -> list[str]:
    """The log lines saying what an import-examples run will do."""
    return [
        f"import-examples request: input={r.input_pattern} "
        f"input_splits={dict(r.input_splits) or None} "
        f"format={r.format} schema={r.schema} output={r.output} beam_args={list(r.beam_args)}"
    ]
