"""The one shape of a patch of library internals: versions it was written for, what it replaces,
undo.

A `Patch` names the library versions it was read against (`versions`), what a run loses without it
(`lost`), the internals it needs (`missing()` lists those that are gone) and the attributes it
replaces (`replacements()`). `patched(*patches)` checks and applies them in order and undoes them
in reverse when the block ends, also when it raises; a patch that cannot be applied is undone
with the others already applied, and so are the attributes it had set before the one that failed.

The checks, per patch: a library outside `versions` logs a warning (once per patch and version)
and the patch is applied all the same when its internals are there; internals missing: a
`required` patch raises `Unsupported` (the run cannot do what was asked without it), any other
logs a warning saying what is lost and is left out.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import logging
import re
from collections.abc import Iterator
from typing import Any

log = logging.getLogger("generic_trainer.compat")

_ABSENT = object()
_warned: set[tuple[str, str]] = set()


class Unsupported(Exception):
    """A required patch cannot be applied to the installed library; the message says why and what is
    lost."""


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0])[:3])


@dataclasses.dataclass(frozen=True)
class Versions:
    """The releases of one distribution a patch was written for: `low` <= version < `high`."""

    distribution: str  # as pip names it: keras, tensorflow, tf-keras, keras-tuner
    low: str
    high: str

    def installed(self) -> str | None:
        """The installed version, or None when the distribution is not installed."""
        try:
            return importlib.metadata.version(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            return None

    def contains(self, version: str) -> bool:
        """Whether `version` is in the range."""
        return _release(self.low) <= _release(version) < _release(self.high)

    def __str__(self) -> str:
        return f"{self.distribution}>={self.low},<{self.high}"


class Patch:
    """One change to a library's internals. Subclasses set the class attributes and
    `replacements()`."""

    versions: tuple[Versions, ...] = ()
    lost: str = ""  # what a run loses when the patch is left out
    required: bool = (
        False  # internals missing: True raises Unsupported, False warns and leaves it out
    )

    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any]] = []

    @property
    def name(self) -> str:
        return type(self).__name__

    def missing(self) -> list[str]:
        """The internals this patch needs that the installed libraries lack (none: it can be
        applied)."""
        return []

    def replacements(self) -> list[tuple[Any, str, Any]]:
        """(owner, attribute, new value) for every attribute the patch sets; called once per
        `apply`."""
        raise NotImplementedError

    def untested(self) -> list[str]:
        """The installed libraries outside `versions`, as 'keras 3.16.0 (written for
        keras>=3.15,<3.16)'."""
        out = []
        for versions in self.versions:
            installed = versions.installed()
            if installed is not None and not versions.contains(installed):
                out.append(f"{versions.distribution} {installed} (written for {versions})")
        return out

    def check(self) -> None:
        """Raise `Unsupported` when the internals this patch needs are gone (whether it is required
        or not)."""
        missing = self.missing()
        if missing:
            raise Unsupported(
                f"{self.name}: the installed library lacks {', '.join(missing)}; {self.lost}"
            )

    def ready(self) -> bool:
        """Check versions and internals as the module docstring says; True: apply it."""
        untested = self.untested()
        if untested:
            _warn_once(
                self.name,
                f"{self.name} patches library internals and was not tested with "
                f"{', '.join(untested)}; if it misbehaves: {self.lost}",
            )
        try:
            self.check()
        except Unsupported as e:
            if self.required:
                raise
            _warn_once(self.name, f"{e} (left out)")
            return False
        return True

    def apply(self) -> None:
        """Set every replacement, remembering what was there; when one fails, undo the others."""
        if self._saved:
            raise RuntimeError(f"{self.name} is applied already")
        try:
            for owner, attribute, value in self.replacements():
                old = vars(owner).get(attribute, _ABSENT)
                setattr(owner, attribute, value)
                self._saved.append((owner, attribute, old))
        except BaseException:
            self.undo()
            raise

    def undo(self) -> None:
        """Put back what `apply` replaced (an attribute that was inherited or absent is removed
        again)."""
        saved, self._saved = self._saved, []
        for owner, attribute, old in reversed(saved):
            if old is _ABSENT:
                with contextlib.suppress(AttributeError):
                    delattr(owner, attribute)
            else:
                setattr(owner, attribute, old)


def _warn_once(name: str, message: str) -> None:
    if (name, message) not in _warned:
        _warned.add((name, message))
        log.warning("%s", message)


@contextlib.contextmanager
def patched(*patches: Patch | None) -> Iterator[list[Patch]]:
    """Apply `patches` (None entries skipped) for the block; yields those applied; undoes them in
    reverse order when the block ends or raises, and when a later patch cannot be applied."""
    applied: list[Patch] = []
    try:
        for patch in patches:
            if patch is not None and patch.ready():
                patch.apply()
                applied.append(patch)
        yield applied
    finally:
        for patch in reversed(applied):
            patch.undo()
