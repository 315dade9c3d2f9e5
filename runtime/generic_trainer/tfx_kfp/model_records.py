"""The records a pipeline's steps leave for a later run's resolver (TFX's
LatestBlessedModelStrategy and LatestArtifactStrategy on any KFP: kfp.local, open-source KFP,
Vertex).

KFP keeps no queryable record of earlier runs that a step could ask, so the steps write small JSON
files under the pipeline's records dir (`<pipeline_root>/generic-trainer-records/<pipeline
name>/`), each whole (a temporary sibling renamed into place):

- `blessed_model/`: each evaluator that blesses a model (its model and blessing);
- `artifacts/<TFX type>/`: each artifact a step leaves for LatestArtifactStrategy (`RECORDED`:
  transform's `TransformCache`, push's `PushedModel`): its URI and TFX's properties.

A resolver takes the latest record whose artifact is still there. One that finds nothing leaves
`NOTHING_RESOLVED` in its output, which evaluate and transform read as "none" (TFX: an empty
channel).
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from typing import Any

from generic_trainer.artifacts import files

log = logging.getLogger(__name__)

BLESSED_MODEL = "blessed_model"
ARTIFACTS = "artifacts"
NOTHING_RESOLVED = "NOTHING_RESOLVED"
# TFX artifact type -> the step that records it (what LatestArtifactStrategy can resolve here)
RECORDED = {
    "TransformCache": "Transform (its updated_analyzer_cache)",
    "PushedModel": "Pusher (each model it pushes)",
}


def _write(path: str, record: dict[str, Any]) -> str:
    files.write_file_atomic(path, json.dumps(record, sort_keys=True) + "\n")
    return path


def _name(now: float) -> str:
    """A record's file name: sorts by time, unique."""
    return f"{int(now * 1e6):020d}-{uuid.uuid4().hex[:8]}.json"


def record_blessed(records_dir: str, model: str, blessing: str) -> str:
    """Record that `model` was blessed (its blessing in `blessing`), for later resolvers.

    Args:
      records_dir: the pipeline's records dir (a local path).
      model: the blessed model's dir.
      blessing: the blessing dir (BLESSED inside once published).

    Returns:
      The record file written.
    """
    now = time.time()
    path = os.path.join(records_dir, BLESSED_MODEL, _name(now))
    _write(path, {"model": model, "blessing": blessing, "recorded_at": now})
    log.info("recorded the blessed model for later runs' resolvers: %s", path)
    return path


def latest_blessed(records_dir: str) -> dict[str, Any] | None:
    """The latest record whose model is still there and whose blessing holds BLESSED.

    Args:
      records_dir: the pipeline's records dir (a local path).

    Returns:
      The record (`model`, `blessing`, `recorded_at`), or None when there is none.
    """
    for name, record in _newest_first(os.path.join(records_dir, BLESSED_MODEL)):
        model, blessing = str(record.get("model", "")), str(record.get("blessing", ""))
        if os.path.isdir(model) and os.path.isfile(os.path.join(blessing, "BLESSED")):
            return record
        log.info("record %s skipped: %s or its BLESSED blessing is not there", name, model)
    return None


def resolved_nothing(path: str) -> bool:
    """Whether `path` is a resolver's output that resolved nothing (TFX: an empty channel)."""
    return os.path.isfile(os.path.join(path, NOTHING_RESOLVED))


def _newest_first(folder: str) -> Any:
    """(file name, record) of each readable record in `folder`, the latest first."""
    names = sorted((n for n in files.listdir(folder) if n.endswith(".json")), reverse=True)
    for name in names:
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                record = json.load(f)
        except (OSError, ValueError) as e:
            log.warning("record %s skipped: %s", name, e)
            continue
        if isinstance(record, dict):
            yield name, record


def record_artifact(
    records_dir: str, type_name: str, uri: str, properties: dict[str, Any] | None = None
) -> str:
    """Record an artifact a step wrote, for a later run's LatestArtifactStrategy resolver.

    Args:
      records_dir: the pipeline's records dir (a local path).
      type_name: its TFX artifact type (a key of `RECORDED`).
      uri: the artifact's dir (a local path), published.
      properties: TFX's properties of the artifact (PushedModel's `pushed_version`, ...).

    Returns:
      The record file written.
    """
    now = time.time()
    path = os.path.join(records_dir, ARTIFACTS, type_name, _name(now))
    record = {"type": type_name, "uri": uri, "properties": properties or {}, "recorded_at": now}
    _write(path, record)
    log.info("recorded the %s %s for later runs' resolvers: %s", type_name, uri, path)
    return path


def latest_artifact(records_dir: str, type_name: str) -> dict[str, Any] | None:
    """The latest record of a `type_name` artifact that is still there (TFX's
    LatestArtifactStrategy: the newest artifact of the type in the pipeline).

    Args:
      records_dir: the pipeline's records dir (a local path).
      type_name: the TFX artifact type.

    Returns:
      The record (`type`, `uri`, `properties`, `recorded_at`), or None when there is none.
    """
    for name, record in _newest_first(os.path.join(records_dir, ARTIFACTS, type_name)):
        if os.path.isdir(str(record.get("uri", ""))):
            return record
        log.info("record %s skipped: %s is not there", name, record.get("uri"))
    return None
