"""Task classes by name and by config class, and the check a Task class must pass.

`@register_task` makes a Task findable by name (`--task Name`) and by its `config_cls` (an
experiment's `task` config picks its Task); `check_task_class` says what a class misses before
anything runs. Importing this module does not import TensorFlow.
"""

from __future__ import annotations

import inspect
from typing import Any

from generic_trainer.errors import UserInputError
from generic_trainer.task.base import Task
from generic_trainer.task.config import TaskConfig

_TASKS: dict[str, type[Task]] = {}
_TASKS_BY_CONFIG: dict[type, type[Task]] = {}


def register_task(cls: type[Task] | None = None, *, name: str | None = None):
    """Class decorator: register a Task under `name` and by its config class.

    Args:
      cls: the Task class (when used as `@register_task`).
      name: the name it is found by (default: its class name).

    Returns:
      The class, or the decorator when called with `name` only.
    """

    def decorator(task_cls: type[Task]) -> type[Task]:
        _TASKS[name or task_cls.__name__] = task_cls
        if task_cls.config_cls is not TaskConfig:
            _TASKS_BY_CONFIG[task_cls.config_cls] = task_cls
        return task_cls

    return decorator(cls) if cls is not None else decorator


def get_task(name: str) -> type[Task] | None:
    """The Task registered under `name` (None: none)."""
    return _TASKS.get(name)


def task_for_config(task_config: TaskConfig) -> type[Task] | None:
    """The registered Task whose config class is `type(task_config)`."""
    for cls in type(task_config).__mro__:
        if cls in _TASKS_BY_CONFIG:
            return _TASKS_BY_CONFIG[cls]
    return None


def _overrides(cls: type, name: str) -> bool:
    """Whether `cls` defines its own `name` instead of the base Task's."""
    return getattr(cls, name, None) is not getattr(Task, name, None)


def check_task_class(cls: Any, input_name: str = "--task") -> type[Task]:
    """Fail early, naming what is missing, when `cls` cannot be trained as a Task.

    Args:
      cls: the class to check.
      input_name: what errors name.

    Returns:
      `cls`, checked.

    Raises:
      UserInputError: not a Task subclass, a required method missing, or a bad `config_cls`.
    """
    if not inspect.isclass(cls) or not issubclass(cls, Task):
        kind = type(cls).__name__ if not inspect.isclass(cls) else f"class {cls.__name__}"
        raise UserInputError(
            input_name,
            f"{getattr(cls, '__name__', cls)!s} is a {kind}, not a subclass of "
            "generic_trainer.Task",
        )
    missing = [m for m in ("build_model", "build_inputs") if not _overrides(cls, m)]
    own_steps = _overrides(cls, "train_step") and _overrides(cls, "validation_step")
    if not _overrides(cls, "build_losses") and not own_steps:
        missing.append("build_losses")
    if missing:
        raise UserInputError(
            input_name,
            f"Task {cls.__name__} does not define {', '.join(missing)} (required: build_model, "
            "build_inputs, and build_losses unless train_step and validation_step are both "
            "overridden)",
        )
    if not (inspect.isclass(cls.config_cls) and issubclass(cls.config_cls, TaskConfig)):
        raise UserInputError(
            input_name,
            f"{cls.__name__}.config_cls must be a TaskConfig subclass, got {cls.config_cls!r}",
        )
    return cls


def overrides_aggregation(task: Task) -> bool:
    """Whether the task aggregates validation logs itself (its own `aggregate_logs`)."""
    return _overrides(type(task), "aggregate_logs")
