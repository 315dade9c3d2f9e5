"""One line per thing `doctor` checks: ok / warn / fail, what it found, and the fix when it is not
ok."""

from __future__ import annotations

import dataclasses
import json

OK, WARN, FAIL = "ok", "warn", "fail"


@dataclasses.dataclass(frozen=True)
class Check:
    """What one check found: `status` (ok, warn, fail), `detail` (what was found) and `fix` (what to
    do)."""

    name: str
    status: str
    detail: str
    fix: str = ""

    def line(self) -> str:
        """The check as one line of text: `ok    gpus        2 (/dev/nvidia0, /dev/nvidia1)`."""
        text = f"{self.status:<5} {self.name:<20} {self.detail}"
        return text + (f"  -> fix: {self.fix}" if self.fix and self.status != OK else "")

    def as_json(self) -> dict[str, str]:
        """The check as a JSON object (name, status, detail, fix)."""
        return dataclasses.asdict(self)


def ok(name: str, detail: str) -> Check:
    """A check that found what train needs."""
    return Check(name, OK, detail)


def warn(name: str, detail: str, fix: str) -> Check:
    """A check that found something train runs with, but maybe not as meant."""
    return Check(name, WARN, detail, fix)


def fail(name: str, detail: str, fix: str) -> Check:
    """A check that found something train would stop on (or train on the CPU unnoticed)."""
    return Check(name, FAIL, detail, fix)


def failed(checks: list[Check]) -> list[Check]:
    """The checks that failed."""
    return [c for c in checks if c.status == FAIL]


def as_json(checks: list[Check], seconds: float, tensorflow_import_s: float) -> str:
    """The whole report for machines: {"ok": bool, "seconds": s, "tensorflow_import_seconds": s,
    "checks": [...]}."""
    body = {
        "ok": not failed(checks),
        "seconds": round(seconds, 2),
        "tensorflow_import_seconds": round(tensorflow_import_s, 2),
        "checks": [c.as_json() for c in checks],
    }
    return json.dumps(body, indent=2)
