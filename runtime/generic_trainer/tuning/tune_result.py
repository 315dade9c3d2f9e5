"""What a hyperparameter search found, as the tune verb reports it: the result, TFX's
tuner_results.json, the metrics and the HTML report (report.py's building blocks: a trials table and
a chart of the score per trial).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from generic_trainer.errors import UserCodeError
from generic_trainer.tuning import trial_log, tuner_cluster


@dataclasses.dataclass
class TuneResult:
    """What a search found; trials are known (and outputs published) only where the oracle lives."""

    is_chief: bool
    tuner_id: str
    objective: str = ""
    direction: str = ""
    best_trial_id: str | None = None
    best_score: float | None = None
    best_values: dict[str, Any] = dataclasses.field(default_factory=dict)
    best_config: dict[str, Any] = dataclasses.field(default_factory=dict)
    # {trial_id, status, score, tuner_id, seconds, attempts, values, error}, in trial-id order.
    trials: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    best_hyperparameters_file: str | None = None

    @property
    def completed(self) -> list[dict[str, Any]]:
        """The trials that completed."""
        return [t for t in self.trials if t["status"] == "COMPLETED"]

    def summary(self) -> dict[str, Any]:
        """What the CLI prints."""
        return {
            "best_hyperparameters": self.best_hyperparameters_file,
            "objective": self.objective,
            "direction": self.direction,
            "best_trial_id": self.best_trial_id,
            "best_score": self.best_score,
            "best_values": self.best_values,
            "trials": [
                {k: t[k] for k in ("trial_id", "status", "score", "tuner_id", "seconds")}
                for t in self.trials
            ],
        }


def number_or_none(value: Any) -> float | None:
    """`value` as a float; None when it is not a number (or NaN)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number == number else None  # NaN -> None


def jsonable(value: Any) -> Any:
    """A hyperparameter value JSON can hold (numpy scalars as Python numbers, anything else as
    text)."""
    return value.item() if hasattr(value, "item") else str(value)


def result_of(role: tuner_cluster.TunerRole, oracle, project_dir: str) -> TuneResult:
    """The trials the oracle knows, with who ran them; UserCodeError when none completed."""
    records = trial_log.TrialLog(project_dir).records
    trials = []
    for trial_id in sorted(oracle.trials):
        trial = oracle.trials[trial_id]
        record = records.get(trial_id, {})
        trials.append(
            {
                "trial_id": trial_id,
                "status": trial.status,
                "score": number_or_none(trial.score) if trial.status == "COMPLETED" else None,
                "tuner_id": record.get("tuner_id"),
                "seconds": record.get("seconds"),
                "attempts": record.get("attempts"),
                "values": json.loads(json.dumps(trial.hyperparameters.values, default=jsonable)),
                "error": trial_log.last_line(trial.message)
                if trial.status != "COMPLETED"
                else None,
            }
        )
    result = TuneResult(
        is_chief=True,
        tuner_id=role.tuner_id,
        objective=str(oracle.objective.name),
        direction=str(oracle.objective.direction),
        trials=trials,
    )
    if not result.completed:
        failed = [
            oracle.trials[t["trial_id"]] for t in trials if t["status"] in ("FAILED", "INVALID")
        ]
        detail = (
            f"\nthe first failure (trial {failed[0].trial_id}):\n{failed[0].message}"
            if failed
            else ""
        )
        raise UserCodeError(
            f"no trial completed ({len(trials)} trial(s) run, {len(failed)} failed); "
            f"no best hyperparameters to publish.{detail}"
        )
    best = oracle.get_best_trials(1)[0]
    result.best_trial_id = best.trial_id
    result.best_score = number_or_none(best.score)
    result.best_config = json.loads(json.dumps(best.hyperparameters.get_config(), default=jsonable))
    result.best_values = result.best_config.get("values", {})
    return result


def tuner_results(result: TuneResult) -> list[dict[str, Any]]:
    """TFX's tuner_results.json: completed trials, best first, as {trial_id, score, **values}."""
    reverse = result.direction == "max"
    ranked = sorted(
        result.completed,
        key=lambda t: t["score"] if t["score"] is not None else float("nan"),
        reverse=reverse,
    )
    return [{"trial_id": t["trial_id"], "score": t["score"], **t["values"]} for t in ranked]


def flat_metrics(result: TuneResult) -> dict[str, float]:
    """The search's scalar metrics: the best score, trials completed and failed."""
    metrics = {
        "best_score": result.best_score,
        f"best_{result.objective}": result.best_score,
        "trials_completed": float(len(result.completed)),
        "trials_failed": float(sum(1 for t in result.trials if t["status"] != "COMPLETED")),
    }
    return {k: v for k, v in metrics.items() if v is not None}


def render_report(result: TuneResult) -> str:
    """The search's HTML report: the best trial, the score per trial, every trial's values.

    Args:
      result: the finished search.

    Returns:
      A self-contained HTML page (what KFP shows for a system.HTML artifact).
    """
    from generic_trainer.artifacts import report

    scores, best_so_far = _score_series(result)
    names = sorted({k for t in result.trials for k in t["values"]})
    rows = [
        [
            t["trial_id"],
            t["status"],
            t["score"],
            t["tuner_id"],
            t["seconds"],
            *(t["values"].get(n) for n in names),
            t["error"] or "",
        ]
        for t in result.trials
    ]
    header = ["trial", "status", result.objective, "tuner", "seconds", *names, "error"]
    best = {
        "trial": result.best_trial_id,
        result.objective: result.best_score,
        "direction": result.direction,
        **result.best_values,
    }
    chart = report.line_chart(
        f"{result.objective} per trial",
        {"trial score": scores, "best so far": best_so_far},
        x_label="trial",
        y_label=result.objective,
    )
    failed = len(result.trials) - len(result.completed)
    return report.page(
        "Hyperparameter search",
        [
            ("Best trial", report.key_value_table(best)),
            ("Score per trial", chart),
            ("Trials", report.table(rows, header=header)),
        ],
        subtitle=f"{len(result.completed)} trial(s) completed, {failed} failed; objective "
        f"{result.objective} ({result.direction})",
    )


def _score_series(
    result: TuneResult,
) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """(each scored trial's score, the best score so far), by trial number."""
    better = max if result.direction == "max" else min
    scores, best_so_far, best = [], [], None
    for i, t in enumerate(result.trials):
        if t["score"] is None:
            continue
        x = float(t["trial_id"]) if t["trial_id"].isdigit() else float(i)
        best = t["score"] if best is None else better(best, t["score"])
        scores.append((x, t["score"]))
        best_so_far.append((x, best))
    return scores, best_so_far
