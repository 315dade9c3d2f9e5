"""What every verb's request is built from: the raw inputs, and the checks that turn them into typed
values.

CLI flags and KFP's executor input both arrive as a dict of raw values keyed by flag name
(`examples`, `module_file`, ...). `raw_inputs` adds where they are read (the environment, where
gs:// is mounted, the KFP outputs); each verb's builder (fit_request, judge_request, data_request)
checks them without TensorFlow, applies Vertex's `AIP_*` defaults, and returns a frozen request that
the rest of the run trusts. The checks here name the flag and what was expected (UserInputError,
exit 2); those that take one value also serve as an `Option`'s `check` in the verbs' declarations
(`existing`, `text`, `whole_number`, ...: options.py).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

from generic_trainer.artifacts import files, storage
from generic_trainer.artifacts.kfp_io import KfpOutputs
from generic_trainer.artifacts.storage_settings import GCS_TIMEOUT_ENV
from generic_trainer.errors import UserInputError
from generic_trainer.intake.values import (
    memory_size,
    positive_int,
    seconds,
    split_names,
    steps,
)

GCS_ROOT_ENV = "GENERIC_TRAINER_GCS_ROOT"
KERAS_CHOICES = ("auto", "keras3", "tf_keras")
TUNE_STRATEGIES = ("auto", "default", "one_device", "mirrored")
log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class RawInputs:
    """A verb's raw values (flags, or KFP's executor input) with what they are read against."""

    values: Mapping[str, Any]
    environ: Mapping[str, str]
    gcs_root: str  # where gs:// is mounted: --gcs-root, else $GENERIC_TRAINER_GCS_ROOT, else /gcs
    kfp: KfpOutputs | None = None


def gcs_root(values: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> str:
    """Where gs:// is mounted: --gcs-root, else $GENERIC_TRAINER_GCS_ROOT, else /gcs."""
    environ = os.environ if environ is None else environ
    return values.get("gcs_root") or environ.get(GCS_ROOT_ENV) or "/gcs"


def raw_inputs(
    values: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    kfp: KfpOutputs | None = None,
) -> RawInputs:
    """The one preamble of every request builder: the environment (os.environ by default) and the
    gcs root."""
    environ = os.environ if environ is None else environ
    return RawInputs(values, environ, gcs_root(values, environ), kfp)


# `Option.check`s (options.py): (raw inputs, flag, raw value) -> the request field's value.
def text(default: str | None = None) -> Callable[[RawInputs, str, Any], Any]:
    """The value as given, or `default` when unset or empty."""
    return lambda raw, flag, value: value or default


def one_of(choices: tuple[str, ...], default: str) -> Callable[[RawInputs, str, Any], str]:
    """One of `choices`, or `default` when unset or empty (a KFP parameter is not checked by
    argparse)."""

    def check(raw: RawInputs, flag: str, value: Any) -> str:
        if value in (None, ""):
            return default
        if value not in choices:
            raise UserInputError(flag, f"expected one of {', '.join(choices)}, got {value!r}")
        return value

    return check


def boolean(default: bool) -> Callable[[RawInputs, str, Any], bool]:
    """A bool: true/false (also 1/0, yes/no), a KFP bool, or `default` when unset or empty."""

    def check(raw: RawInputs, flag: str, value: Any) -> bool:
        if value in (None, ""):
            return default
        if isinstance(value, bool):
            return value
        words = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}
        if str(value).strip().lower() not in words:
            raise UserInputError(flag, f"expected true or false, got {value!r}")
        return words[str(value).strip().lower()]

    return check


def existing(raw: RawInputs, flag: str, value: Any) -> str | None:
    """An input path that must exist (gs:// mapped under the gcs root); None when not given."""
    return existing_path(flag, value, raw.gcs_root)


def output_file(raw: RawInputs, flag: str, value: Any) -> str | None:
    """An output file's local path (gs:// mapped); None when not given."""
    return local_file(value, raw.gcs_root)


