"""Bootstrap confidence intervals of the evaluator's metrics (`"confidence_intervals": {"samples": N}`).

A Poisson bootstrap, as TFMA's: each example is counted k ~ Poisson(1) times in each of N resamples of the
eval split, so a resample is built in the same single streaming pass as the metrics themselves (each
resample keeps its own metric sums; eval_metrics.SliceMetrics). The counts come from one numpy
generator seeded with `seed`, drawn example by example in file order: the same data, seed and N give
the same intervals whatever the batch size. The model and the baseline see the same resamples.

The interval of a metric is the percentile interval of its N resampled values (the (1 - level) / 2 and
(1 + level) / 2 quantiles), with their standard deviation as the standard error; resamples where the
metric is undefined (a slice drawn empty, no positives) are left out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class Resampler:
    """Poisson(1) counts [samples, n] for each batch of n examples, drawn in example order."""

    def __init__(self, samples: int, seed: int):
        self.samples = samples
        self.rng = np.random.default_rng(seed)

    def draw(self, n: int) -> np.ndarray:
        """The counts of the next n examples in each sample: [samples, n] integers."""
        return self.rng.poisson(
            1.0, size=(n, self.samples)
        ).T  # example by example: batching does not matter


def interval(values: Sequence[float | None], level: float) -> dict[str, float] | None:
    """{lower, upper, std_error, samples} of the defined values; None when fewer than 2 are defined."""
    defined = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=np.float64)
    if defined.size < 2:
        return None
    lower, upper = np.quantile(defined, [(1 - level) / 2, (1 + level) / 2])
    return {
        "lower": float(lower),
        "upper": float(upper),
        "std_error": float(defined.std(ddof=1)),
        "samples": int(defined.size),
    }
