"""The requests of the judging verbs, evaluate and infra-validate: their typed fields and how raw
inputs become them.

The simple fields come from the checks declared in judge_options.py (options.checked_fields); the
model, examples, eval config and blessing dir are resolved here.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping
from typing import Any, TypeVar

from generic_trainer.artifacts.kfp_io import KfpOutputs
from generic_trainer.artifacts.storage_settings import DEFAULT_SETTINGS, StorageSettings
from generic_trainer.errors import UserInputError
from generic_trainer.intake import judge_options, options
from generic_trainer.intake.environment import storage_settings
from generic_trainer.intake.paths import (
    examples_dir,
    model_dir,
    required_out_dir,
    split_patterns,
)
from generic_trainer.intake.request import (
    DEFAULT_PROBE_MEMORY,
    existing_path,
    raw_inputs,
)
from generic_trainer.intake.request_json import JsonRequest
from generic_trainer.intake.values import (
    ints_from_floats,
)

log = logging.getLogger(__name__)
RequestT = TypeVar("RequestT", "EvaluateRequest", "InfraValidateRequest")


@dataclasses.dataclass(frozen=True)
class EvaluateRequest(JsonRequest):
    """Every input of an evaluate run: a model (and optional baseline) on the eval split, resolved.

    `eval_config` is the project's short form (eval_config.EvalConfig) or a TFMA EvalConfig as its
    JSON or text proto (a str), which TFMA parses in the evaluation process.
    """

    model: str
    examples: str
    eval_config: Any  # eval_config.EvalConfig | str
    blessing_dir: str
    baseline_model: str | None = None
    schema: str | None = None
    eval_splits: tuple[str, ...] = ("eval",)
    eval_files: tuple[str, ...] = ()  # `<examples>/Split-<name>/*` per eval split (at intake)
    evaluation_dir: str | None = None
    metrics_file: str | None = None
    report_file: str | None = None
    records_dir: str | None = None  # when BLESSED, the model is recorded there (resolve reads it)
    module_file: str | None = None
    feature_slicing_spec: tuple[tuple[str, ...], ...] = ()
    fairness_indicator_thresholds: tuple[float, ...] = ()
    beam_args: tuple[str, ...] = ()
    gcs_root: str = "/gcs"
    kfp: KfpOutputs | None = None
    storage: StorageSettings = DEFAULT_SETTINGS  # fetching the module file; not carried
    timeout: float = 300.0  # the sandboxed evaluation process: seconds without progress
    memory_limit: int | None = DEFAULT_PROBE_MEMORY  # its address space; None: no limit, GPUs

    @property
    def tfma_config(self) -> str | None:
        """The TFMA EvalConfig's text (JSON or text proto), None for the short form."""
        return self.eval_config if isinstance(self.eval_config, str) else None

    @classmethod
    def decode_field(cls, name: str, value: object) -> object:
        """`eval_config` through EvalConfig.from_json (a str stays); the others as they are."""
        if name == "feature_slicing_spec":
            return tuple(tuple(c) for c in value)  # type: ignore[union-attr]
        if name != "eval_config" or isinstance(value, str):
            return value
        from generic_trainer.judge.eval_config import EvalConfig

        return EvalConfig.from_json(value)  # type: ignore[arg-type]


def build_evaluate_request(
    values: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    kfp: KfpOutputs | None = None,
) -> EvaluateRequest:
    """Validate raw values (keyed by flag name, dashes as underscores) into an EvaluateRequest."""
    from generic_trainer.beam.beam_run import parse_beam_args
    from generic_trainer.judge.eval_config_reader import parse_eval_config

    raw = raw_inputs(values, environ, kfp)
    gcs_root = raw.gcs_root
    eval_config = values.get("eval_config")
    if kfp is not None and isinstance(eval_config, Mapping):
        eval_config = ints_from_floats(dict(eval_config))
    evaluation = values.get("evaluation_dir")
    request = EvaluateRequest(
        model=model_dir("--model", values.get("model"), gcs_root, required=True),
        examples=examples_dir(values, gcs_root),
        eval_config=parse_eval_config(eval_config, gcs_root),
        blessing_dir=required_out_dir(
            "--blessing-dir",
            values.get("blessing_dir"),
            gcs_root,
            "where the blessing (BLESSED or NOT_BLESSED) goes",
        ),
        baseline_model=baseline_model(values.get("baseline_model"), gcs_root),
        evaluation_dir=(
            required_out_dir("--evaluation-dir", evaluation, gcs_root, "") if evaluation else None
        ),
        module_file=values.get("module_file") or None,
        beam_args=parse_beam_args(values.get("beam_pipeline_args")),
        gcs_root=gcs_root,
        kfp=kfp,
        storage=storage_settings(raw.environ),
        **options.checked_fields(judge_options.EVALUATE, raw),
    )
    return _with_eval_files(request)


def _with_eval_files(request: RequestT) -> RequestT:
    """The request with its eval_files: --examples resolved once, for its eval splits."""
    files = split_patterns(request.examples, request.eval_splits)
    return dataclasses.replace(request, eval_files=files)


def baseline_model(value: Any, gcs_root: str) -> str | None:
    """The baseline model dir; None when absent or when a resolver resolved nothing (TFX: an
    empty channel; change thresholds are then skipped)."""
    from generic_trainer.tfx_kfp import model_records

    path = model_dir("--baseline-model", value, gcs_root, required=False)
    if path and model_records.resolved_nothing(path):
        log.info("--baseline-model: the resolver found no blessed model yet: no baseline")
        return None
    return path


@dataclasses.dataclass(frozen=True)
class InfraValidateRequest:
    """Every input of an infra-validate run: a model tried in a sandboxed serving process,
    resolved."""

    model: str
    examples: str
    blessing_dir: str
    model_blessing: str | None = None
    eval_splits: tuple[str, ...] = ("eval",)
    eval_files: tuple[str, ...] = ()  # `<examples>/Split-<name>/*` per eval split (at intake)
    num_requests: int = 10
    batch_size: int = 8
    timeout: float = 300.0
    memory_limit: int | None = DEFAULT_PROBE_MEMORY
    metrics_file: str | None = None
    gcs_root: str = "/gcs"
    kfp: KfpOutputs | None = None
    schema: str | None = None  # describes the features tensor inputs are parsed from
    write_warmup: int = 0  # TF Serving warm-up requests written into the blessed model


def build_infra_validate_request(
    values: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    kfp: KfpOutputs | None = None,
) -> InfraValidateRequest:
    """Validate raw values (keyed by flag name, dashes as underscores) into an
    InfraValidateRequest."""
    raw = raw_inputs(values, environ, kfp)
    gcs_root = raw.gcs_root
    model_blessing = existing_path("--model-blessing", values.get("model_blessing"), gcs_root)
    if model_blessing and not os.path.isdir(model_blessing):
        raise UserInputError(
            "--model-blessing",
            f"{values.get('model_blessing')} is not a directory (the "
            "evaluator's blessing dir holds BLESSED or NOT_BLESSED)",
        )
    request = InfraValidateRequest(
        model=model_dir("--model", values.get("model"), gcs_root, required=True),
        examples=examples_dir(values, gcs_root),
        blessing_dir=required_out_dir(
            "--blessing-dir",
            values.get("blessing_dir"),
            gcs_root,
            "where the blessing (INFRA_BLESSED or INFRA_NOT_BLESSED) goes",
        ),
        model_blessing=model_blessing,
        gcs_root=gcs_root,
        kfp=kfp,
        **options.checked_fields(judge_options.INFRA_VALIDATE, raw),
    )
    return _with_eval_files(request)
