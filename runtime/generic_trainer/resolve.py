"""The `resolve` verb: TFX's Resolver with LatestBlessedModelStrategy or LatestArtifactStrategy,
on any KFP.

Reads the records the pipeline's steps left (tfx_kfp/model_records.py) and copies the latest model
still there with its BLESSED blessing (latest_blessed_model), or the latest artifact of the type
still there (latest_artifact), into the output (`model`); with none (a first run) the output holds
only NOTHING_RESOLVED, which evaluate reads as "no baseline" (TFX: an empty channel, change
thresholds skipped) and transform as "no analyzer cache". Whole or not at all: staged, then
renamed into place. The `found` output parameter says which. Nothing resolved is a result, not a
failure: exit 0.
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
    """The resolved record (None: nothing resolved)."""

    record: dict[str, Any] | None

    @property
    def source(self) -> str | None:
        """The resolved model's or artifact's dir (None: nothing resolved)."""
        if self.record is None:
            return None
        return str(self.record.get("model") or self.record.get("uri"))

    def summary(self) -> dict[str, Any]:
        """The printed summary."""
        return {"found": self.record is not None, "model": self.source}


def run(
    request: ResolveRequest, before_publish: Callable[[ResolveResult], None] | None = None
) -> ResolveResult:
    """Resolve the latest blessed model or artifact and publish it (or NOTHING_RESOLVED).

    Args:
      request: the resolve request.
      before_publish: called before the output is published.

    Returns:
      The ResolveResult.
    """
    if request.strategy == "latest_artifact":
        what = f"{request.artifact_type} artifact"
        record = model_records.latest_artifact(request.records_dir, request.artifact_type)
    else:
        what = "blessed model"
        record = model_records.latest_blessed(request.records_dir)
    result = ResolveResult(record)
    staging = storage.staging_dir_for(request.model_dir)
    if result.source is None:
        log.info("no %s recorded in %s yet: nothing resolved", what, request.records_dir)
        os.makedirs(staging)
        with open(os.path.join(staging, model_records.NOTHING_RESOLVED), "w") as f:
            f.write(f"no {what} of an earlier run was found\n")
    else:
        log.info("resolved the latest %s: %s", what, result.source)
        shutil.copytree(result.source, staging)
    if before_publish is not None:
        before_publish(result)
    storage.publish_dir(staging, request.model_dir)
    return result


def kfp_outputs(
    request: ResolveRequest, result: ResolveResult
) -> tuple[dict[str, dict[str, Any]], dict[str, Any] | None]:
    """The model artifact's metadata and, when declared, the `found` output parameter."""
    found = result.record is not None
    metadata: dict[str, Any] = {"found": int(found), "source": result.source or ""}
    if found and result.record and result.record.get("properties"):
        metadata.update(result.record["properties"])  # TFX's properties (PushedModel's, ...)
    declared = request.kfp is not None and "found" in request.kfp.parameters
    return {"model": metadata}, {"found": found} if declared else None


def describe(r: ResolveRequest) -> list[str]:
    """The log line saying what will be resolved."""
    return [
        f"resolve request: strategy={r.strategy}"
        + (f" artifact_type={r.artifact_type}" if r.artifact_type else "")
        + f" records_dir={r.records_dir} "
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
