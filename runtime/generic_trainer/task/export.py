"""The serving export of a trained Task: a SavedModel whose `serving_default` the Task chooses.

When `Task.build_serving_signatures(model)` returns endpoints, they are exported (with
`serving_trackables(model)` tracked beside the model). Otherwise (the default) `serving_default`
runs `Task.inference_step(inputs, model)` on the model's own inputs (the input signature
`model.export` would use), so a Task that post-processes its outputs overrides `inference_step`
and the serving model does the same. The caller holds the weights to export (the EMA weights).
"""

from __future__ import annotations

from typing import Any

from generic_trainer.errors import UserCodeError
from generic_trainer.fit import user_code
from generic_trainer.task.base import Task
from generic_trainer.task.state import call_user


def _model_input_signature(model: Any) -> Any:
    """The input signature `model.export` gives the model's serving function."""
    from keras.src.export.export_utils import (
        get_input_signature,
    )  # what model.export uses (no public name)

    return get_input_signature(model)


def export_serving(task: Task, model: Any, export_dir: str) -> None:
    """Write the serving SavedModel of `model` to `export_dir` (see the module docstring)."""
    import keras

    name = type(task).__name__
    signatures = call_user(task, "build_serving_signatures", task.build_serving_signatures, model)
    if signatures and "serving_default" not in signatures:
        raise UserCodeError(
            f"{name}.build_serving_signatures returned {sorted(signatures)}; it must include "
            "'serving_default'"
        )
    try:
        archive = keras.export.ExportArchive()
        archive.track(model)
        if signatures:
            for trackable in (
                call_user(task, "serving_trackables", task.serving_trackables, model) or []
            ):
                archive.track(trackable)
            for endpoint, fn in signatures.items():
                archive.add_endpoint(endpoint, fn)
        else:

            def serve(*inputs):
                return task.inference_step(inputs[0] if len(inputs) == 1 else inputs, model)

            # "serve", also written as serving_default (the first endpoint), as model.export names
            # it
            archive.add_endpoint("serve", serve, _model_input_signature(model))
        archive.write_out(export_dir, verbose=False)
    except (
        Exception
    ) as e:  # the Task's serving functions run while the archive is traced and written
        mapped = user_code.error_for(
            e, "the serving export", failed="exporting the serving model failed"
        )
        if mapped is e:
            raise
        raise mapped from e
