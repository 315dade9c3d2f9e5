"""generic-trainer: train and tune TensorFlow/Keras models from a user's TFX-style module.

`from generic_trainer import FnArgs, TunerFnResult` gives what a module's `run_fn` / `tuner_fn`
receives and returns; `from generic_trainer import tfx` is the drop-in for `from tfx import v1 as
tfx`. `from generic_trainer import Task` is the base class of the Task API (see
generic_trainer.task). Importing the package is cheap: nothing (TensorFlow least of all) loads until
a name is used.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FnArgs", "Task", "TunerFnResult"]


def __getattr__(name: str) -> Any:
    if name in ("FnArgs", "TunerFnResult"):
        from generic_trainer.fit import fn_args

        return getattr(fn_args, name)
    if (
        name == "Task"
    ):  # the Task API (generic_trainer.task): Model Garden's workflow with the runtime's loop
        from generic_trainer.task import Task

        return Task
    raise AttributeError(f"module 'generic_trainer' has no attribute {name!r}")
