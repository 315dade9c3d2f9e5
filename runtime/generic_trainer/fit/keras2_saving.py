"""Keras 2 saving under Keras 3: `model.save(dir, save_format='tf', signatures=...)` writes a
SavedModel.

TFX module files export with Keras 2's `model.save(serving_model_dir, save_format='tf',
signatures=...)` or `tf.keras.models.save_model(...)`; Keras 3 refuses both ("The `save_format`
argument is deprecated in Keras 3"). While the user's function runs under Keras 3, `bridge()`
answers a save to a SavedModel (save_format 'tf'/'tensorflow', `signatures` or `options` given,
or a path that is neither `.keras` nor `.h5`) with `tf.saved_model.save(model, path, signatures,
options)`, as Keras 2 did; `.keras` / `.h5` saves go to Keras 3 unchanged.
Without `signatures`, `serving_default` is the one Keras 2 wrote for the model (`keras2_signature`:
inputs named after the Input layers, outputs after the output layers), not Keras 3's
(`inputs`, `inputs_1`, `output_0`). `tf.saved_model.save(model, dir, signatures=...)` works on
Keras 3 models as it is. Keras 2
APIs that cannot be bridged (loading a SavedModel with `load_model`, `keras.optimizers.legacy`,
...) still fail; `hint()` adds what to do to their error (`--keras tf_keras`).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from typing import Any

from generic_trainer import compat
from generic_trainer.fit import keras2_signature

log = logging.getLogger(__name__)

_KERAS3_REFUSALS = (
    "Keras 3",
    "Invalid filepath extension for saving",
    "File format not supported",
    "fit_generator",
    "evaluate_generator",
    "predict_generator",
    "keras.layers.experimental",
)
_KERAS2_IDIOM = "A KerasTensor cannot be used as input to a TensorFlow function"
_SAVED_MODEL_FORMATS = ("tf", "tensorflow", "saved_model", "savedmodel")


def hint(exc: BaseException, tf_keras_possible: bool = True) -> str:
    """What to do about an error Keras 3 raised for a Keras 2 API ('' for any other error)."""
    text = f"{type(exc).__name__}: {exc}"
    if (
        _KERAS2_IDIOM in text
    ):  # tf ops on symbolic Keras inputs: Keras 2 wraps them in layers, Keras 3 refuses
        return (
            " (a Keras 2 idiom, a TensorFlow op on symbolic Keras inputs, which Keras 3 refuses: "
            + (
                "run with --keras tf_keras to give the module Keras 2 (tf_keras) as tf.keras, as "
                "TFX does, or "
                if tf_keras_possible
                else "keras-tuner needs Keras 3, so "
            )
            + "wrap the op in a Keras layer)"
        )
    if not any(marker in text for marker in _KERAS3_REFUSALS):
        return ""
    if tf_keras_possible:
        return (
            " (a Keras 2 API that Keras 3 does not provide: run with --keras tf_keras to give the "
            "module "
            "Keras 2 (tf_keras) as tf.keras, or port this call to Keras 3)"
        )
    return (
        " (a Keras 2 API that Keras 3 does not provide; keras-tuner needs Keras 3, so port "
        "this call to Keras 3)"
    )


def _wants_saved_model(
    path: str, save_format: Any, signatures: Any, options: Any, zipped: Any
) -> bool:
    if save_format is not None and str(save_format).lower() in _SAVED_MODEL_FORMATS:
        return True
    if save_format is not None or zipped is not None or path.startswith("hf://"):
        return False
    return (
        signatures is not None
        or options is not None
        or not path.endswith((".keras", ".h5", ".hdf5"))
    )


def _saved_model_saver(original):
    def save_model(model, filepath, overwrite=True, zipped=None, **kwargs):
        path = os.fspath(filepath)
        save_format = kwargs.get("save_format")
        signatures, options = kwargs.get("signatures"), kwargs.get("options")
        if not _wants_saved_model(path, save_format, signatures, options, zipped):
            return original(model, filepath, overwrite=overwrite, zipped=zipped, **kwargs)
        unknown = set(kwargs) - {
            "save_format",
            "signatures",
            "options",
            "include_optimizer",
            "save_traces",
        }
        if unknown:
            raise ValueError(
                f"model.save() got argument(s) Keras 2 did not have either: {sorted(unknown)}"
            )
        import tensorflow as tf

        if os.path.exists(path) and not overwrite:
            raise FileExistsError(f"{path} exists and model.save(..., overwrite=False) was asked")
        if signatures is None:
            signatures = _keras2_default_signature(model)
        names = sorted(signatures) if isinstance(signatures, dict) else ["serving_default"]
        log.info(
            "Keras 2 save of a Keras 3 model (save_format=%s) to %s: writing a SavedModel with "
            "tf.saved_model.save, signatures %s",
            save_format,
            path,
            ", ".join(names),
        )
        tf.saved_model.save(model, path, signatures=signatures, options=options)

    save_model.__wrapped__ = original
    return save_model


def _keras2_default_signature(model) -> dict | None:
    """`serving_default` named as Keras 2 named it (None: Keras 3's default, when the model's inputs
    are unknown)."""
    serving_default = keras2_signature.default_signature(model)
    if serving_default is None:
        log.warning(
            "the model's input shapes are not known (it was never called or takes several "
            "arguments): "
            "serving_default is Keras 3's (inputs `inputs`, ..., output `output_0`), not Keras 2's"
        )
        return None
    import tensorflow as tf

    inputs = [spec.name for spec in tf.nest.flatten(serving_default.structured_input_signature)]
    log.info(
        "serving_default as Keras 2 wrote it: inputs %s, outputs %s",
        ", ".join(inputs),
        ", ".join(sorted(serving_default.structured_outputs)),
    )
    return {"serving_default": serving_default}


@contextlib.contextmanager
def bridge(keras_mode: str) -> Iterator[None]:
    """While the block runs under Keras 3, Keras 2 SavedModel saves write a SavedModel (restored
    after;
    `compat.keras2_saving` replaces Keras' `save_model`)."""
    if keras_mode != "keras3":
        yield
        return
    from generic_trainer.compat import keras2_saving

    with compat.patched(keras2_saving.SaveModel(_saved_model_saver)):
        yield
