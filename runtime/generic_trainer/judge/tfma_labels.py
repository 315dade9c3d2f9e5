"""String labels mapped to class ids the way TFMA maps them: through the predictions' classes.

TFMA 0.52 has no EvalConfig field for a label vocabulary. It maps string labels to class ids in
`metric_util.prepare_labels_and_predictions`, for every metric, when the model's prediction is a
dict that carries the class names: `all_classes` (or `classes` beside `scores`, the estimator's and
TFX's classification signature). For the short form's `label_vocabulary`, `with_vocabulary` puts an
extractor just before TFMA's slice-key extractor (where the extracts are per example and before
the metrics are computed) that turns each model's prediction `p` into `{key: p, "all_classes":
vocabulary}`, `key` being the model spec's `prediction_key` (or `probabilities`, a key TFMA looks
for). TFMA then does the lookup itself: a label not in the vocabulary becomes TFMA's -1 (no class).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

log = logging.getLogger(__name__)
STAGE = "AttachLabelVocabulary"
ALL_CLASSES = "all_classes"  # metric_util._ALL_CLASSES
PROBABILITIES = "probabilities"  # metric_util._PROBABILITIES


class AttachClasses:
    """Per example: each model's prediction as a dict carrying the vocabulary (picklable)."""

    def __init__(self, vocabulary: Sequence[str], keys: dict[str, str], by_model: bool):
        self.vocabulary = [v.encode("utf-8") for v in vocabulary]  # the labels are bytes
        self.keys = keys  # model name -> the key the prediction goes under
        self.by_model = by_model  # predictions keyed by model name (a baseline is evaluated)

    def _wrap(self, prediction: Any, key: str) -> dict[str, Any]:
        import numpy as np

        classes = np.array(self.vocabulary, dtype=object)
        if isinstance(prediction, dict):
            return {**prediction, ALL_CLASSES: classes}
        return {key: prediction, ALL_CLASSES: classes}

    def __call__(self, extracts: dict[str, Any]) -> dict[str, Any]:
        import tensorflow_model_analysis as tfma

        out = dict(extracts)
        predictions = extracts.get(tfma.PREDICTIONS_KEY)
        if predictions is None:
            return out
        if self.by_model:
            out[tfma.PREDICTIONS_KEY] = {
                name: self._wrap(value, self.keys.get(name, PROBABILITIES))
                for name, value in predictions.items()
            }
        else:
            [key] = self.keys.values()
            out[tfma.PREDICTIONS_KEY] = self._wrap(predictions, key)
        return out


def extractor(config: Any, vocabulary: Sequence[str]) -> Any:
    """The TFMA Extractor attaching `vocabulary` to the predictions of `config`'s models."""
    import apache_beam as beam
    import tensorflow_model_analysis as tfma

    keys = {spec.name: spec.prediction_key or PROBABILITIES for spec in config.model_specs}
    attach = AttachClasses(vocabulary, keys, by_model=len(config.model_specs) > 1)
    return tfma.extractors.Extractor(stage_name=STAGE, ptransform=beam.Map(attach))


def with_vocabulary(extractors: list[Any], config: Any, vocabulary: Sequence[str]) -> list[Any]:
    """`extractors` with the vocabulary attached before TFMA's slice keys (and metrics) are made.

    Args:
      extractors: TFMA's default extractors, or the module file's custom ones.
      config: the prepared EvalConfig.
      vocabulary: the class names, in class-id order.

    Returns:
      The extractors to run.
    """
    import tensorflow_model_analysis as tfma

    log.info(
        "string labels: TFMA maps them to class ids through label_vocabulary %s (attached to the "
        "predictions as TFMA's %s)",
        list(vocabulary),
        ALL_CLASSES,
    )
    stages = [x.stage_name for x in extractors]
    slicing = tfma.extractors.SLICE_KEY_EXTRACTOR_STAGE_NAME
    at = stages.index(slicing) if slicing in stages else len(extractors)
    return [*extractors[:at], extractor(config, vocabulary), *extractors[at:]]