def step_count(raw: RawInputs, flag: str, value: Any) -> int | None:
    """A number of steps; 0 or unset is None (TFX's "not set")."""
    return steps(flag, value)


def splits(default: tuple[str, ...]) -> Callable[[RawInputs, str, Any], tuple[str, ...]]:
    """Split names ('a,b' or a list), `default` when unset."""
    return lambda raw, flag, value: split_names(flag, value, default)


def sha256(raw: RawInputs, flag: str, value: Any) -> str | None:
    """64 hex digits (the module file's sha256sum), or None."""
    return module_sha256(value)


def whole_number(default: int) -> Callable[[RawInputs, str, Any], int]:
    """A whole number >= 1, `default` when unset."""
    return lambda raw, flag, value: positive_int(flag, value, default)


def duration(default: float | None = None) -> Callable[[RawInputs, str, Any], float | None]:
    """Seconds > 0, `default` when unset."""
    return lambda raw, flag, value: seconds(flag, value, default)


def size(default: int | None) -> Callable[[RawInputs, str, Any], int | None]:
    """Bytes from 8GiB, 512MiB, ...; 0 is no limit (None); `default` when unset."""
    return lambda raw, flag, value: memory_size(flag, value, default)


def module_file(values: Mapping[str, Any]) -> str:
    if not values.get("module_file"):
        raise UserInputError(
            "--module-file", "required: a .py file, a gs:// URI or a dotted module name"
        )
    return values["module_file"]


def keras_choice(values: Mapping[str, Any], environ: Mapping[str, str]) -> tuple[str, str]:
    """(--keras as asked: auto, keras3 or tf_keras; why). Unset, TF_USE_LEGACY_KERAS decides when it
    is set
    (1/true/yes: tf_keras, anything else: keras3), else auto."""
    keras = values.get("keras")
    if keras:
        if keras not in KERAS_CHOICES:
            raise UserInputError(
                "--keras", f"expected one of {', '.join(KERAS_CHOICES)}, got {keras!r}"
            )
        return keras, f"--keras {keras}"
    legacy = environ.get("TF_USE_LEGACY_KERAS")
    if legacy:
        keras = "tf_keras" if legacy.lower() in ("1", "true", "yes") else "keras3"
        return keras, f"TF_USE_LEGACY_KERAS={legacy} is set"
    return "auto", "--keras auto"


def check_gcs_timeout(environ: Mapping[str, str]) -> float | None:
    """$GENERIC_TRAINER_GCS_TIMEOUT (seconds Cloud Storage downloads may retry), checked; None when
    unset."""
    return seconds(GCS_TIMEOUT_ENV, environ.get(GCS_TIMEOUT_ENV))


def module_sha256(value: Any) -> str | None:
    """--module-sha256: 64 hex digits (sha256sum of the module file), or None when unset."""
    sha = value or None
    if sha and not re.fullmatch(r"[0-9a-fA-F]{64}", sha):
        raise UserInputError(
            "--module-sha256", "expected 64 hex digits (sha256sum of the module file)"
        )
    return sha


DEFAULT_PROBE_MEMORY = 8 * 1024**3


MAX_WARMUP_REQUESTS = 1000  # TF Serving reads at most this many warm-up records


def existing_path(input_name: str, value: str | None, gcs_root: str) -> str | None:
    if not value:
        return None
    path = storage.local_path(value, gcs_root)
    if not os.path.exists(path):
        what = f"is {files.describe(path)}" if os.path.lexists(path) else "does not exist"
        raise UserInputError(
            input_name,
            f"{value} {what}" + (f" (looked at {path})" if path != value else ""),
        )
    return path


def local_file(value: str | None, gcs_root: str) -> str | None:
    """An output file's local path (`gs://b/x` -> `<gcs_root>/b/x`); None when not given."""
    return storage.local_path(value, gcs_root) if value else None
