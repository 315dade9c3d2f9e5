"""`tfx.utils.proto_utils`: TFX's JSON helpers for proto messages (protobuf's json_format)."""

from __future__ import annotations

from typing import Any


def proto_to_json(proto: Any) -> str:
    """A message as JSON text with the proto's field names, keys sorted (as TFX).

    Args:
      proto: a protobuf message.

    Returns:
      The JSON text.
    """
    from google.protobuf import json_format

    return json_format.MessageToJson(proto, sort_keys=True, preserving_proto_field_name=True)


def json_to_proto(json_str: str, proto: Any) -> Any:
    """Parse JSON text into `proto` (unknown fields refused, as TFX); returns `proto`."""
    from google.protobuf import json_format

    return json_format.Parse(json_str, proto)
