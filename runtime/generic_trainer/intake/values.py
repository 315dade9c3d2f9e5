"""Raw values parsed, each with one wording of what was expected: numbers in range (the one
numeric check), steps, durations in seconds, memory sizes, split names, JSON objects (KFP's floats
made whole numbers again). Each error names its flag. No TensorFlow.
"""

from __future__ import annotations

import decimal
import re
from collections.abc import Mapping
from typing import Any

from generic_trainer.artifacts import bounded_parse
from generic_trainer.errors import UserInputError


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
