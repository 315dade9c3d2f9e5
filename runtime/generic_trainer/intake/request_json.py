"""Requests as JSON: `to_json()` and `from_json(value)` for a frozen request (e.g. the evaluator's
sandbox spec).

A request crosses a process boundary whole, never rebuilt field by field: tuples travel as lists, a
field whose value has its own `to_json` (EvalConfig) travels through it, and its class reads it back
through `decode_field`. `kfp` (where the face writes KFP's executor output) stays with the face: it
is not carried.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TypeVar

RequestT = TypeVar("RequestT", bound="JsonRequest")

NOT_CARRIED = ("kfp", "storage")  # storage: settings the parent process uses


class JsonRequest:
    """Mixin of the frozen request dataclasses: `to_json` / `from_json` (exact round trip but
    `kfp`)."""

    def to_json(self) -> dict[str, object]:
        """The request's fields as JSON values (`from_json` reads them back)."""
        value: dict[str, object] = {}
        for field in dataclasses.fields(self):  # type: ignore[arg-type]
            if field.name in NOT_CARRIED:
                continue
            item = getattr(self, field.name)
            if hasattr(item, "to_json"):
                item = item.to_json()
            elif isinstance(item, tuple):
                item = list(item)
            value[field.name] = item
        return value

    @classmethod
    def from_json(cls: type[RequestT], value: Mapping[str, object]) -> RequestT:
        """The request `to_json` wrote."""
        fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        kwargs = {}
        for name, item in value.items():
            default = fields[name].default
            if isinstance(item, list) and isinstance(default, tuple):
                item = tuple(item)
            kwargs[name] = cls.decode_field(name, item)
        return cls(**kwargs)

    @classmethod
    def decode_field(cls, name: str, value: object) -> object:
        """A field's value from its JSON (the class overrides it for a field with its own
        from_json)."""
        return value
