"""The records a pipeline's evaluators leave for a later run's resolver (TFX's
LatestBlessedModelStrategy on any KFP: kfp.local, open-source KFP, Vertex).

KFP keeps no queryable record of earlier runs that a step could ask, so each evaluator that blesses
a model writes one small JSON file under the pipeline's records dir
(`<pipeline_root>/generic-trainer-records/<pipeline name>/blessed_model/`), whole (a temporary
sibling renamed into place); the resolver takes the latest record whose model and BLESSED
blessing are still there. A resolver that finds nothing leaves `NOTHING_RESOLVED` in its output,
which evaluate reads as "no baseline".
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
NOTHING_RESOLVED = "NOTHING_RESOLVED"


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
    name = f"{int(now * 1e6):020d}-{uuid.uuid4().hex[:8]}.json"
    path = os.path.join(records_dir, BLESSED_MODEL, name)
    record = {"model": model, "blessing": blessing, "recorded_at": now}
    files.write_file_atomic(path, json.dumps(record, sort_keys=True) + "\n")
    log.info("recorded the blessed model for later runs' resolvers: %s", path)
    return path


def latest_blessed(records_dir: str) -> dict[str, Any] | None:
    """The latest record whose model is still there and whose blessing holds BLESSED.

    Args:
      records_dir: the pipeline's records dir (a local path).

    Returns:
      The record (`model`, `blessing`, `recorded_at`), or None when there is none.
    """
    folder = os.path.join(records_dir, BLESSED_MODEL)
    names = sorted((n for n in files.listdir(folder) if n.endswith(".json")), reverse=True)
    for name in names:
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                record = json.load(f)
        except (OSError, ValueError) as e:
            log.warning("record %s skipped: %s", name, e)
            continue
        model, blessing = str(record.get("model", "")), str(record.get("blessing", ""))
        if os.path.isdir(model) and os.path.isfile(os.path.join(blessing, "BLESSED")):
            return record
        log.info("record %s skipped: %s or its BLESSED blessing is not there", name, model)
    return None


def resolved_nothing(path: str) -> bool:
    """Whether `path` is a resolver's output that resolved nothing (TFX: an empty channel)."""
    return os.path.isfile(os.path.join(path, NOTHING_RESOLVED))
