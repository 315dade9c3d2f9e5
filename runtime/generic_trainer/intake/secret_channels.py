"""Every secret a run was given, from every configuration channel, as one list (what the supervisor
masks).

`run_secrets` feeds `redaction.secret_values` (values under keys whose names say secret, or that
`secret_keys` lists) with each channel parsed the way the run parses it: `--custom-config` and the
executor input (inline or a file; its parameters are channels too), a Task's `--config-file`s, its
inline `config` YAML and `--params-override`, the `--hyperparameters` file, `vertex-job --env` and
the container arguments it sends; and adds `redaction.environment_secrets` (variables whose names
say secret, passwords in URLs) and the password of every URL given anywhere. A channel that does
not parse adds nothing here: the run itself refuses it (exit 2). No TensorFlow.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from generic_trainer.artifacts import bounded_parse, redaction
from generic_trainer.errors import UserInputError
from generic_trainer.task import config as task_config

_PARSE_ERRORS = (UserInputError, OSError, ValueError, TypeError, RecursionError)


def run_secrets(values: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> set[str]:
    """The secret values of a run's raw option values (vars(args), executor-input parameters).

    Args:
      values: option name -> raw value (strings, lists of strings, mappings).
      environ: the environment (names that say secret); None: none.

    Returns:
      The values to mask (each at least redaction.MIN_SECRET_CHARS long).
    """
    found = _channel_secrets(values, read_files=True, depth=0)
    if environ is not None:
        found |= redaction.environment_secrets(environ)
    return {v for v in found if len(v) >= redaction.MIN_SECRET_CHARS}


def _channel_secrets(values: Mapping[str, Any], read_files: bool, depth: int) -> set[str]:
    found = redaction.secret_values(dict(values))
    for text in _strings(values.values()):
        found |= redaction.url_secrets(text)
    parsers: dict[str, Callable[[Any], Any]] = {
        "params_override": task_config.parse_params_override,
        "config": task_config.parse_config_text,
    }
    if read_files:
        parsers["hyperparameters"] = _hyperparameters
        for path in _strings([values.get("config_file")]):
            found |= _parsed_secrets(task_config.load_config_file, path)
    for key, parse in parsers.items():
        if values.get(key):
            found |= _parsed_secrets(parse, values[key])
    if values.get("env"):
        pairs = dict(p.partition("=")[::2] for p in _strings([values["env"]]))
        found |= redaction.environment_secrets(pairs)
    if depth < 2:
        for nested in (
            _executor_parameters(values.get("executor_input")),
            _container_values(values),
        ):
            found |= _channel_secrets(nested, read_files and depth == 0, depth + 1)
    return found


def _parsed_secrets(parse: Callable[[Any], Any], raw: Any) -> set[str]:
    try:
        return redaction.secret_values(parse(raw))
    except _PARSE_ERRORS:
        return set()


def _strings(values: Iterable[Any]) -> list[str]:
    out: list[str] = []
    for value in values:
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, (list, tuple)):
            out.extend(v for v in value if isinstance(v, str))
    return out


def _hyperparameters(path: str) -> Any:
    if os.path.isdir(path):
        names = [n for n in os.listdir(path) if not n.startswith(".")]
        path = os.path.join(path, names[0]) if len(names) == 1 else path
    return bounded_parse.load_json(bounded_parse.read_text(path, "--hyperparameters"), "-")


def _executor_parameters(source: Any) -> dict[str, Any]:
    """The parameter values of the executor input (inline JSON or a file), or {}."""
    if not isinstance(source, str) or not source.strip():
        return {}
    try:
        text = source
        if not source.lstrip().startswith("{"):
            text = bounded_parse.read_text(source, "--executor-input")
        parsed = bounded_parse.load_json(text, "--executor-input", max_depth=200)
        parameters = parsed["inputs"]["parameterValues"]
    except (*_PARSE_ERRORS, KeyError):
        return {}
    return dict(parameters) if isinstance(parameters, Mapping) else {}


def _container_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """`vertex-job`'s container arguments as option name -> value (`--params-override X` ->
    params_override)."""
    args = _strings([values.get("container_args")])
    out: dict[str, Any] = {}
    for i, arg in enumerate(args):
        if not arg.startswith("--"):
            continue
        name, sep, value = arg[2:].partition("=")
        if not sep:
            value = args[i + 1] if i + 1 < len(args) else ""
        out.setdefault(name.replace("-", "_"), value)
    return out
