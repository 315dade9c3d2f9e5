"""Whether a run_fn's Keras 3 `Model.fit` can run on several workers, and the patch that makes it.

Keras 3 (TensorFlow backend, keras issue 20585) fails under a multi-worker
MultiWorkerMirroredStrategy; `compat.keras_multiworker.MultiWorkerFit` fixes its TensorFlow
trainer while `run_fn` runs (train applies the patch `prepare()` returns with `compat.patched`).
What cannot be fixed fails here, before training, with a UserInputError naming the flag:
`--steps-per-execution` > 1 and `--jit-compile` on CPU workers; a Keras whose trainer lacks the
functions the patch replaces fails with what to do instead (`--keras tf_keras`, `--task`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from generic_trainer.compat import Unsupported
from generic_trainer.compat.keras_multiworker import (
    JIT_ON_CPU_MESSAGE,
    MultiWorkerFit,
    steps_per_execution_message,
)
from generic_trainer.errors import UserInputError

if TYPE_CHECKING:
    from generic_trainer.fit.cluster import Cluster
    from generic_trainer.fit.requests import TrainRequest

log = logging.getLogger(__name__)

__all__ = [
    "JIT_ON_CPU_MESSAGE",
    "Unsupported",
    "check",
    "prepare",
    "steps_per_execution_message",
    "unsupported_message",
]


def check() -> None:
    """Raise `Unsupported` when the installed Keras 3 cannot get the fix."""
    MultiWorkerFit().check()


def unsupported_message(reason: str) -> str:
    """What a user whose Keras 3 cannot be fixed should do instead."""
    return (
        "Keras 3 Model.fit cannot run under MultiWorkerMirroredStrategy with this Keras "
        f"({reason}). "
        "Use a tf_keras module with --keras tf_keras (TF_USE_LEGACY_KERAS=1), or the Task API "
        "(--task), "
        "whose own training loop works with Keras 3 on several workers; or train on one worker."
    )


def prepare(
    request: TrainRequest, strategy_name: str, cluster: Cluster, num_gpus: int = 0
) -> MultiWorkerFit | None:
    """The patch Keras 3 fit needs on several workers (None: not needed, or not possible for a
    tf_keras module); fails before training when a Keras 3 fit cannot be fixed."""
    if strategy_name != "multi_worker_mirrored" or not cluster.is_multi_worker:
        return None
    program = request.program  # a run_fn module: the Task API's loop never gets here
    if request.keras == "keras3" and (program.steps_per_execution or 1) > 1:
        raise UserInputError(
            "--steps-per-execution", steps_per_execution_message(program.steps_per_execution)
        )
    if request.keras == "keras3" and program.jit_compile and not num_gpus:
        raise UserInputError("--jit-compile", JIT_ON_CPU_MESSAGE)
    try:
        check()
    except Unsupported as e:
        if request.keras == "keras3":
            raise UserInputError("--keras", unsupported_message(str(e))) from None
        log.warning("a Keras 3 model would not train here: %s", unsupported_message(str(e)))
        return None
    patch = MultiWorkerFit()
    log.info(
        "Keras %s: Model.fit/evaluate made multi-worker safe while run_fn runs (keras issue 20585; "
        "written for %s)",
        patch.versions[0].installed(),
        patch.versions[0],
    )
    return patch
