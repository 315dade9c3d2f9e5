"""The requests of the judging verbs, evaluate and infra-validate: their typed fields and how raw inputs become them.

The simple fields come from the checks declared in judge_options.py (options.checked_fields); the
model, examples, eval config and blessing dir are resolved here.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from generic_trainer.artifacts.kfp_io import KfpOutputs
from generic_trainer.errors import UserInputError
from generic_trainer.intake import judge_options, options
from generic_trainer.intake.request import (
    DEFAULT_PROBE_MEMORY,
    examples_dir,
    existing_path,
    ints_from_floats,
    model_dir,
    raw_inputs,
    required_out_dir,
)
from generic_trainer.intake.request_json import JsonRequest


@dataclasses.dataclass(frozen=True)
class EvaluateRequest(JsonRequest):
    """Every input of an evaluate run: a model (and optional baseline) on the eval split, resolved."""

    model: str
    examples: str
    eval_config: Any  # eval_config.EvalConfig
    blessing_dir: str
    baseline_model: str | None = None
    schema: str | None = None
    eval_splits: tuple[str, ...] = ("eval",)
    batch_size: int = 256
    metrics_file: str | None = None
    report_file: str | None = None
    gcs_root: str = "/gcs"
    kfp: KfpOutputs | None = None
    timeout: float = 300.0  # the sandboxed evaluation process: seconds without progress
    memory_limit: int | None = DEFAULT_PROBE_MEMORY  # its address space; None: no limit, GPUs

    @classmethod
    def decode_field(cls, name: str, value: object) -> object:
        """`eval_config` through EvalConfig.from_json; the others as they are."""
        if name != "eval_config":
            return value
        from generic_trainer.judge.eval_config import EvalConfig

        return EvalConfig.from_json(value)


def build_evaluate_request(
    values: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    kfp: KfpOutputs | None = None,
) -> EvaluateRequest:
    """Validate raw values (keyed by flag name, dashes as underscores) into an EvaluateRequest."""
    from generic_trainer.judge.eval_config_reader import parse_eval_config

    raw = raw_inputs(values, environ, kfp)
    gcs_root = raw.gcs_root
    eval_config = values.get("eval_config")
    if kfp is not None and isinstance(eval_config, Mapping):
        eval_config = ints_from_floats(dict(eval_config))
    return EvaluateRequest(
        model=model_dir("--model", values.get("model"), gcs_root, required=True),
        examples=examples_dir(values, gcs_root),
        eval_config=parse_eval_config(eval_config, gcs_root),
        blessing_dir=required_out_dir(
            "--blessing-dir",
            values.get("blessing_dir"),
            gcs_root,
            "where the blessing (BLESSED or NOT_BLESSED) goes",
        ),
        baseline_model=model_dir(
            "--baseline-model", values.get("baseline_model"), gcs_root, required=False
        ),
        gcs_root=gcs_root,
        kfp=kfp,
        **options.checked_fields(judge_options.EVALUATE, raw),
    )


@dataclasses.dataclass(frozen=True)
class InfraValidateRequest:
    """Every input of an infra-validate run: a model tried in a sandboxed serving process, resolved."""

    model: str
    examples: str
    blessing_dir: str
    model_blessing: str | None = None
    eval_splits: tuple[str, ...] = ("eval",)
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
    """Validate raw values (keyed by flag name, dashes as underscores) into an InfraValidateRequest."""
    raw = raw_inputs(values, environ, kfp)
    gcs_root = raw.gcs_root
    model_blessing = existing_path("--model-blessing", values.get("model_blessing"), gcs_root)
    if model_blessing and not os.path.isdir(model_blessing):
        raise UserInputError(
            "--model-blessing",
            f"{values.get('model_blessing')} is not a directory (the "
            "evaluator's blessing dir holds BLESSED or NOT_BLESSED)",
        )
    return InfraValidateRequest(
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
