"""Applying override mappings onto config dataclasses: unknown keys refused, values coerced.

`override(config, values, source)` sets the nested mapping `values` onto the dataclass
`config` in place. Unknown keys are rejected naming the key (and the closest known one);
values are coerced to the field's type (`"3"` -> 3 for an int, `5` -> 5.0 for a float,
`"true"` -> True ...). Fields typed `dict` are free-form and merged. A dataclass with an
`upgrade_keys(values, source)` method converts older key forms first. No TensorFlow here.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from generic_trainer.errors import UserInputError
from generic_trainer.task.optimization_config import OptimizationConfig


class _CoercionError(ValueError):
    pass


_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise _CoercionError(f"expected true or false, got {value!r}")


def _to_int(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            try:
                as_float = float(value)
            except ValueError:
                as_float = None
            if as_float is not None and as_float.is_integer():
                return int(as_float)
    raise _CoercionError(f"expected an integer, got {value!r}")


def _to_float(value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            pass
    raise _CoercionError(f"expected a number, got {value!r}")


def _to_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise _CoercionError(f"expected a string, got {value!r}")


_SCALARS = {bool: _to_bool, int: _to_int, float: _to_float, str: _to_str}


def _coerce_union(value: Any, args: tuple[Any, ...], tp: Any) -> Any:
    """`value` as the first member of the union that takes it (None, "none" and "null" for an
    Optional)."""
    if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
        if type(None) in args:
            return None
    errors = []
    for arg in args:
        if arg is type(None):
            continue
        try:
            return _coerce(value, arg)
        except _CoercionError as e:
            errors.append(str(e))
    raise _CoercionError(" or ".join(errors) or f"expected {_type_name(tp)}")


def _coerce(value: Any, tp: Any) -> Any:
    """`value` as type `tp`, or _CoercionError saying what was expected."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin is typing.Union or (hasattr(types, "UnionType") and isinstance(tp, types.UnionType)):
        return _coerce_union(value, args, tp)
    if tp in _SCALARS:
        return _SCALARS[tp](value)
    if tp in (list, tuple) or origin in (list, tuple, Sequence):
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",")] if value.strip() else []
        if not isinstance(value, (list, tuple)):
            raise _CoercionError(f"expected a list, got {value!r}")
        item = args[0] if args else Any
        items = [_coerce(v, item) for v in value]
        return tuple(items) if (tp is tuple or origin is tuple) else items
    if tp is dict or origin in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise _CoercionError(f"expected a mapping, got {value!r}")
        return dict(value)
    if isinstance(tp, type):
        if isinstance(value, tp):
            return value
        raise _CoercionError(f"expected {tp.__name__}, got {value!r}")
    return value


def _deep_merge(base: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _field_types(obj: Any) -> dict[str, Any]:
    hints = typing.get_type_hints(type(obj))
    return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(obj)}


def override(config: Any, values: Mapping[str, Any], source: str, prefix: str = "") -> Any:
    """Apply `values` (a nested mapping) onto the dataclass `config` in place; returns it.

    `source` names where the values came from (`--config-file a.yaml`, `--params-override`);
    errors name it and the full dotted key.
    """
    if not isinstance(values, Mapping):
        raise UserInputError(
            source,
            f"expected a mapping of keys to values at {prefix or 'the top level'}, "
            f"got {type(values).__name__}",
        )
    upgrade = getattr(config, "upgrade_keys", None)
    if upgrade is not None:
        values = upgrade(values, source)
    fields = _field_types(config)
    for key, value in values.items():
        dotted = f"{prefix}{key}"
        if key not in fields:
            close = difflib.get_close_matches(str(key), list(fields), n=1)
            hint = f" (did you mean {prefix + close[0]!r}?)" if close else ""
            section = prefix.rstrip(".") or "the experiment"
            raise UserInputError(
                source, f"unknown key {dotted!r}{hint}; {section} has: {', '.join(fields)}"
            )
        current = getattr(config, key)
        tp = fields[key]
        if dataclasses.is_dataclass(current) and not isinstance(current, type):
            if value is None:
                continue
            override(current, value, source, prefix=f"{dotted}.")
            continue
        nested = _dataclass_in(tp)
        if nested is not None and isinstance(
            value, Mapping
        ):  # an Optional[Dataclass] that is None now
            fresh = nested()
            override(fresh, value, source, prefix=f"{dotted}.")
            setattr(config, key, fresh)
            continue
        try:
            coerced = _coerce(value, tp)
        except _CoercionError as e:
            raise UserInputError(source, f"{dotted}: {e}") from None
        if isinstance(coerced, dict) and isinstance(current, Mapping):
            coerced = _deep_merge(current, coerced)
        setattr(config, key, coerced)
    return config


def build_optimization_config(
    values: Mapping[str, Any], source: str = "optimizer_config"
) -> OptimizationConfig:
    """A `trainer.optimizer_config` from a mapping in the YAML form (unknown keys: an error naming
    the key)."""
    return override(OptimizationConfig(), values, source, prefix="trainer.optimizer_config.")


def _dataclass_in(tp: Any) -> type | None:
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return tp
    for arg in typing.get_args(tp):
        if dataclasses.is_dataclass(arg) and isinstance(arg, type):
            return arg
    return None
