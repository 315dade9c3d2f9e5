"""The text an experiment override comes in, read into mappings (no TensorFlow here).

Three sources: a config file (`--config-file`, YAML or JSON), the inline `config` (KFP's
parameter: text or a mapping) and `--params-override a.b=c,d.e=[1,2]` (or a YAML mapping). Every
one is read within `bounded_parse`'s limits (nesting, alias expansion, size); errors name the
source. Applying the mappings onto a config is `overrides.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from generic_trainer.artifacts import bounded_parse
from generic_trainer.errors import UserInputError


def _yaml_load(text: str, source: str) -> Any:
    """YAML (or JSON) text within the bounds of `bounded_parse` (nesting, alias expansion, size)."""
    return bounded_parse.load_yaml(text, source)


def load_config_file(path: str, source: str | None = None) -> dict[str, Any]:
    """Read a YAML (or JSON) config file.

    Args:
      path: the file.
      source: what errors name (default `--config-file PATH`).

    Returns:
      Its mapping ({} for an empty file).

    Raises:
      UserInputError: unreadable, too large or deep, not YAML, or not a mapping.
    """
    source = source or f"--config-file {path}"
    parsed = _yaml_load(bounded_parse.read_text(path, source), source)
    if parsed is None:
        return {}
    if not isinstance(parsed, Mapping):
        raise UserInputError(
            source, f"expected a mapping (task: ..., trainer: ...), got {type(parsed).__name__}"
        )
    return dict(parsed)


def parse_config_text(
    text: str | Mapping[str, Any] | None, source: str = "config"
) -> dict[str, Any]:
    """Read inline YAML/JSON (the KFP `config` parameter); a mapping passes through.

    Args:
      text: the text, a mapping, or None.
      source: what errors name.

    Returns:
      The mapping ({} for none).

    Raises:
      UserInputError: too deep, not YAML, or not a mapping.
    """
    if text is None or (isinstance(text, str) and not text.strip()):
        return {}
    parsed = (
        bounded_parse.check_depth(text, source)
        if isinstance(text, Mapping)
        else _yaml_load(text, source)
    )
    if parsed is None:
        return {}
    if not isinstance(parsed, Mapping):
        raise UserInputError(
            source, f"expected a YAML/JSON mapping (task: ..., trainer: ...), got {parsed!r}"
        )
    return dict(parsed)


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside brackets and quotes."""
    parts, depth, quote, current = [], 0, None, []
    for ch in text:
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    parts.append("".join(current))
    return parts


def parse_params_override(text: str | None, source: str = "--params-override") -> dict[str, Any]:
    """Read `a.b=c,d.e=[1,2]` (or a YAML mapping) as a nested mapping; values are YAML scalars.

    A comma-separated piece without `=` continues the previous value (`input_path=a/*,b/*`).

    Args:
      text: the override text, or None.
      source: what errors name.

    Returns:
      The nested mapping ({} for none).

    Raises:
      UserInputError: a piece that is no key=value pair, a bad key, or a key both set and nested.
    """
    if text is None or not text.strip():
        return {}
    stripped = text.strip()
    if stripped.startswith("{") or "\n" in stripped:
        return parse_config_text(stripped, source)
    pairs: list[list[str]] = []
    for piece in _split_top_level(stripped):
        if "=" in piece and not piece.split("=", 1)[0].strip().startswith(("[", "{", "'", '"')):
            key, value = piece.split("=", 1)
            pairs.append([key.strip(), value])
        elif pairs:
            pairs[-1][1] += "," + piece
        else:
            raise UserInputError(
                source, f"expected key=value pairs like trainer.train_steps=100, got {piece!r}"
            )
    out: dict[str, Any] = {}
    for key, raw in pairs:
        if not key or any(not part for part in key.split(".")):
            raise UserInputError(
                source, f"bad key {key!r}; expected dotted names like task.train_data.input_path"
            )
        value = _yaml_load(raw.strip(), source) if raw.strip() else ""
        node = out
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise UserInputError(source, f"{key}: {part} is given both a value and sub-keys")
        node[parts[-1]] = value
    return bounded_parse.check_depth(out, source)
