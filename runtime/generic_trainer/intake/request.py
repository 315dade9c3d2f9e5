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
import decimal
import logging
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

from generic_trainer.artifacts import bounded_parse, files, storage
from generic_trainer.artifacts.kfp_io import KfpOutputs
from generic_trainer.errors import UserInputError

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


def ints_from_floats(value: Any) -> Any:
    """Undo KFP's turning nested ints into floats (`[64.0, 2.0]` -> `[64, 2]`)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {k: ints_from_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [ints_from_floats(v) for v in value]
    return value


def json_object(input_name: str, value: Any) -> dict[str, Any]:
    if value is None or value == "":
        return {}
    value = (
        bounded_parse.load_json(value, input_name)
        if isinstance(value, str)
        else bounded_parse.check_depth(value, input_name)
    )
    if not isinstance(value, dict):
        raise UserInputError(
            input_name, f"expected a JSON object ({{...}}), got {type(value).__name__}"
        )
    return value


MAX_INT64 = 2**63 - 1
MAX_INT32 = 2**31 - 1
MAX_SECONDS = 30 * 24 * 3600  # a timeout longer than 30 days is a typo (and overflows some clocks)


def number(
    input_name: str,
    value: Any,
    *,
    integer: bool = True,
    minimum: float = 0,
    maximum: float = MAX_INT64,
    above_minimum: bool = False,
    default: Any = None,
    unit: str = "",
) -> Any:
    """The one check of a numeric flag or parameter: a finite number in range, else UserInputError
    (exit 2).

    `value` is what a flag or KFP parameter gave (a string, int or float); None or "" gives
    `default`. With `integer`, a whole number ("100", 100, 100.0, "1e3") is returned as an int;
    otherwise a float. The range is minimum <= value <= maximum (minimum < value with
    `above_minimum`). Infinity, NaN, booleans and numbers too large for the range (`1e400`) are
    refused with the range in the message.
    """
    if value is None or value == "":
        return default
    low = f"{'>' if above_minimum else '>='} {minimum:g}"
    high = f"{maximum}" if isinstance(maximum, int) else f"{maximum:g}"
    expected = (
        f"expected a {'whole number' if integer else 'number'}{' of ' + unit if unit else ''} "
        f"{low} and at most {high}, got {value!r}"
    )
    if isinstance(value, bool):
        raise UserInputError(input_name, expected)
    try:
        exact = decimal.Decimal(value.strip() if isinstance(value, str) else value)
    except (decimal.InvalidOperation, TypeError, ValueError):
        raise UserInputError(input_name, expected) from None
    if not exact.is_finite() or (integer and exact != exact.to_integral_value()):
        raise UserInputError(input_name, expected)
    if (
        exact > decimal.Decimal(maximum)
        or exact < decimal.Decimal(minimum)
        or (above_minimum and exact == decimal.Decimal(minimum))
    ):
        raise UserInputError(input_name, expected)
    return int(exact) if integer else float(exact)


def steps(input_name: str, value: Any) -> int | None:
    return number(input_name, value, unit="steps") or None  # TFX: num_steps 0 means "not set".


SPLIT_NAME_PATTERN = re.compile(r"[A-Za-z0-9_.-]+")


def split_names(input_name: str, value: Any, default: tuple[str, ...]) -> tuple[str, ...]:
    """Split names: each one path component (`[A-Za-z0-9_.-]+`, no `..`), none repeated.

    TFX asks only for non-empty, unique names and joins them into `<examples>/Split-<name>`; a name
    holding `/` or `..` would read outside the examples artifact, so only plain names are taken.
    """
    if value is None or value == "" or value == []:
        return default
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise UserInputError(
            input_name, f"expected split names such as 'train,eval', got {value!r}"
        )
    splits = tuple(str(s).strip() for s in items if str(s).strip())
    if not splits:
        raise UserInputError(
            input_name, f"expected split names such as 'train,eval', got {value!r}"
        )
    for split in splits:
        if not SPLIT_NAME_PATTERN.fullmatch(split) or ".." in split or split == ".":
            raise UserInputError(
                input_name,
                f"split name {split!r} is not allowed: expected letters, digits, "
                "'_', '-' and '.' only (no '/', no '..'), e.g. train,eval",
            )
    if len(set(splits)) != len(splits):
        raise UserInputError(input_name, f"split names repeat: {', '.join(splits)}")
    return splits


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


def out_dir(value: str | None, env: str, environ: Mapping[str, str], gcs_root: str) -> str | None:
    """An output directory: the value given, else the environment variable `env` (Vertex's
    AIP_*)."""
    value = value or environ.get(env)
    return os.path.normpath(storage.local_path(value, gcs_root)) if value else None


_RUN_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def local_file(value: str | None, gcs_root: str) -> str | None:
    """An output file's local path (`gs://b/x` -> `<gcs_root>/b/x`); None when not given."""
    return storage.local_path(value, gcs_root) if value else None


def run_namespace(values: Mapping[str, Any]) -> str | None:
    """`<run id>/<task name>` from --run-id / --task-name (KFP's placeholders), or None when not in
    a pipeline run.

    A value still reading `{{$...}}` is a placeholder the runner did not fill: treated as absent.
    """
    parts = []
    for key, flag in (("run_id", "--run-id"), ("task_name", "--task-name")):
        value = str(values.get(key) or "").strip()
        if not value or value.startswith("{{"):
            if value:
                log.warning(
                    "%s %s was not filled in by the pipeline runner; checkpoints are not "
                    "namespaced by it",
                    flag,
                    value,
                )
            if key == "run_id":
                return None
            continue
        if not _RUN_PART.fullmatch(value):
            raise UserInputError(
                flag, f"expected a name of letters, digits, '.', '_' or '-', got {value!r}"
            )
        parts.append(value)
    return "/".join(parts)


