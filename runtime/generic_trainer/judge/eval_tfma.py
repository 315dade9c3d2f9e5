"""Telling a TFMA `EvalConfig` (JSON or text proto) from the short form, before TFMA loads.

A TFMA config is handed to TFMA as it is (tfma_config.py parses it with TFMA's own message in the
evaluation process, so every field TFMA has works). Here only: whether a text or JSON object is one
(its top-level fields are EvalConfig's), and a text proto's syntax and nesting checked with the
bounded reader (textproto.py), so a malformed or hostile text fails at the edge, naming the input.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from generic_trainer.errors import UserInputError

# EvalConfig's top-level fields (tensorflow_model_analysis/proto/config.proto)
TOP_LEVEL = frozenset(
    {"model_specs", "slicing_specs", "cross_slicing_specs", "metrics_specs", "options"}
)
_TEXT_PROTO_START = re.compile(r"^\s*(#[^\n]*\n\s*)*(" + "|".join(sorted(TOP_LEVEL)) + r")\s*[:{<]")


def keras_metric_name(class_name: str) -> str:
    """Keras' default metric name: AUC -> auc, BinaryAccuracy -> binary_accuracy."""
    name = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", class_name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


def _snake(name: str) -> str:
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name)


def looks_like_text_proto(text: str) -> bool:
    """Whether `text` starts like a TFMA EvalConfig in text format (`model_specs { ...`)."""
    return bool(_TEXT_PROTO_START.match(text))


def is_tfma_config(value: Mapping[str, Any]) -> bool:
    """Whether a parsed JSON object is a TFMA EvalConfig (its top-level fields)."""
    return any(_snake(k) in TOP_LEVEL for k in value)


def parse_text_proto(text: str) -> list[tuple[str, Any]]:
    """The fields of a text proto (textproto.parse), or a UserInputError naming --eval-config."""
    from generic_trainer.judge import textproto

    try:
        return textproto.parse(text)
    except ValueError as e:
        raise UserInputError(
            "--eval-config", f"not a valid text proto (TFMA EvalConfig): {e}"
        ) from None
