"""The KFP v2 executor contract: executor input in, executor output out.

Reads the JSON KFP substitutes for `{{$}}` into the same raw values the CLI flags give
(`examples`, `module_file`, `train_steps`, ...) plus a `KfpOutputs` naming where each output
artifact goes, and writes the executor-output file (artifacts with metadata, parameter values).
Only the chief calls `write_executor_output`: several replicas writing one file over GCS FUSE fails.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from generic_trainer.artifacts import bounded_parse, files, storage
from generic_trainer.errors import OutputError, UserInputError

INPUT = "--executor-input"


@dataclasses.dataclass(frozen=True)
class KfpOutputs:
    """Where a KFP run wants its outputs: the executor-output file and each output artifact."""

    output_file: str
    # output name -> {"name", "uri", "path", "schema_title"}; "path" is the local path of "uri".
    artifacts: Mapping[str, Mapping[str, str]]
    parameters: tuple[str, ...] = ()  # the output parameters the component declares

    def path(self, name: str) -> str | None:
        art = self.artifacts.get(name)
        return art["path"] if art else None


@dataclasses.dataclass(frozen=True)
class ArtifactMaps:
    """What KFP's artifacts fill: input artifact name -> raw key (its URI); output artifact name ->
    raw key its local path fills (None: none). Derived from the running verb's own declaration
    (`artifact_maps`), handed to kfp_io."""

    inputs: Mapping[str, str] = dataclasses.field(default_factory=dict)
    outputs: Mapping[str, str | None] = dataclasses.field(default_factory=dict)
    # a dict parameter -> {its key: the raw key it fills} (TFX's train_args / eval_args)
    spreads: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)


def load(value: str) -> dict[str, Any]:
    """The executor input from a JSON string (what `{{$}}` becomes) or a path to a JSON file."""
    text = value
    if not value.lstrip().startswith("{"):
        if not os.path.isfile(value):
            raise UserInputError(
                INPUT, "expected the executor input JSON ('{{$}}') or a file holding it"
            )
        text = bounded_parse.read_text(value, INPUT)
    # KFP's own levels (inputs.parameterValues.custom_config) come on top of a parameter's own
    # nesting
    parsed = bounded_parse.load_json(text, INPUT, max_depth=bounded_parse.MAX_DEPTH + 4)
    if not isinstance(parsed, dict):
        raise UserInputError(
            INPUT,
            "expected KFP's executor input: an object with 'inputs' and 'outputs', got "
            f"{type(parsed).__name__}",
        )
    if "outputs" not in parsed:
        raise UserInputError(
            INPUT,
            "outputs is missing: expected KFP's executor input, an object with 'inputs' "
            "and 'outputs'",
        )
    return parsed


def _object(value: Any, where: str, required: bool = False) -> Mapping[str, Any]:
    """`value` as an object of the executor input, or UserInputError naming its path `where`."""
    if value is None and not required:
        return {}
    if not isinstance(value, Mapping):
        got = "nothing" if value is None else type(value).__name__
        raise UserInputError(INPUT, f"{where} must be an object ({{...}}), got {got}")
    return value


def _first_artifact(entry: Any, where: str, required: bool = False) -> Mapping[str, Any] | None:
    """The first artifact of an executor-input artifact entry (`{"artifacts": [{"uri": ...}]}`),
    checked.

    An input entry with no artifact is an input not given (as kfp's own executor takes it); an
    output entry (`required`) must hold one.
    """
    artifacts = _object(entry, where).get("artifacts")
    if artifacts is not None and not isinstance(artifacts, list):
        raise UserInputError(
            INPUT, f"{where}.artifacts must be a list, got {type(artifacts).__name__}"
        )
    if not artifacts:
        if required:
            raise UserInputError(
                INPUT,
                f"{where}.artifacts must be a list holding the output artifact "
                "(with its uri), got " + ("nothing" if artifacts is None else "an empty list"),
            )
        return None
    artifact = _object(artifacts[0], f"{where}.artifacts[0]")
    uri = artifact.get("uri")
    if not isinstance(uri, str) or not uri:
        raise UserInputError(
            INPUT, f"{where}.artifacts[0].uri must be a non-empty string, got {uri!r}"
        )
    return artifact


def _spread(name: str, args: Any, keys: Mapping[str, str]) -> dict[str, Any]:
    """A dict parameter (TFX's train_args: {"num_steps": N, "splits": [...]}) as the raw values
    its keys fill (`keys`, declared with the option: {"num_steps": "train_steps", ...})."""
    if args in (None, "", {}):
        return {}
    if isinstance(args, str):
        args = bounded_parse.load_json(args, name)
    if not isinstance(args, dict):
        raise UserInputError(name, f"expected an object with the keys {' and '.join(keys)}")
    unknown = set(args) - set(keys)
    if unknown:
        raise UserInputError(name, f"unknown keys {sorted(unknown)}; expected {' and '.join(keys)}")
    return {raw: args.get(key) for key, raw in keys.items()}


def parse(
    executor_input: Mapping[str, Any], artifacts: ArtifactMaps, gcs_root: str = "/gcs"
) -> tuple[dict[str, Any], KfpOutputs]:
    """Raw request values and the output locations from a KFP executor input.

    `artifacts`: which raw value each artifact fills, derived from the running verb's own
    declaration (`intake/options.artifact_maps`; one artifact name may fill different values in
    different verbs).
    """
    inputs = _object(executor_input.get("inputs"), "inputs")
    values: dict[str, Any] = {}
    parameters = _object(inputs.get("parameterValues"), "inputs.parameterValues")
    for name, value in parameters.items():
        if name == "strategy" and "worker_pool_specs" in parameters:
            # GCPC's custom-job wrapper: its `strategy` is Vertex's scheduling strategy (SPOT, ...)
            continue
        if name in artifacts.spreads:
            values.update(_spread(name, value, artifacts.spreads[name]))
        else:
            values[name] = value
    for name, entry in _object(inputs.get("artifacts"), "inputs.artifacts").items():
        artifact = _first_artifact(entry, f"inputs.artifacts.{name}")
        if artifact is not None and name in artifacts.inputs:
            values[artifacts.inputs[name]] = artifact["uri"]
    outputs = _object(executor_input.get("outputs"), "outputs", required=True)
    locations = _output_locations(outputs, gcs_root)
    for name, location in locations.items():
        key = artifacts.outputs.get(name)
        if key:
            values[key] = location["path"]
    output_file = outputs.get("outputFile")
    if not isinstance(output_file, str) or not output_file:
        raise UserInputError(
            INPUT,
            "outputs.outputFile must be a non-empty string (the executor output path), "
            f"got {output_file!r}",
        )
    return values, KfpOutputs(
        output_file=os.path.abspath(output_file),
        artifacts=locations,
        parameters=tuple(_object(outputs.get("parameters"), "outputs.parameters")),
    )


def _output_locations(outputs: Mapping[str, Any], gcs_root: str) -> dict[str, dict[str, str]]:
    """Each output artifact's name, URI, local path and schema title, by its name."""
    locations: dict[str, dict[str, str]] = {}
    for name, entry in _object(outputs.get("artifacts"), "outputs.artifacts").items():
        artifact = _first_artifact(entry, f"outputs.artifacts.{name}", required=True)
        kind = _object(artifact.get("type"), f"outputs.artifacts.{name}.artifacts[0].type")
        locations[name] = {
            "name": str(artifact.get("name") or ""),
            "uri": artifact["uri"],
            "path": storage.local_path(artifact["uri"], gcs_root),
            "schema_title": str(kind.get("schemaTitle") or ""),
        }
    return locations


def write_executor_output(
    kfp: KfpOutputs,
    metadata: Mapping[str, Mapping[str, Any]],
    parameter_values: Mapping[str, Any] | None = None,
    output_file: str | None = None,
) -> None:
    """Write the executor output: every output artifact (with its metadata, even when empty).

    kfp's local runner drops the output artifacts of a task that wrote no executor output, so
    each artifact is listed whether or not it has metadata. A write that fails is OutputError (exit
    4); the verbs call this before they publish their main output, so a failure publishes nothing.
    """
    artifacts = {
        name: {
            "artifacts": [
                {"name": art["name"], "uri": art["uri"], "metadata": dict(metadata.get(name, {}))}
            ]
        }
        for name, art in kfp.artifacts.items()
    }
    body: dict[str, Any] = {"artifacts": artifacts}
    if parameter_values:
        body["parameterValues"] = dict(parameter_values)
    path = output_file or kfp.output_file
    # strict JSON: KFP's launcher does not parse NaN / Infinity (a diverged loss is written as null)
    try:
        files.write_file_atomic(
            path, files.dumps_strict(body, "executor output value", indent=2, default=str)
        )
    except files.OutputWriteError as e:
        raise OutputError(f"could not write the executor output {path}: {e.reason}") from e
