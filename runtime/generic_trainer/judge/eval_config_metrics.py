"""Reading the short form's `metrics`: built-in names and custom metric classes by import path.

Every error is a UserInputError naming the key (`eval_config.metrics[1].class_name`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from generic_trainer.artifacts import bounded_parse
from generic_trainer.errors import UserInputError
from generic_trainer.judge.eval_config import BUILTIN_METRICS, CustomMetric
from generic_trainer.judge.eval_config_fields import unknown_keys

_CLASS_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")
_NAME = re.compile(r"^[A-Za-z_][\w-]*$")


def custom_metric(key: str, entry: Any) -> CustomMetric:
    """A metric class by import path (a string or `{"class_name", "module", "config", "name"}`)."""
    from generic_trainer.judge import eval_tfma

    if isinstance(entry, str):
        entry = {"class_name": entry}
    if not isinstance(entry, Mapping):
        raise UserInputError(
            f"eval_config.{key}",
            "expected a metric name, an import path or an object like "
            '{"class_name": "keras.metrics.AUC", "config": {...}}',
        )
    unknown_keys(key, entry, ("class_name", "module", "config", "name"))
    class_name, module = entry.get("class_name"), entry.get("module")
    if (
        not isinstance(class_name, str)
        or not class_name
        or (module is not None and not isinstance(module, str))
    ):
        raise UserInputError(
            f"eval_config.{key}.class_name",
            f"expected a class import path like keras.metrics.AUC, got {class_name!r}",
        )
    path = f"{module}.{class_name}" if module else class_name
    if not _CLASS_PATH.match(path):
        raise UserInputError(
            f"eval_config.{key}.class_name",
            f"{path!r} is not an import path like keras.metrics.AUC (module.Class)",
        )
    config = entry.get("config") or {}
    if isinstance(config, str):  # TFMA writes the config as a JSON string
        config = bounded_parse.load_json(
            config if config.lstrip().startswith("{") else "{" + config + "}",
            f"eval_config.{key}.config",
        )
    if not isinstance(config, Mapping):
        raise UserInputError(
            f"eval_config.{key}.config",
            f"expected an object of constructor arguments, got {config!r}",
        )
    name = (
        entry.get("name")
        or config.get("name")
        or eval_tfma.keras_metric_name(path.rsplit(".", 1)[1])
    )
    if not isinstance(name, str) or not _NAME.match(name):
        raise UserInputError(
            f"eval_config.{key}.name", f"expected a metric name (letters, digits, _), got {name!r}"
        )
    return CustomMetric(name, path, {**config, "name": name})


def metrics(value: Any) -> tuple[tuple[str, ...] | None, tuple[CustomMetric, ...]]:
    """(the metric names in order, the custom metrics) of the short form's `metrics` list."""
    if value is None:
        return None, ()
    if not isinstance(value, list):
        raise UserInputError(
            "eval_config.metrics", f"expected a list of metric names, got {value!r}"
        )
    names: list[str] = []
    custom: list[CustomMetric] = []
    for i, entry in enumerate(value):
        if isinstance(entry, str) and "." not in entry:
            if entry not in BUILTIN_METRICS:
                raise UserInputError(
                    "eval_config.metrics",
                    f"unknown metric {entry!r}; known: "
                    f"{', '.join(sorted(BUILTIN_METRICS))}, or a Keras "
                    "metric class by import path (keras.metrics.AUC)",
                )
            name = entry
            if any(m.name == name for m in custom):
                raise UserInputError(
                    f"eval_config.metrics[{i}]",
                    f"the built-in {name!r} and a custom metric of "
                    "that name are both listed; give the custom one "
                    'another "name"',
                )
        else:
            metric = custom_metric(f"metrics[{i}]", entry)
            if metric.name in names:
                raise UserInputError(
                    f"eval_config.metrics[{i}]",
                    f"a metric named {metric.name!r} is listed "
                    'already; give this one another "name"',
                )
            custom.append(metric)
            name = metric.name
        if name not in names:
            names.append(name)
    return tuple(names), tuple(custom)
