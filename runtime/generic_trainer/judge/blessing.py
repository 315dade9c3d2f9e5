"""Blessings: the TFX-style verdict directories evaluate and infra-validate write (one marker file each).

Shared by the judging verbs, which write them (published whole, staged beside, then renamed, like every output),
and by those that read them: infra-validate (the evaluator's) and push (both).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from generic_trainer.artifacts import storage
from generic_trainer.errors import UserInputError

log = logging.getLogger(__name__)

BLESSED_FILE = "BLESSED"
NOT_BLESSED_FILE = "NOT_BLESSED"
INFRA_BLESSED_FILE = "INFRA_BLESSED"
INFRA_NOT_BLESSED_FILE = "INFRA_NOT_BLESSED"
# kind -> (the blessed marker, the not-blessed marker, who writes it)
KINDS = {
    "model": (BLESSED_FILE, NOT_BLESSED_FILE, "the evaluator"),
    "infra": (INFRA_BLESSED_FILE, INFRA_NOT_BLESSED_FILE, "the infra-validator"),
}


def write_blessing(
    blessing_dir: str,
    blessed: bool,
    reasons: Sequence[str],
    blessed_file: str = BLESSED_FILE,
    not_blessed_file: str = NOT_BLESSED_FILE,
) -> None:
    """A TFX-style blessing dir, published whole: one marker file (the reasons inside when not blessed)."""
    staging = storage.staging_dir_for(blessing_dir)
    os.makedirs(staging)
    with open(
        os.path.join(staging, blessed_file if blessed else not_blessed_file), "w", encoding="utf-8"
    ) as f:
        f.write("".join(f"{r}\n" for r in reasons))
    storage.publish_dir(staging, blessing_dir)
    log.info("blessing: %s/%s", blessing_dir, blessed_file if blessed else not_blessed_file)


def read_verdict(blessing_dir: str, kind: str, flag: str) -> tuple[bool, list[str]]:
    """(blessed, reasons) of a blessing dir of `kind` ("model": the evaluator's, "infra": the infra-validator's).

    A dir that holds neither marker of its kind (or the other kind's: a blessing given to the wrong input) is a
    UserInputError naming `flag`.
    """
    blessed_file, not_blessed_file, writer = KINDS[kind]
    if not os.path.isdir(blessing_dir):
        raise UserInputError(
            flag,
            f"{blessing_dir} is not a directory (expected {writer}'s blessing dir, holding "
            f"{blessed_file} or {not_blessed_file})",
        )
    if os.path.isfile(os.path.join(blessing_dir, blessed_file)):
        return True, []
    path = os.path.join(blessing_dir, not_blessed_file)
    if os.path.isfile(path):
        with open(path, encoding="utf-8", errors="replace") as f:
            return False, [line.strip() for line in f.read(1 << 16).splitlines() if line.strip()]
    found = sorted(n for n in _listdir(blessing_dir) if not n.startswith("."))[:5]
    other = [n for n in found if any(n in KINDS[k][:2] for k in KINDS if k != kind)]
    hint = (
        f"; it holds {other[0]}: was {flag} given the other validator's blessing?"
        if other
        else (f"; it holds {found}" if found else "; it is empty")
    )
    raise UserInputError(
        flag,
        f"{blessing_dir} holds neither {blessed_file} nor {not_blessed_file} (expected "
        f"{writer}'s blessing){hint}",
    )


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []
