"""The KFP v2 executor contract: executor input in, executor output out.

Reads the JSON KFP substitutes for `{{$}}` into the same raw values the CLI flags give
(`examples`, `module_file`, `train_steps`, ...) plus a `KfpOutputs` naming where each output
artifact goes, and writes the executor-output file (artifacts with metadata, parameter values).
Only the chief calls `write_executor_output`: several replicas writing one file over GCS FUSE fails.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from generic_trainer import storage
from generic_trainer.errors import UserInputError
from generic_trainer.request import KfpOutputs

INPUT = "--executor-input"

# Input artifact name -> request key.
INPUT_ARTIFACTS = {
    "examples": "examples",
    "schema": "schema",
    "transform_graph": "transform_graph",
    "hyperparameters": "hyperparameters",
    "base_model": "base_model",
    "model": "model",
    "baseline_model": "baseline_model",
    "model_blessing": "model_blessing",
}
# Output artifact name -> request key its local path fills.
OUTPUT_ARTIFACTS = {
    "model": "model_dir",
    "model_run": "model_run_dir",
    "metrics": None,
    "report": "report_file",
    "best_hyperparameters": "best_hyperparameters_dir",
    "tuner_results": "tuner_results_dir",
    "blessing": "blessing_dir",
    "evaluation": "metrics_file",
}


def load(value: str) -> dict[str, Any]:
    """The executor input from a JSON string (what `{{$}}` becomes) or a path to a JSON file."""
    text = value
    if not value.lstrip().startswith("{"):
        if not os.path.isfile(value):
            raise UserInputError(INPUT, "expected the executor input JSON ('{{$}}') or a file holding it")
        with open(value, encoding="utf-8") as f:
            text = f.read()
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as e:
        raise UserInputError(INPUT, f"not valid JSON ({e.msg} at position {e.pos})") from None
    if not isinstance(parsed, dict) or "outputs" not in parsed:
        raise UserInputError(INPUT, "expected KFP's executor input: an object with 'inputs' and 'outputs'")
    return parsed


def _first_artifact(entry: Mapping[str, Any]) -> Mapping[str, Any] | None:
    artifacts = entry.get("artifacts") or []
    return artifacts[0] if artifacts else None


def _flatten_args(prefix: str, args: Any) -> dict[str, Any]:
    """TFX-style train_args / eval_args ({"num_steps": N, "splits": [...]}) to flag values."""
    if args in (None, "", {}):
        return {}
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            raise UserInputError(f"{prefix}_args", "expected a JSON object like {\"num_steps\": 100}") from None
    if not isinstance(args, dict):
        raise UserInputError(f"{prefix}_args", "expected an object like {\"num_steps\": 100, \"splits\": [\"train\"]}")
    unknown = set(args) - {"num_steps", "splits"}
    if unknown:
        raise UserInputError(f"{prefix}_args", f"unknown keys {sorted(unknown)}; expected num_steps and splits")
    return {f"{prefix}_steps": args.get("num_steps"), f"{prefix}_splits": args.get("splits")}


def parse(executor_input: Mapping[str, Any], gcs_root: str = "/gcs") -> tuple[dict[str, Any], KfpOutputs]:
    """Raw request values and the output locations from a KFP executor input."""
    inputs = executor_input.get("inputs") or {}
    values: dict[str, Any] = {}
    parameters = inputs.get("parameterValues") or {}
    for name, value in parameters.items():
        if name == "strategy" and "worker_pool_specs" in parameters:
            continue  # GCPC's custom-job wrapper: its `strategy` is Vertex's scheduling strategy (SPOT, ...)
        if name in ("train_args", "eval_args"):
            values.update(_flatten_args(name[: -len("_args")], value))
        else:
            values[name] = value
    for name, entry in (inputs.get("artifacts") or {}).items():
        artifact = _first_artifact(entry)
        if artifact is not None and name in INPUT_ARTIFACTS:
            values[INPUT_ARTIFACTS[name]] = artifact["uri"]
    outputs = executor_input["outputs"]
    artifacts: dict[str, dict[str, str]] = {}
    for name, entry in (outputs.get("artifacts") or {}).items():
        artifact = _first_artifact(entry)
        if artifact is None:
            continue
        path = storage.local_path(artifact["uri"], gcs_root)
        artifacts[name] = {
            "name": artifact.get("name", ""),
            "uri": artifact["uri"],
            "path": path,
            "schema_title": (artifact.get("type") or {}).get("schemaTitle", ""),
        }
        key = OUTPUT_ARTIFACTS.get(name)
        if key:
            values[key] = path
    output_file = outputs.get("outputFile")
    if not output_file:
        raise UserInputError(INPUT, "outputs.outputFile is missing")
    return values, KfpOutputs(output_file=output_file, artifacts=artifacts,
                              parameters=tuple(outputs.get("parameters") or {}))


def write_executor_output(
    kfp: KfpOutputs,
    metadata: Mapping[str, Mapping[str, Any]],
    parameter_values: Mapping[str, Any] | None = None,
    output_file: str | None = None,
) -> None:
    """Write the executor output: every output artifact (with its metadata, even when empty).

    kfp's local runner drops the output artifacts of a task that wrote no executor output, so
    each artifact is listed whether or not it has metadata.
    """
    artifacts = {
        name: {"artifacts": [{"name": art["name"], "uri": art["uri"], "metadata": dict(metadata.get(name, {}))}]}
        for name, art in kfp.artifacts.items()
    }
    body: dict[str, Any] = {"artifacts": artifacts}
    if parameter_values:
        body["parameterValues"] = dict(parameter_values)
    storage.write_file_atomic(output_file or kfp.output_file, json.dumps(body, indent=2, default=str))
