"""Keras 3's `save_model` replaced, in every Keras module holding a reference to it.

Assumes: `keras.src.saving.saving_api.save_model(model, filepath, overwrite=True, zipped=None,
**kwargs)` is what `Model.save` calls (looked up in `saving_api` at call time), and
`keras.saving`, `keras.models` and tf.keras' `models` module hold their own references, found as
a `save_model` attribute of modules named `keras` / `keras.*`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from generic_trainer.compat.base import Patch, Versions

SAVE_ARGUMENTS = ("model", "filepath", "overwrite", "zipped")


def saving_api() -> Any:
    from keras.src.saving import saving_api as api

    return api


class SaveModel(Patch):
    """`save_model` of Keras 3 is `make(original)` everywhere Keras keeps it."""

    versions = (Versions("keras", "3.0", "3.16"),)
    lost = (
        "Keras 2 saves (save_format='tf', signatures=...) fail under Keras 3 as they do "
        "without the runtime"
    )

    def __init__(self, make: Callable[[Callable[..., Any]], Callable[..., Any]]):
        super().__init__()
        self.make = make

    def missing(self) -> list[str]:
        import inspect

        try:
            api = saving_api()
        except ImportError as e:
            return [f"keras.src.saving.saving_api ({e})"]
        if not callable(getattr(api, "save_model", None)):
            return ["keras.src.saving.saving_api.save_model"]
        parameters = inspect.signature(api.save_model).parameters
        return [f"save_model({name}=...)" for name in SAVE_ARGUMENTS if name not in parameters]

    def replacements(self) -> list[tuple[Any, str, Any]]:
        import tensorflow as tf

        _ = tf.keras.models.save_model  # loads tf.keras now, so that its reference is replaced too
        api = saving_api()
        original = api.save_model
        replacement = self.make(original)
        return [
            (module, "save_model", replacement)
            for name, module in list(sys.modules.items())
            if (name == "keras" or name.startswith("keras."))
            and getattr(module, "save_model", None) is original
        ]
