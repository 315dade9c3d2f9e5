"""The `resolve` verb: TFX's Resolver with LatestBlessedModelStrategy, on any KFP.

Reads the records the pipeline's evaluators left (tfx_kfp/model_records.py) and copies the latest
model still there, with its BLESSED blessing, into the output (`model`); with none (a first run)
the output holds only NOTHING_RESOLVED, which evaluate reads as "no baseline" (TFX: an empty
channel, change thresholds skipped). Whole or not at all: staged, then renamed into place. The
`found` output parameter says which. Nothing resolved is a result, not a failure: exit 0.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
from collections.abc import Callable
from typing import Any

from generic_trainer.artifacts import storage
from generic_trainer.intake import resolve_options
from generic_trainer.intake.contract import VerbContract
from generic_trainer.intake.resolve_request import ResolveRequest, build_resolve_request
from generic_trainer.tfx_kfp import model_records

log = logging.getLogger(__name__)


@dataclasses.dataclass
class ResolveResult:
    """The resolved model's record (None: nothing resolved)."""

    record: dict[str, Any] | None

    def summary(self) -> dict[str, Any]:
        """The printed summary."""
        found = self.record is not None
        return {"found": found, "model": self.record["model"] if found else None}


def run(
    request: ResolveRequest, before_publish: Callable[[ResolveResult], None] | None = None
) -> ResolveResult:
    """Resolve the latest blessed model and publish it (or NOTHING_RESOLVED) as the output.

    Args:
      request: the resolve request.
      before_publish: called before the output is published.

    Returns:
      The ResolveResult.
    """
    record = model_records.latest_blessed(request.records_dir)
    staging = storage.staging_dir_for(request.model_dir)
    if record is None:
        log.info("no blessed model recorded in %s yet: nothing resolved", request.records_dir)
        os.makedirs(staging)
        with open(os.path.join(staging, model_records.NOTHING_RESOLVED), "w") as f:
            f.write("no blessed model of an earlier run was found\n")
    else:
        log.info("resolved the latest blessed model: %s", record["model"])
        shutil.copytree(record["model"], staging)
    result = ResolveResult(record)
    if before_publish is not None:
        before_publish(result)
    storage.publish_dir(staging, request.model_dir)
    return result


def kfp_outputs(
    request: ResolveRequest, result: ResolveResult
) -> tuple[dict[str, dict[str, Any]], dict[str, Any] | None]:
    """The model artifact's metadata and, when declared, the `found` output parameter."""
    found = result.record is not None
    metadata = {"model": {"found": int(found), "source": result.record["model"] if found else ""}}
    declared = request.kfp is not None and "found" in request.kfp.parameters
    return metadata, {"found": found} if declared else None


def describe(r: ResolveRequest) -> list[str]:
    """The log line saying what will be resolved."""
    return [
        f"resolve request: strategy={r.strategy} records_dir={r.records_dir} "
        f"model_dir={r.model_dir}"
    ]


VERB: VerbContract[ResolveRequest, ResolveResult] = VerbContract(
    resolve_options.RESOLVE,
    build_resolve_request,
    describe,
    run,
    kfp_outputs,
    lambda result: result.summary(),
    lock_outputs=True,
)