def checkpoint_dir(
    values: Mapping[str, Any], environ: Mapping[str, str], gcs_root: str, default: str
) -> str:
    """Where checkpoints go: --checkpoint-dir, else $AIP_CHECKPOINT_DIR, else `default` (inside this
    task's outputs).

    In a pipeline run (--run-id) the first two are base dirs shared by every run, so the run's own
    dir is `<base>/<run id>/<task name>`: a retried task finds its checkpoints again, a new run
    starts fresh.
    """
    base = values.get("checkpoint_dir") or environ.get("AIP_CHECKPOINT_DIR")
    if not base:
        return default
    path = os.path.normpath(storage.local_path(base, gcs_root))
    namespace = run_namespace(values)
    if namespace:
        path = os.path.join(path, namespace)
        log.info(
            "checkpoint dir %s: run %s's own under %s",
            path,
            namespace,
            "--checkpoint-dir" if values.get("checkpoint_dir") else "AIP_CHECKPOINT_DIR",
        )
    return path


def examples_dir(values: Mapping[str, Any], gcs_root: str) -> str:
    examples = values.get("examples")
    if not examples:
        raise UserInputError(
            "--examples", "required: the examples directory (TFX layout Split-<name>/*.gz)"
        )
    examples_path = storage.local_path(examples, gcs_root)
    if not os.path.isdir(examples_path):
        raise UserInputError(
            "--examples",
            f"{examples} is not a directory"
            + ("" if os.path.exists(examples_path) else " (it does not exist)"),
        )
    return examples_path


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


def seconds(input_name: str, value: Any, default: float | None = None) -> float | None:
    """A number of seconds > 0 (at most MAX_SECONDS), or `default` when unset."""
    return number(
        input_name,
        value,
        integer=False,
        minimum=0,
        above_minimum=True,
        maximum=MAX_SECONDS,
        default=default,
        unit="seconds",
    )


def check_gcs_timeout(environ: Mapping[str, str]) -> float | None:
    """$GENERIC_TRAINER_GCS_TIMEOUT (seconds Cloud Storage downloads may retry), checked; None when
    unset."""
    return seconds(storage.GCS_TIMEOUT_ENV, environ.get(storage.GCS_TIMEOUT_ENV))


def module_sha256(value: Any) -> str | None:
    """--module-sha256: 64 hex digits (sha256sum of the module file), or None when unset."""
    sha = value or None
    if sha and not re.fullmatch(r"[0-9a-fA-F]{64}", sha):
        raise UserInputError(
            "--module-sha256", "expected 64 hex digits (sha256sum of the module file)"
        )
    return sha


def model_dir(input_name: str, value: Any, gcs_root: str, required: bool) -> str | None:
    """A model artifact dir (holding Format-Serving) or a SavedModel dir; None when absent and not
    required."""
    if not value:
        if required:
            raise UserInputError(
                input_name,
                "required: a model dir (<dir>/Format-Serving, as train writes it) "
                "or a SavedModel dir",
            )
        return None
    path = existing_path(input_name, value, gcs_root)
    if not os.path.isdir(path):
        raise UserInputError(input_name, f"{value} is not a directory")
    return path


def required_out_dir(input_name: str, value: Any, gcs_root: str, what: str) -> str:
    if not value:
        raise UserInputError(input_name, f"required: {what}")
    return os.path.normpath(storage.local_path(value, gcs_root))


def positive_int(input_name: str, value: Any, default: int) -> int:
    return number(input_name, value, minimum=1, maximum=MAX_INT32, default=default)


_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "kib": 1024,
    "m": 1000**2,
    "mb": 1000**2,
    "mib": 1024**2,
    "g": 1000**3,
    "gb": 1000**3,
    "gib": 1024**3,
    "t": 1000**4,
    "tb": 1000**4,
    "tib": 1024**4,
}


def memory_size(input_name: str, value: Any, default: int | None) -> int | None:
    """Bytes from `8GiB`, `512MiB`, `2G` or a plain number; 0 means no limit (None)."""
    if value is None or value == "":
        return default
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*", str(value))
    unit = match.group(2).lower() if match else None
    if not match or unit not in _SIZE_UNITS:
        raise UserInputError(
            input_name, f"expected a size like 8GiB, 512MiB or 0 (no limit), got {value!r}"
        )
    amount = decimal.Decimal(match.group(1)) * _SIZE_UNITS[unit]
    size = number(input_name, int(amount), unit="bytes (a size like 8GiB, 512MiB or 0: no limit)")
    return size or None


DEFAULT_PROBE_MEMORY = 8 * 1024**3


MAX_WARMUP_REQUESTS = 1000  # TF Serving reads at most this many warm-up records


def data_path(value: str, gcs_root: str, local_runner: bool) -> str:
    """A path Beam reads or writes: gs:// stays a URI for a remote runner, else the local (/gcs)
    path."""
    if storage.is_gcs_uri(value) and not local_runner:
        return value
    return storage.local_path(value, gcs_root)


def new_output_dir(
    input_name: str, value: Any, gcs_root: str, local_runner: bool, what: str
) -> str:
    if not value:
        raise UserInputError(input_name, f"required: {what}")
    path = data_path(str(value), gcs_root, local_runner)
    if not storage.is_gcs_uri(path):
        path = os.path.normpath(path)
        if os.path.isdir(path) and os.listdir(path):
            raise UserInputError(
                input_name,
                f"{value} already exists and is not empty; give a new directory "
                "(outputs are written whole, never over an older one)",
            )
        if os.path.exists(path) and not os.path.isdir(path):
            raise UserInputError(
                input_name, f"{value} exists and is a file; expected a new directory"
            )
    return path
