"""Blessings: the TFX-style verdict directories evaluate and infra-validate write (one marker file each).

Shared by the judging verbs; published whole (staged beside, then renamed) like every output.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from generic_trainer.artifacts import storage

log = logging.getLogger(__name__)

BLESSED_FILE = "BLESSED"
NOT_BLESSED_FILE = "NOT_BLESSED"


def write_blessing(blessing_dir: str, blessed: bool, reasons: Sequence[str], blessed_file: str = BLESSED_FILE,
                   not_blessed_file: str = NOT_BLESSED_FILE) -> None:
    """A TFX-style blessing dir, published whole: one marker file (the reasons inside when not blessed)."""
    staging = storage.staging_dir_for(blessing_dir)
    os.makedirs(staging)
    with open(os.path.join(staging, blessed_file if blessed else not_blessed_file), "w", encoding="utf-8") as f:
        f.write("".join(f"{r}\n" for r in reasons))
    storage.publish_dir(staging, blessing_dir)
    log.info("blessing: %s/%s", blessing_dir, blessed_file if blessed else not_blessed_file)
