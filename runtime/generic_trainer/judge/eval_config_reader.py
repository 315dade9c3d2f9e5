"""Reading `--eval-config` (a JSON object, a file, or a gs:// file) into an
`eval_config.EvalConfig`, or the text of a TFMA EvalConfig.

Every error is a UserInputError naming the key (`eval_config.thresholds.auc`); no TensorFlow here.
The format is described in eval_config.py; the fields are read by eval_config_fields.py and
eval_config_metrics.py.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from generic_trainer.artifacts import bounded_parse
from generic_trainer.errors import UserInputError
from generic_trainer.judge.eval_config import (
    BUILTIN_METRICS,
    INPUT,
    KNOWN_KEYS,
    MAX_CI_SAMPLES,
    PROBLEMS,
    EvalConfig,
)
from generic_trainer.judge.eval_config_fields import (
    slice_thresholds,
    slices,
    string,
    thresholds,
    unknown_keys,
)
from generic_trainer.judge.eval_config_metrics import metrics


def _confidence_intervals(value: Any) -> tuple[int, int, float]:
    key = "eval_config.confidence_intervals"
    if value is None:
        return 0, 0, 0.95
    if not isinstance(value, Mapping):
        raise UserInputError(key, f'expected an object like {{"samples": 100}}, got {value!r}')
    unknown_keys("confidence_intervals", value, ("samples", "seed", "level"))
    samples, seed, level = value.get("samples", 100), value.get("seed", 0), value.get("level", 0.95)
    if (
        isinstance(samples, bool)
        or not isinstance(samples, int)
        or not 2 <= samples <= MAX_CI_SAMPLES
    ):
        raise UserInputError(
            f"{key}.samples",
            f"expected a whole number of bootstrap samples in 2..{MAX_CI_SAMPLES}, got {samples!r}",
        )
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise UserInputError(f"{key}.seed", f"expected a whole number >= 0, got {seed!r}")
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise UserInputError(
            f"{key}.level", f"expected a number between 0 and 1 (0.95), got {level!r}"
        )
    return samples, seed, float(level)


def _read(value: Any, gcs_root: str) -> Any:
    """The config as a dict (JSON), or the text of a TFMA text proto (checked); inline or a file."""
    from generic_trainer.judge import eval_tfma

    if not isinstance(value, str):
        return value
    text = value
    if not value.lstrip().startswith("{") and not eval_tfma.looks_like_text_proto(value):
        from generic_trainer.artifacts import storage

        path = storage.local_path(value, gcs_root)
        if not os.path.isfile(path):
            raise UserInputError(
                INPUT,
                f"{value} is neither a JSON object, a TFMA EvalConfig text proto nor an "
                "existing file",
            )
        text = bounded_parse.read_text(path, INPUT)
    if not text.lstrip().startswith("{"):
        eval_tfma.parse_text_proto(text)
        return text
    return bounded_parse.load_json(text, INPUT)


def _label_vocabulary(value: Any, problem: str | None) -> tuple[str, ...] | None:
    """The class names, in class-id order (TFMA maps string labels through them)."""
    key = "eval_config.label_vocabulary"
    if value is None:
        return None
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise UserInputError(key, f"expected a list of strings, got {value!r}")
    if len(set(value)) != len(value):
        raise UserInputError(key, "lists a label twice")
    if problem == "regression":
        raise UserInputError(key, "a regression label is a number, not a class name")
    if problem == "binary" and len(value) != 2:
        raise UserInputError(key, f"a binary label has 2 classes; {len(value)} given")
    return tuple(value)


def _keys(value: Mapping[str, Any]) -> dict[str, Any]:
    """The model spec's keys, the problem and from_logits."""
    problem = value.get("problem") or None
    if problem is not None and problem not in PROBLEMS:
        raise UserInputError(
            "eval_config.problem", f"expected one of {', '.join(PROBLEMS)}, got {problem!r}"
        )
    from_logits = value.get("from_logits", False)
    if not isinstance(from_logits, bool):
        raise UserInputError(
            "eval_config.from_logits", f"expected true or false, got {from_logits!r}"
        )
    optional = ("prediction_key", "example_weight_key")
    return {
        "label_key": string("label_key", value.get("label_key")),
        **{k: string(k, value[k]) if value.get(k) else None for k in optional},
        "problem": problem,
        "from_logits": from_logits,
        "label_vocabulary": _label_vocabulary(value.get("label_vocabulary"), problem),
    }


def _short_form(value: Mapping[str, Any]) -> EvalConfig:
    """The short form's EvalConfig of a parsed JSON object."""
    unknown_keys("", value, KNOWN_KEYS)
    keys = _keys(value)
    names, custom = metrics(value.get("metrics"))
    known = set(BUILTIN_METRICS) | {m.name for m in custom}
    overall = thresholds("thresholds", value.get("thresholds") or {}, known)
    per_slice = slice_thresholds(value.get("slice_thresholds"), known)
    specs = slices(value.get("slices"))
    specs += [s.slice for s in per_slice if s.slice.columns and s.slice not in specs]  # judged
    samples, seed, level = _confidence_intervals(value.get("confidence_intervals"))
    config = EvalConfig(
        **keys,
        metrics=names,
        slices=tuple(specs),
        thresholds=tuple(overall),
        custom_metrics=custom,
        slice_thresholds=tuple(per_slice),
        ci_samples=samples,
        ci_seed=seed,
        ci_level=level,
    )
    if config.problem:
        config.metrics_for(config.problem)  # metrics not defined for it fail before TF loads
    return config


def parse_eval_config(value: Any, gcs_root: str = "/gcs") -> EvalConfig | str:
    """The short form's EvalConfig, or a TFMA EvalConfig's JSON or text (TFMA parses it in the
    evaluation process).

    Args:
      value: a dict, a JSON string, a text proto, or the path (or gs:// URI) of a file of one.
      gcs_root: where gs:// URIs are mounted.

    Returns:
      The short form's EvalConfig, or the TFMA config's text.
    """
    from generic_trainer.judge import eval_tfma

    if value is None or value == "" or value == {}:
        raise UserInputError(
            INPUT, 'required: a JSON object (or file) with at least {"label_key": "..."}'
        )
    value = _read(value, gcs_root)
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and eval_tfma.is_tfma_config(value):
        import json

        return json.dumps(value)
    if not isinstance(value, Mapping):
        raise UserInputError(INPUT, f"expected a JSON object, got {type(value).__name__}")
    return _short_form(value)
