"""The verb process's side of supervision (supervisor.py is the parent's).

A verb that runs under the supervisor hands its parent two things through the run record
(artifacts/run_record.py) instead of writing them itself: its KFP executor output, staged beside
where KFP reads it, and its summary. The parent publishes both only once the run has succeeded.
Run without a supervisor, both are written directly.
"""

from __future__ import annotations

import json
import logging
import uuid

from generic_trainer.artifacts import run_record

log = logging.getLogger("generic_trainer")


def executor_output_path(final: str) -> str:
    """Where the verb writes KFP's executor output.

    Supervised, it is a staged sibling of `final` (so the write is tried where KFP reads it, before
    anything is published); the parent renames it to `final` once the run has succeeded and removes
    it otherwise, so a failed run never leaves one.

    Args:
      final: where KFP reads the executor output.

    Returns:
      `final`, or the staged sibling when supervised.
    """
    if not run_record.active():
        return final
    staged = f"{final}.staged-{uuid.uuid4().hex[:8]}"
    run_record.note("executor_output", staged, final=final)
    return staged


def print_summary(summary: dict) -> None:
    """Print the run's summary as JSON on stdout; supervised, the parent prints it at the end.

    A stdout that user code closed loses only the summary, not the run.

    Args:
      summary: the verb's summary (JSON-serializable).
    """
    if run_record.active():
        run_record.note("summary", summary)
        return
    try:
        print(json.dumps(summary, indent=2), flush=True)
    except OSError as e:
        log.warning("could not print the run's summary to stdout: %s", e)
