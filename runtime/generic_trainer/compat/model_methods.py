"""`Model.fit` / `Model.compile` of Keras 3 (and tf_keras when loaded) wrapped at class level.

Assumes: `keras.Model` (and `tf_keras.Model`) resolve `fit` and `compile` through the class, so a
class attribute reaches every model, subclasses included unless they override the method; `fit`
takes `x`, `callbacks`, `verbose`, `shuffle` and returns a History with `history` and `params`;
`compile` takes `jit_compile` and `steps_per_execution` (Keras 3; tf_keras too).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import Any

from generic_trainer.compat.base import Patch, Versions

FIT_ARGUMENTS = ("x", "callbacks", "verbose", "shuffle")
COMPILE_ARGUMENTS = ("jit_compile", "steps_per_execution")

# make(original, model_class) -> the replacement function
Wrapper = Callable[[Callable[..., Any], type], Callable[..., Any]]


def model_classes(keras_mode: str) -> list[type]:
    """keras.Model, and tf_keras.Model when the mode is tf_keras or tf_keras is loaded."""
    import keras

    classes = [keras.Model]
    if keras_mode == "tf_keras" or "tf_keras" in sys.modules:
        import tf_keras

        classes.append(tf_keras.Model)
    return classes


class ModelMethods(Patch):
    """Replace `fit` / `compile` of the model classes with `wrappers[name](original, cls)`."""

    versions = (Versions("keras", "3.0", "4.0"), Versions("tf-keras", "2.13", "3.0"))
    lost = "final metrics, progress lines and the speed flags' compile defaults of run_fn models"

    def __init__(self, keras_mode: str, wrappers: dict[str, Wrapper]):
        super().__init__()
        self.keras_mode = keras_mode
        self.wrappers = wrappers

    def missing(self) -> list[str]:
        out = []
        for cls in model_classes(self.keras_mode):
            wanted = {"fit": FIT_ARGUMENTS, "compile": COMPILE_ARGUMENTS}
            for method, arguments in wanted.items():
                if method not in self.wrappers:
                    continue
                parameters = inspect.signature(
                    getattr(cls, method, None) or (lambda: None)
                ).parameters
                out += [
                    f"{cls.__module__}.Model.{method}({a}=...)"
                    for a in arguments
                    if a not in parameters
                ]
        return out

    def replacements(self) -> list[tuple[Any, str, Any]]:
        return [
            (cls, name, make(getattr(cls, name), cls))
            for cls in model_classes(self.keras_mode)
            for name, make in self.wrappers.items()
        ]
