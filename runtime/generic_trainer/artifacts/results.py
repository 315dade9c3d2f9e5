"""What a training run hands back: `TrainResult`, shared by the run_fn path (train.py) and the Task
path.

A leaf module: the verbs fill it in; the report, the metrics file and the executor output read it.
"""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass
class TrainResult:
    """What a train run produced; `model_dir` and metrics are only published by the chief."""

    is_chief: bool
    model_dir: str
    serving_model_dir: str
    metrics: dict[str, float]
    model_info: dict[str, Any]
    strategy: str
    num_replicas: int
    train_steps: int | None
    devices: tuple[str, ...] = ()
    # Published with the model (model_artifact): predictSchemata file names, the TFLite export's
    # record or failure.
    schemata: tuple[str, ...] = ()
    tflite: dict[str, Any] | None = None
