"""Which custom_config values are secret, and masking them: what may be logged or written to
metadata.

A leaf module (only errors.py): the request parser checks `secret_keys` with it, the Task config
masks its params.yaml with it, the CLI and the Vertex launcher mask what they log.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from generic_trainer.errors import UserInputError

# custom_config keys whose values are never logged; also any key listed in
# custom_config["secret_keys"].
# The same names say secret for environment variables (*TOKEN*, *SECRET*, *PASSWORD*, *API_KEY*,
# *CREDENTIAL*, as Airflow and CI systems mask them); a tokenizer is not a token.
SECRET_KEY_PATTERN = re.compile(
    r"(secret|password|passwd|token(?!iz)|credential|api_?key|private_?key)", re.I
)
# The userinfo of a URL (`scheme://user:password@host`): masked wherever a URL is logged.
URL_USERINFO = re.compile(r"(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]*://)([^\s/@:]*):([^\s/@]+)@")
_NOT_SECRET = re.compile(r"(true|false|yes|no|none|null|on|off|[-+0-9.]*)", re.I)


def secret_key_names(config: Mapping[str, Any]) -> set[str]:
    """The key names `config["secret_keys"]` lists: one name, a comma-separated string, or a list of
    names."""
    listed = config.get("secret_keys") if isinstance(config, Mapping) else None
    if listed is None or listed == "":
        return set()
    if isinstance(listed, str):
        return {k.strip() for k in listed.split(",") if k.strip()}
    if isinstance(listed, (list, tuple)) and all(isinstance(k, str) for k in listed):
        return set(listed)
    raise UserInputError(
        "--custom-config",
        f"secret_keys: expected a key name or a list of key names, got {listed!r}",
    )


def is_secret_key(key: Any, listed: set[str] = frozenset()) -> bool:
    """Whether values under `key` are never logged: its name looks secret, or `secret_keys` lists
    it."""
    return str(key) in listed or bool(SECRET_KEY_PATTERN.search(str(key)))


def redact(config: Mapping[str, Any]) -> dict[str, Any]:
    """Replace values of secret keys with '***', at any depth: in nested objects and in lists.

    A key is secret when its name looks secret (SECRET_KEY_PATTERN) or `secret_keys` lists it
    (a name or a list of names, at the top or in any nested object; it applies below that level).
    A malformed `secret_keys` masks every value rather than risk a leak.
    """
    try:
        listed = secret_key_names(config)
    except UserInputError:
        return {k: "***" for k in config}
    return _redact_value(config, listed)


def _redact_value(value: Any, listed: set[str]) -> Any:
    if isinstance(value, Mapping):
        try:
            listed = listed | secret_key_names(value)
        except UserInputError:
            return {k: "***" for k in value}
        return {
            k: "***"
            if k != "secret_keys" and is_secret_key(k, listed)
            else _redact_value(v, listed)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_redact_value(v, listed) for v in value]
    return value


MIN_SECRET_CHARS = 4  # shorter values ("1", "abc") would mask unrelated text all over the log
_MAX_DEPTH = 64


def secret_values(value: Any) -> set[str]:
    """Every value under a secret key (as `redact` judges keys), at any depth, as text: what the
    supervisor masks in every line the run writes. JSON text inside strings (`--custom-config`, the
    executor input's custom_config parameter, `--custom-config=JSON` in a list of container
    arguments) is searched too;
    values shorter than MIN_SECRET_CHARS are not masked."""
    found: set[str] = set()
    _collect(value, set(), False, found, 0)
    return {v for v in found if len(v) >= MIN_SECRET_CHARS}


def _json_inside(text: str) -> Any:
    body = text.split("=", 1)[1] if text.startswith("--") and "=" in text else text
    if not body.lstrip().startswith(("{", "[")):
        return None
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def _collect(value: Any, listed: set[str], secret: bool, found: set[str], depth: int) -> None:
    if depth > _MAX_DEPTH or value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        inner = _json_inside(value)
        if secret:
            found.add(value)
        if inner is not None:
            _collect(inner, listed, secret, found, depth + 1)
    elif isinstance(value, (int, float)):
        if secret:
            found.add(str(value))
    elif isinstance(value, Mapping):
        try:
            listed = listed | secret_key_names(value)
        except UserInputError:
            secret = True  # a malformed secret_keys: every value is treated as secret
        for k, v in value.items():
            _collect(
                v,
                listed,
                secret or (k != "secret_keys" and is_secret_key(k, listed)),
                found,
                depth + 1,
            )
    elif isinstance(value, (list, tuple)):
        for v in value:
            _collect(v, listed, secret, found, depth + 1)


def environment_secrets(environ: Mapping[str, str]) -> set[str]:
    """The values of the environment variables whose names say secret (`is_secret_key`), and the
    passwords of URLs in any variable (`STORAGE_EMULATOR_HOST=http://user:pass@host`): what the
    supervisor masks in every line. Flags and numbers (`true`, `0`, `8470`) are not masked."""
    found = {
        value
        for name, value in environ.items()
        if is_secret_key(name) and not _NOT_SECRET.fullmatch(value.strip())
    }
    for value in environ.values():
        found |= url_secrets(value)
    return {v for v in found if len(v) >= MIN_SECRET_CHARS}


def url_secrets(text: str) -> set[str]:
    """The passwords in the URLs of `text` (`gs://user:pass@bucket` -> {"pass"})."""
    return {m.group(3) for m in URL_USERINFO.finditer(text) if len(m.group(3)) >= MIN_SECRET_CHARS}


def mask_urls(text: str) -> str:
    """`text` with the userinfo of every URL in it masked: `http://***@host`."""
    return URL_USERINFO.sub(r"\1***@", text)
