"""The evaluation process (sandbox.py's child): TFMA from the request to a result (as JSON).

`python -m generic_trainer.judge.sandbox generic_trainer.judge.tfma_evaluation:compute_spec SPEC
RESULT`: SPEC holds the evaluate request's JSON, where TFMA writes its output, and the module file's
local path. The EvalConfig is prepared (tfma_config.py), TFMA runs (tfma_run.py), and what it wrote
is read back (tfma_result.py) into the dict evaluate.EvaluateResult is made of.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping
from typing import Any

from generic_trainer.judge import sandbox, tfma_config, tfma_result, tfma_run

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Job:
    """What the evaluation process needs of the request (its JSON fields)."""

    model: str
    examples: str
    eval_config: Any  # the short form's JSON (a dict) or TFMA's EvalConfig text (a str)
    baseline_model: str | None
    schema: str | None
    eval_splits: tuple[str, ...]
    eval_files: tuple[str, ...]  # the eval splits' file patterns, resolved at intake
    feature_slicing_spec: tuple[tuple[str, ...], ...]
    fairness_indicator_thresholds: tuple[float, ...]
    beam_args: tuple[str, ...]
    module_file: str | None

    @classmethod
    def from_request_json(cls, value: Mapping[str, Any]) -> Job:
        """The Job of an EvaluateRequest.to_json()."""
        names = [f.name for f in dataclasses.fields(cls)]
        fields = {n: value.get(n) for n in names}
        for name in ("eval_splits", "eval_files", "fairness_indicator_thresholds", "beam_args"):
            fields[name] = tuple(fields[name] or ())
        fields["feature_slicing_spec"] = tuple(
            tuple(c) for c in fields["feature_slicing_spec"] or ()
        )
        return cls(**fields)


def _first_record(job: Job) -> bytes:
    from generic_trainer.errors import UserInputError
    from generic_trainer.records import example_files

    for pattern in job.eval_files:
        for path in example_files.split_files(pattern):
            for record in example_files.read_records(path, limit=1):
                return record
    raise UserInputError(
        "--examples", f"the eval split(s) {', '.join(job.eval_splits)} hold no examples"
    )


def eval_config(job: Job) -> tuple[Any, bool, str]:
    """(the prepared TFMA EvalConfig, whether it has thresholds, the short form's problem or "")."""
    from google.protobuf import json_format
    from tensorflow_model_analysis.proto import config_pb2

    from generic_trainer.artifacts.outputs import serving_model_path
    from generic_trainer.judge import eval_problem, eval_short_form
    from generic_trainer.judge.eval_config import EvalConfig

    problem = ""
    if isinstance(job.eval_config, str):
        config = tfma_config.parse(job.eval_config)
    else:
        short = EvalConfig.from_json(job.eval_config)
        serving = serving_model_path(job.model)
        problem, width = eval_problem.infer(short, serving, _first_record(job))
        tfma_json = eval_short_form.to_tfma(short, problem, width)
        config = json_format.ParseDict(tfma_json, config_pb2.EvalConfig())
    if job.feature_slicing_spec:
        tfma_config.add_feature_slicing_spec(config, job.feature_slicing_spec)
    if job.fairness_indicator_thresholds:
        tfma_config.add_fairness_indicators(config, job.fairness_indicator_thresholds)
    tfma_config.import_fairness_indicators()
    config, validated = tfma_config.with_defaults(config, bool(job.baseline_model))
    return config, validated, problem


def _check_inputs(job: Job, config: Any, module: Any) -> None:
    """TFMA can feed each model's signature from the examples (tfma_inputs.py), unless the module
    file makes the models."""
    from generic_trainer.artifacts.outputs import serving_model_path
    from generic_trainer.judge import signature_feed, tfma_inputs

    if getattr(module, "custom_eval_shared_model", None) is not None:
        return

    def features() -> tuple[dict[str, Any], str]:
        if job.schema:
            return signature_feed.schema_features(job.schema), f"in the schema {job.schema}"
        return signature_feed.example_features(_first_record(job)), "in the first eval example"

    paths = {False: serving_model_path(job.model)}
    if job.baseline_model:
        paths[True] = serving_model_path(job.baseline_model)
    tfma_inputs.check(config, paths, features)


def _names(config: Any) -> tuple[str, str | None]:
    """(candidate model name, baseline model name or None) of the prepared config."""
    candidate = next(s.name for s in config.model_specs if not s.is_baseline)
    baseline = next((s.name for s in config.model_specs if s.is_baseline), None)
    return candidate, baseline


def compute(job: Job, output: str, module_path: str | None) -> dict[str, Any]:
    """Run TFMA for `job` (its output in `output`); evaluate.EvaluateResult's fields."""
    from google.protobuf import json_format

    started = time.monotonic()
    sandbox.progress("importing TFMA")
    module = tfma_run.load_module(module_path, job.module_file)
    config, validated, problem = eval_config(job)
    log.info("TFMA EvalConfig: %s", json_format.MessageToJson(config, indent=None))
    _check_inputs(job, config, module)
    sandbox.progress("loading the models")
    models = tfma_run.shared_models(job, config, module)
    sandbox.progress("running TFMA")
    vocabulary = (
        job.eval_config.get("label_vocabulary") if isinstance(job.eval_config, dict) else None
    )
    tfma_run.run_pipeline(job, config, models, module, output, vocabulary or ())
    candidate, baseline = _names(config)
    slices = tfma_result.read_slices(output, candidate, baseline)
    ok, reasons, failed = tfma_result.failures(output)
    if not validated:  # TFMA's missing_thresholds: TFX's Evaluator validates nothing then
        ok, reasons = True, []
    overall = slices[0] if slices and slices[0]["slice"] == tfma_result.OVERALL else None
    log.info("TFMA ran in %.1f s", time.monotonic() - started)
    return {
        "blessed": ok,
        "reasons": reasons,
        "validated": validated,
        "problem": problem,
        "metrics": overall["metrics"] if overall else {},
        "baseline_metrics": overall["baseline_metrics"] if overall else None,
        "confidence_intervals": overall["confidence_intervals"] if overall else None,
        "slices": slices,
        "thresholds": tfma_result.threshold_rows(config, candidate, slices, failed),
        "tfma_eval_config": json_format.MessageToDict(config, preserving_proto_field_name=True),
    }


def compute_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """The sandbox's entry: the spec evaluate.py wrote -> the result's fields."""
    job = Job.from_request_json(spec["request"])
    return compute(job, spec["output"], spec.get("module_path"))
