"""Where a chart draws its points: series thinned, axis ranges, round ticks, the plot frame.

No HTML here (report.py writes the SVG); every number is in pixels or data units.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence

from generic_trainer.artifacts.tensorboard_scalars import Points

MAX_POINTS = 400  # per series; longer series are thinned evenly (first and last point kept)


def thin(points: Points, limit: int = MAX_POINTS) -> Points:
    """At most `limit` of `points`, evenly spaced, the first and last kept."""
    if len(points) <= limit:
        return points
    stride = (len(points) - 1) / (limit - 1)
    return [points[round(i * stride)] for i in range(limit)]


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About `count` round ticks in [lo, hi]: steps of 1, 2, 2.5 or 5 times a power of ten."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(count - 1, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(lo / step) * step
    ticks = []
    value = first
    while value <= hi + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    return ticks


def axis_ranges(
    series: Iterable[Sequence[tuple[float, float]]],
) -> tuple[tuple[float, float], tuple[float, float]]:
    """(x_lo, x_hi), (y_lo, y_hi) spanning every point: never empty, y padded by 5% (flat: 10%)."""
    points = [p for pts in series for p in pts]
    x_lo, x_hi = min(x for x, _ in points), max(x for x, _ in points)
    y_lo, y_hi = min(y for _, y in points), max(y for _, y in points)
    if x_hi == x_lo:
        x_lo, x_hi = x_lo - 1, x_hi + 1
    pad = (abs(y_lo) * 0.1 or 1.0) if y_hi == y_lo else (y_hi - y_lo) * 0.05
    return (x_lo, x_hi), (y_lo - pad, y_hi + pad)


@dataclasses.dataclass(frozen=True)
class Frame:
    """A chart's size, plot area and data ranges: where a data point is drawn."""

    width: int
    height: int
    x_range: tuple[float, float]
    y_range: tuple[float, float]
    left: int = 58
    right: int = 12
    top: int = 42
    bottom: int = 44

    @property
    def plot_w(self) -> int:
        """The plot area's width."""
        return self.width - self.left - self.right

    @property
    def plot_h(self) -> int:
        """The plot area's height."""
        return self.height - self.top - self.bottom

    def sx(self, x: float) -> float:
        """The horizontal pixel of data value `x`."""
        x_lo, x_hi = self.x_range
        return self.left + (x - x_lo) / (x_hi - x_lo) * self.plot_w

    def sy(self, y: float) -> float:
        """The vertical pixel of data value `y` (up is larger)."""
        y_lo, y_hi = self.y_range
        return self.top + (1 - (y - y_lo) / (y_hi - y_lo)) * self.plot_h
