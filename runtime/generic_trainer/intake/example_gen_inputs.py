"""import-examples' input values (intake): hash splits, per-split patterns, TFX's input_base, the
range config and the options only some formats take, as data_request.py's builder resolves them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from generic_trainer.errors import UserInputError
from generic_trainer.intake.values import (
    SPLIT_NAME_PATTERN,
    ints_from_floats,
    json_object,
)

DEFAULT_SPLITS = (("train", 2), ("eval", 1))  # CsvExampleGen's default: 2/3 train, 1/3 eval


def _split_name(input_name: str, name: str) -> str:
    name = name.strip()
    if not SPLIT_NAME_PATTERN.fullmatch(name):
        raise UserInputError(
            input_name, f"split name {name!r} must be letters, digits, '_', '-' or '.'"
        )
    return name


def _named_pairs(value: Any, separator: str) -> list[tuple[str, Any]]:
    """A KFP dict's items in order, or `name<separator>value,...` split into pairs (a bare name
    pairs with "")."""
    if isinstance(value, Mapping):
        return list(value.items())
    return [(part.split(separator, 1) + [""])[:2] for part in str(value).split(",") if part.strip()]


def hash_splits(value: Any) -> tuple[tuple[str, int], ...]:
    """`train:2,eval:1` -> (("train", 2), ("eval", 1)); the order decides which bucket range is
    whose.

    A dict is taken in its order; KFP sorts a dict parameter's keys, so the component takes the
    string.
    """
    if value is None or value == "" or value == {}:
        return DEFAULT_SPLITS
    splits = []
    for name, buckets in _named_pairs(value, ":"):
        try:
            count = int(float(buckets))
        except (TypeError, ValueError):
            count = 0
        if count < 1 or float(buckets) != count:
            raise UserInputError(
                "--splits",
                f"expected name:buckets pairs with whole buckets >= 1 such as "
                f"'train:2,eval:1', got {value!r}",
            )
        splits.append((_split_name("--splits", name), count))
    if len({n for n, _ in splits}) != len(splits):
        raise UserInputError("--splits", f"a split name appears twice in {value!r}")
    return tuple(splits)


def _input_splits(value: Any) -> tuple[tuple[str, str], ...]:
    """`train=PATTERN,eval=PATTERN` (or a KFP dict) -> (("train", PATTERN), ("eval", PATTERN))."""
    if value is None or value == "" or value == {}:
        return ()
    out = []
    for name, pattern in _named_pairs(value, "="):
        if not str(pattern).strip():
            raise UserInputError(
                "--input-splits",
                f"expected name=PATTERN pairs such as 'train=a/*.csv,eval=b/*.csv', got {value!r}",
            )
        out.append((_split_name("--input-splits", name), str(pattern).strip()))
    if len({n for n, _ in out}) != len(out):
        raise UserInputError("--input-splits", f"a split name appears twice in {value!r}")
    return tuple(out)


def input_patterns(
    path: Callable[[str], str], values: Mapping[str, Any]
) -> tuple[str | None, tuple[tuple[str, str], ...]]:
    """(hash-split pattern, per-split patterns) as Beam reads them. `--input DIR` is TFX's
    input_base: its files (`DIR/*`), or the base of relative `--input-splits` patterns."""
    given = values.get("input") or values.get("input_pattern") or None
    input_splits = _input_splits(values.get("input_splits"))
    base = path(given) if given else None
    is_dir = bool(given) and (
        str(given).endswith("/") or ("://" not in base and os.path.isdir(base))
    )
    if input_splits and given and not is_dir:
        raise UserInputError(
            "--input",
            f"{given} is not a folder; with --input-splits, --input is the folder their "
            "patterns are relative to (TFX's input_base), or left out",
        )
    if not given and not input_splits:
        raise UserInputError(
            "--input",
            "give --input PATTERN_OR_DIR (split by hash with --splits) or --input-splits "
            "name=PATTERN,... (one pattern per split)",
        )
    if input_splits:
        root = base if is_dir else ""
        return None, tuple((n, path(_join(root, p)) if root else path(p)) for n, p in input_splits)
    return (_join(base, "*") if is_dir else base), ()


def _join(base: str, pattern: str) -> str:
    if "://" in pattern or pattern.startswith("/"):
        return pattern
    return base.rstrip("/") + "/" + pattern


def range_config(value: Any) -> dict[str, Any] | None:
    """TFX's RangeConfig (JSON or a KFP dict), checked as TFX checks it; None when not given."""
    from generic_trainer.beam.spans import check_range_config

    config = json_object("--range-config", value)
    try:
        check_range_config(ints_from_floats(config))
    except ValueError as e:
        raise UserInputError("--range-config", str(e)) from None
    return ints_from_floats(config) or None


def check_import_options(fmt: str, fields: Mapping[str, Any], input_splits: Any) -> None:
    """Options that only some formats (or input forms) take."""
    if fields.get("payload_format") == "FORMAT_TF_SEQUENCE_EXAMPLE" and fmt != "tfrecord":
        raise UserInputError(
            "--payload-format",
            "FORMAT_TF_SEQUENCE_EXAMPLE is for --format tfrecord (tables become tf.Examples)",
        )
    name = fields.get("partition_feature")
    if name is not None and not str(name).strip():
        raise UserInputError("--partition-feature", "expected a feature name, got an empty one")
    if name and input_splits:
        raise UserInputError(
            "--partition-feature",
            "is for --input with hash --splits; with --input-splits each pattern is a split "
            "(TFX refuses a split_config beside input splits too)",
        )
