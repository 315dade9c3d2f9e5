"""Progress lines every long-running loop logs: one remaining-time format for fit, the Task loop and
tune.

A leaf module: no TensorFlow, nothing of generic_trainer's.
"""

from __future__ import annotations

import math


def fmt_eta(seconds: float) -> str:
    """A remaining time as '3m05s' or '1h02m' ('?' when unknown); shared by every progress log."""
    if not math.isfinite(seconds):
        return "?"
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s"
