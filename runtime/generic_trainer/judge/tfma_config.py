"""The TFMA `EvalConfig` an evaluation runs, as TFX's Evaluator prepares it (evaluation process).

The config comes as TFMA's text proto or JSON (parsed by TFMA's own message, so every field TFMA has
works), or as the project's short form (eval_short_form.py, once the problem is known). Then, as
TFX's Evaluator executor does: the legacy `feature_slicing_spec`'s column lists become slicing specs
(the overall slice always included), `fairness_indicator_thresholds` add TFMA's FairnessIndicators
metric, and `update_eval_config_with_defaults(has_baseline=..., rubber_stamp=True)` adds the
baseline model spec when there is a baseline and drops change thresholds when there is none.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from generic_trainer.errors import UserInputError

log = logging.getLogger(__name__)
INPUT = "--eval-config"
FAIRNESS_MODULE = "fairness_indicators.fairness_indicators_metrics"


def parse(text: str) -> Any:
    """TFMA's EvalConfig message from its JSON or text proto (a UserInputError naming the field)."""
    from google.protobuf import json_format, text_format
    from tensorflow_model_analysis.proto import config_pb2

    config = config_pb2.EvalConfig()
    try:
        if text.lstrip().startswith("{"):
            json_format.Parse(text, config)
        else:
            text_format.Parse(text, config)
    except (json_format.ParseError, text_format.ParseError) as e:
        raise UserInputError(INPUT, f"not a TFMA EvalConfig: {e}") from None
    return config


def add_feature_slicing_spec(config: Any, spec: Sequence[Sequence[str]]) -> None:
    """TFX's legacy FeatureSlicingSpec (column lists) as slicing specs, the overall one included."""
    from tensorflow_model_analysis.proto import config_pb2

    wanted = [config_pb2.SlicingSpec(feature_keys=list(columns)) for columns in spec]
    wanted.append(config_pb2.SlicingSpec())
    for slicing in wanted:
        if slicing not in config.slicing_specs:
            config.slicing_specs.append(slicing)


def add_fairness_indicators(config: Any, thresholds: Sequence[float]) -> None:
    """TFMA's FairnessIndicators at these thresholds (TFX's fairness_indicator_thresholds)."""
    from tensorflow_model_analysis.proto import config_pb2

    metric = config_pb2.MetricConfig(
        class_name="FairnessIndicators",
        module=FAIRNESS_MODULE,
        config=json.dumps({"thresholds": list(thresholds)}),
    )
    config.metrics_specs.append(config_pb2.MetricsSpec(metrics=[metric]))


def import_fairness_indicators() -> None:
    """Register FairnessIndicators with TFMA (fairness-indicators package; absent: a log line)."""
    import importlib

    try:
        importlib.import_module(FAIRNESS_MODULE)
    except ImportError as e:
        log.info("FairnessIndicators unavailable (%s)", e)


def _has_change_thresholds(config: Any) -> bool:
    from google.protobuf import json_format

    return '"changeThreshold"' in json.dumps(json_format.MessageToDict(config))


def with_defaults(config: Any, has_baseline: bool) -> tuple[Any, bool]:
    """TFX's preparation: (the config with its defaults, whether any threshold is set).

    Raises:
      UserInputError: TFMA refuses the config (verify_eval_config), naming why.
    """
    import tensorflow_model_analysis as tfma

    if not has_baseline and _has_change_thresholds(config):
        log.info(
            "no baseline model: change thresholds are skipped (TFX's rubber stamp); the model is "
            "judged on its value thresholds only"
        )
    try:
        config = tfma.utils.update_eval_config_with_defaults(
            config, has_baseline=has_baseline, rubber_stamp=True
        )
        tfma.utils.verify_eval_config(config)
        thresholds = tfma.metrics.metric_thresholds_from_metrics_specs(
            config.metrics_specs, eval_config=config
        )
    except (ValueError, TypeError, NotImplementedError) as e:
        raise UserInputError(INPUT, f"TFMA refuses the EvalConfig: {e}") from None
    if len(config.model_specs) > 2:
        raise UserInputError(
            INPUT, f"at most two models (candidate, baseline); {len(config.model_specs)} given"
        )
    return config, bool(thresholds)
