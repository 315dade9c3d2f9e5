"""The speed options a run sets for models the runtime never sees: compile defaults
(`--jit-compile`, `--steps-per-execution`) and the global mixed-precision policy
(`--mixed-precision`). `fit_hooks.recording_fit` applies them while `run_fn` runs.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
from typing import Any

log = logging.getLogger("generic_trainer.progress")


@dataclasses.dataclass(frozen=True)
class SpeedOptions:
    """Runtime-wide speed settings; None leaves the module's own choice (or Keras' default)."""

    jit_compile: bool | None = None
    steps_per_execution: int | None = None
    mixed_precision: str | None = None  # "mixed_float16" | "mixed_bfloat16"

    def compile_defaults(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.jit_compile is not None:
            out["jit_compile"] = self.jit_compile
        if self.steps_per_execution:
            out["steps_per_execution"] = self.steps_per_execution
        return out


def set_policy(keras_mode: str, policy: str | None) -> Any:
    """Set the global mixed-precision policy; returns a function restoring the previous one."""
    if not policy:
        return lambda: None
    import keras

    modules = [keras] + (
        [__import__("tf_keras")] if keras_mode == "tf_keras" or "tf_keras" in sys.modules else []
    )
    previous = [(m, m.mixed_precision.global_policy()) for m in modules]
    for m in modules:
        m.mixed_precision.set_global_policy(policy)
    log.info("mixed precision: global policy %s", policy)
    return lambda: [m.mixed_precision.set_global_policy(p) for m, p in previous]


def compile_wrapper(compile_defaults: dict[str, Any]) -> Any:
    """The `Model.compile` wrapper maker (`compat.model_methods`) that sets `compile_defaults`
    for the arguments the caller did not pass."""

    def make(original: Any, model_cls: type) -> Any:
        def compile(self, *args, **kwargs):  # noqa: A001 - Keras' name
            for key, value in compile_defaults.items():
                kwargs.setdefault(key, value)
            return original(self, *args, **kwargs)

        compile.__wrapped__ = original
        return compile

    return make
