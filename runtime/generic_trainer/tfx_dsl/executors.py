"""`executor_spec.ExecutorClassSpec` and TFX's Trainer executor, as old-style pipeline files name
them: `Trainer(custom_executor_spec=executor_spec.ExecutorClassSpec(GenericExecutor))`.

TFX 1.x still accepts that spelling of its default (the module's `run_fn`); `plan` takes it as
this image's train step and refuses any other executor class by name.
"""

from __future__ import annotations

from typing import Any


class GenericExecutor:
    """`tfx.components.trainer.executor.GenericExecutor`: the Trainer that calls the module's
    `run_fn` (this image's train step)."""

    TFX_PATH = "tfx.components.trainer.executor.GenericExecutor"


class ExecutorClassSpec:
    """`tfx.dsl.components.base.executor_spec.ExecutorClassSpec(executor_class)`."""

    def __init__(self, executor_class: Any, extra_flags: Any = None):
        self.executor_class = executor_class
        self.extra_flags = extra_flags

    def __repr__(self) -> str:
        return f"ExecutorClassSpec({executor_name(self.executor_class)})"


def executor_name(executor_class: Any) -> str:
    """The dotted name of an executor class (TFX's path for the stand-in's own)."""
    path = getattr(executor_class, "TFX_PATH", None)
    if path:
        return str(path)
    module = getattr(executor_class, "__module__", "")
    return f"{module}.{getattr(executor_class, '__qualname__', repr(executor_class))}"


def is_generic_trainer(spec: Any) -> bool:
    """Whether `spec` is `ExecutorClassSpec(GenericExecutor)`: TFX's default Trainer executor."""
    return isinstance(spec, ExecutorClassSpec) and spec.executor_class is GenericExecutor
