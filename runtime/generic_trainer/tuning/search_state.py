"""A search's saved state under the working dir: made resumable, its unfinished trials retried.

keras-tuner reloads a search from its project directory; `make_resumable` repairs what a kill can
leave there, `retry_unfinished` queues again the trials a killed attempt left running, and
`check_directory` says what was found (and warns when a re-run could not find it again).
"""

from __future__ import annotations

import glob
import json
import logging
import os
import shutil

from generic_trainer.artifacts import storage
from generic_trainer.compat import keras_tuner
from generic_trainer.tuning import trial_log

log = logging.getLogger("generic_trainer.tune")


def make_resumable(working_dir: str, tuner_file_id: str) -> set[str]:
    """Let keras-tuner reload every saved search under `working_dir`, whenever the last run was
    killed.

    keras-tuner reloads its oracle only when the tuner's own file (`<project>/<tuner id>.json`,
    written after a trial's results) exists; a kill between the oracle's save and that file's would
    start the search over. The oracle's state is what matters, so the tuner file (an empty state) is
    written when only it is missing. An oracle.json cut short by a kill is restored from its last
    good copy. Returns the project directories that hold a saved search.
    """
    saved = set()
    for oracle_file in glob.glob(os.path.join(working_dir, "*", "oracle.json")):
        project_dir = os.path.dirname(oracle_file)
        try:
            with open(oracle_file, encoding="utf-8") as f:
                state = json.load(f)
        except (OSError, json.JSONDecodeError):
            backup = os.path.join(project_dir, trial_log.ORACLE_BACKUP)
            if not os.path.isfile(backup):
                continue
            log.warning(
                "%s is unreadable (a kill while it was written?); restoring its last good copy",
                oracle_file,
            )
            shutil.copyfile(backup, oracle_file)
            state = {"start_order": ["?"]}
        tuner_file = os.path.join(project_dir, f"{tuner_file_id}.json")
        if not os.path.exists(tuner_file):
            storage.write_file_atomic(tuner_file, "{}")
        if state.get("start_order"):
            saved.add(os.path.abspath(project_dir))
    return saved


def retry_unfinished(oracle) -> keras_tuner.RetryQueue | None:
    """The patch that queues again every trial a killed attempt left RUNNING (None: none was).

    keras-tuner's reload retries the trials its oracle.json lists as ongoing; a kill after a new
    trial's own file was written but before oracle.json was would leave that trial RUNNING forever.
    Nothing runs before the search starts, so every RUNNING trial is such a one.
    """
    running = [t for t, trial in sorted(oracle.trials.items()) if trial.status == "RUNNING"]
    for trial_id in running:
        log.info("trial %s was running when the last attempt stopped: it will run again", trial_id)
    return keras_tuner.RetryQueue(oracle, running) if running else None


def check_directory(tuner, working_dir: str, holds_oracle: bool) -> None:
    """Log whether the search resumes or starts new, and warn where a re-run would not resume.

    Args:
      tuner: the user's keras-tuner Tuner.
      working_dir: fn_args.working_dir (a stable directory across re-runs).
      holds_oracle: whether this process holds the oracle (the chief, or a single tuner).
    """
    project_dir = os.path.abspath(tuner.project_dir)
    if holds_oracle:
        trials = list(tuner.oracle.trials.values())
        done = sum(1 for t in trials if t.status in ("COMPLETED", "FAILED"))
        log.info(
            "search state: %s (%s)",
            project_dir,
            f"resuming: {done} trial(s) done, {len(trials) - done} to finish or retry"
            if trials
            else "new search",
        )
        if trials and type(tuner.oracle).__name__ == "GridSearchOracle":
            log.warning(
                "keras-tuner's GridSearch does not save its place in the grid: a resumed grid "
                "search may stop before max_trials (RandomSearch, BayesianOptimization and "
                "Hyperband resume fully)"
            )
    if not project_dir.startswith(os.path.abspath(working_dir) + os.sep):
        log.warning(
            "the tuner's directory %s is outside fn_args.working_dir %s: a re-run resumes the "
            "search only if that directory is stable (pass directory=fn_args.working_dir to the "
            "tuner)",
            project_dir,
            working_dir,
        )
