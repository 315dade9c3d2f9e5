"""What the oracle hands out and gets back: which tuner ran each trial, for how long, and how it
ended.

`compat.patched(TrialLog(...).patch(oracle))` wraps the oracle's `create_trial` / `end_trial` /
`save` on the replica that holds the oracle (the only replica, or the chief), so trials run by
workers are seen too. Each start and end is logged as one line (hyperparameter values, score,
best so far, trials done, ETA) in place of keras-tuner's printed tables, and the records are saved
beside the search state so a resumed search still knows who ran the trials of the attempt before.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from generic_trainer.artifacts import bounded_parse, storage
from generic_trainer.compat import keras_tuner
from generic_trainer.errors import TrainerError, UserCodeError, UserInputError
from generic_trainer.fit.progress import fmt_eta  # one ETA format for all logs

log = logging.getLogger("generic_trainer.tuner")

FILE_NAME = "generic_trainer_trials.json"
ORACLE_BACKUP = "oracle.json.last-good"  # copied after each save: a kill mid-write cannot lose both


def _fmt_value(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def last_line(message: str | None) -> str:
    """The line of a trial's traceback that says what went wrong."""
    lines = [line for line in (message or "").strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


class TrialLog:
    """Per-trial records {trial_id: {tuner_id, attempts, started, seconds, status}} kept by the
    oracle's host."""

    def __init__(self, project_dir: str, on_fatal: Callable[[TrainerError], None] | None = None):
        self.path = os.path.join(project_dir, FILE_NAME)
        self.on_fatal = on_fatal
        self.records: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self.oracle = None
        if os.path.isfile(self.path):
            try:
                records = bounded_parse.load_json(
                    bounded_parse.read_text(self.path, self.path), self.path
                )
            except UserInputError as e:
                records = None
                log.warning("ignoring the unreadable trial log (%s)", e)
            if isinstance(records, dict) and all(isinstance(r, dict) for r in records.values()):
                self.records = records
            elif records is not None:
                log.warning("ignoring %s: expected an object of trial records", self.path)

    def patch(self, oracle) -> keras_tuner.OracleMethods:
        """The patch that wraps `oracle.create_trial`, `end_trial` and `save` (the gRPC servicer
        calls them)."""
        self.oracle = oracle

        def logged_create_trial(create_trial, tuner_id, *args, **kwargs):
            trial = create_trial(tuner_id, *args, **kwargs)
            if trial.status == "RUNNING":
                self._started(trial, tuner_id)
            return trial

        def logged_end_trial(end_trial, trial, *args, **kwargs):
            try:
                end_trial(trial, *args, **kwargs)
            except RuntimeError as e:
                if "consecutive failures" not in str(e):
                    raise
                error = UserCodeError(f"the search stopped: {e}")
                if self.on_fatal is not None:
                    self.on_fatal(error)
                raise error from e
            self._ended(oracle.trials[trial.trial_id])

        def save_with_backup(save, *args, **kwargs):
            save(*args, **kwargs)  # under the oracle's lock when called by create_trial / end_trial
            self._backup_oracle_state()

        return keras_tuner.OracleMethods(
            oracle,
            create_trial=logged_create_trial,
            end_trial=logged_end_trial,
            save=save_with_backup,
        )

    def _backup_oracle_state(self) -> None:
        source = os.path.join(os.path.dirname(self.path), "oracle.json")
        try:
            with open(source, encoding="utf-8") as f:
                text = f.read()
            storage.write_file_atomic(os.path.join(os.path.dirname(self.path), ORACLE_BACKUP), text)
        except OSError as e:
            log.warning("could not back up %s: %s", source, e)

    def _save(self) -> None:
        try:
            storage.write_file_atomic(self.path, json.dumps(self.records, indent=1, sort_keys=True))
        except OSError as e:  # the log is a convenience; the search must not fail over it
            log.warning("could not save %s: %s", self.path, e)

    def _started(self, trial, tuner_id: str) -> None:
        with self._lock:
            record = self.records.setdefault(trial.trial_id, {"attempts": 0})
            if record.get("tuner_id") == tuner_id and record.get("status") == "RUNNING":
                return  # the same tuner asking again for its ongoing trial
            record.update(tuner_id=tuner_id, status="RUNNING", started=time.time(), seconds=None)
            record["attempts"] += 1
            self._save()
        values = " ".join(f"{k}={_fmt_value(v)}" for k, v in trial.hyperparameters.values.items())
        retry = f" (attempt {record['attempts']})" if record["attempts"] > 1 else ""
        log.info(
            "trial %s started on %s%s: %s",
            trial.trial_id,
            tuner_id,
            retry,
            values or "default values",
        )

    def _ended(self, trial) -> None:
        with self._lock:
            record = self.records.setdefault(
                trial.trial_id, {"attempts": 1, "tuner_id": "?", "started": time.time()}
            )
            record["seconds"] = round(time.time() - record["started"], 3)
            retrying = trial.status == "INVALID"
            record["status"] = trial.status
            self._save()
            done = [r for r in self.records.values() if r["status"] in ("COMPLETED", "FAILED")]
        if trial.status == "COMPLETED":
            outcome = f"{self.oracle.objective.name}={_fmt_value(float(trial.score))}"
            best = self.oracle.get_best_trials(1)
            if best and best[0].score is not None:
                outcome += (
                    f"; best so far {_fmt_value(float(best[0].score))} (trial {best[0].trial_id})"
                )
        else:
            outcome = last_line(trial.message) + ("; it will be retried" if retrying else "")
        max_trials = self.oracle.max_trials
        progress = f"{len(done)}/{max_trials}" if max_trials else str(len(done))
        eta = ""
        if max_trials and done:
            tuners = {r["tuner_id"] for r in self.records.values()} or {"?"}
            mean = sum(r["seconds"] or 0 for r in done) / len(done)
            eta = f", ETA {fmt_eta(max(0, max_trials - len(done)) * mean / len(tuners))}"
        log.info(
            "trial %s %s on %s in %.1f s: %s; %s trials done%s",
            trial.trial_id,
            trial.status,
            record["tuner_id"],
            record["seconds"],
            outcome,
            progress,
            eta,
        )
