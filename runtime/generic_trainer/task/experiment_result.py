"""What a Task run did: its steps, the last train and eval logs, every evaluation, its exports."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class ExperimentResult:
    """What a run did: steps, the last train and eval logs, every evaluation, what it exported."""

    mode: str
    global_step: int
    initial_step: int
    restored_from: str | None
    train_logs: dict[str, float] = dataclasses.field(default_factory=dict)
    eval_logs: dict[str, float] = dataclasses.field(default_factory=dict)
    eval_history: list[tuple[int, dict[str, float]]] = dataclasses.field(default_factory=list)
    best_checkpoint_dir: str | None = None
    serving_model_dir: str | None = None  # where run_experiment exported it (None: not exported)

    def metrics(self) -> dict[str, float]:
        """Eval metrics under their names, train metrics as `train_<name>` (KFP's Metrics)."""
        out = {f"train_{k}": v for k, v in self.train_logs.items()}
        out.update(self.eval_logs)
        return out
