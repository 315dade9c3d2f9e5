"""Blessings: the TFX-style verdict directories evaluate and infra-validate write (one marker file
each).

Shared by the judging verbs, which write them (published whole, staged beside, then renamed, like
every output), and by those that read them: infra-validate (the evaluator's) and push (both).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from generic_trainer.artifacts import files
from generic_trainer.artifacts.staged import StagedDir
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
    """A TFX-style blessing dir, published whole: one marker file (the reasons inside when not
    blessed)."""
    with StagedDir(blessing_dir) as stage:
        marker = os.path.join(stage.path, blessed_file if blessed else not_blessed_file)
        with open(marker, "w", encoding="utf-8") as f:
            f.write("".join(f"{r}\n" for r in reasons))
        stage.publish()
    log.info("blessing: %s/%s", blessing_dir, blessed_file if blessed else not_blessed_file)


def read_verdict(blessing_dir: str, kind: str, flag: str) -> tuple[bool, list[str]]:
    """(blessed, reasons) of a blessing dir of `kind` ("model": the evaluator's, "infra": the
    infra-validator's).

    The dir must hold exactly one marker of its kind, a regular file; anything else (neither, both,
    a marker that is a directory or a symlink, the other kind's markers: a blessing given to the
    wrong input) is a UserInputError naming `flag` and saying what is there.
    """
    blessed_file, not_blessed_file, writer = KINDS[kind]
    expected = f"{writer}'s blessing dir, holding {blessed_file} or {not_blessed_file}"
    if files.classify(blessing_dir) != files.DIRECTORY:
        raise UserInputError(
            flag, f"{blessing_dir} is {files.describe(blessing_dir)} (expected {expected})"
        )
    markers = [n for n in (blessed_file, not_blessed_file) if _lexists(blessing_dir, n)]
    if len(markers) == 2:
        raise UserInputError(
            flag,
            f"{blessing_dir} holds both {blessed_file} and {not_blessed_file}: the verdict is "
            f"ambiguous (expected exactly one, as {writer} writes it)",
        )
    if not markers:
        raise UserInputError(flag, _no_marker(blessing_dir, kind, flag))
    path = os.path.join(blessing_dir, markers[0])
    if os.path.islink(path) or files.classify(path) != files.REGULAR:
        raise UserInputError(
            flag,
            f"{path} is {files.describe(path)}; the marker {writer} writes is a regular file",
        )
    if markers[0] == blessed_file:
        return True, []
    with open(path, encoding="utf-8", errors="replace") as f:
        return False, [line.strip() for line in f.read(1 << 16).splitlines() if line.strip()]


def _lexists(directory: str, name: str) -> bool:
    return os.path.lexists(os.path.join(directory, name))


def _no_marker(blessing_dir: str, kind: str, flag: str) -> str:
    """The message for a blessing dir holding no marker of its kind: what it holds instead."""
    blessed_file, not_blessed_file, writer = KINDS[kind]
    found = sorted(n for n in files.listdir(blessing_dir) if not n.startswith("."))[:5]
    other = [n for n in found if any(n in KINDS[k][:2] for k in KINDS if k != kind)]
    hint = (
        f"; it holds {other[0]}: was {flag} given the other validator's blessing?"
        if other
        else (f"; it holds {found}" if found else "; it is empty")
    )
    return (
        f"{blessing_dir} holds neither {blessed_file} nor {not_blessed_file} (expected "
        f"{writer}'s blessing){hint}"
    )
