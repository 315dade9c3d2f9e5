"""Makes Keras 3 `Model.fit` / `evaluate` work under a multi-worker MultiWorkerMirroredStrategy.

Keras 3 (TensorFlow backend, keras issue 20585) fails there in two places, both in
`keras/src/backend/tensorflow/trainer.py`, both only when the strategy spans several workers:

1. `TensorFlowTrainer._maybe_symbolic_build` builds the model from one batch that it gets by
   `strategy.reduce("MEAN", batch)`; on several workers that all-reduce is handed a tuple of
   PerReplica values and fails with "Attempt to convert a value (PerReplica...) to a Tensor".
   The build needs only the batch's structure and shapes, so this replica's own slice does.
2. `reduce_per_replica(..., reduction="mean")`, which turns each step's metric values into one,
   calls `strategy.reduce("MEAN", v, axis=0)`: scalars have no axis 0 ("Invalid reduction
   dimension 0"). The mean over replicas is `axis=None`, what MirroredStrategy's branch computes.

`install()` replaces exactly these two functions with versions that differ only on a multi-worker
MultiWorkerMirroredStrategy and otherwise call the originals. Nothing else of Keras changes.

Two things stay broken, and `fit` / `evaluate` stop before their first step with a UserCodeError
saying so: `compile(steps_per_execution=N)` with N > 1 (the multi-step tf.while_loop with collective
ops inside fails: "You must feed a value for placeholder tensor"), and `jit_compile=True` on CPU
workers (XLA has no collectives for CPU devices).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from generic_trainer.errors import UserCodeError, UserInputError

if TYPE_CHECKING:
    from generic_trainer.fit.cluster import Cluster
    from generic_trainer.intake.fit_request import TrainRequest

log = logging.getLogger(__name__)

# Keras versions whose trainer was read and the fix tested against (two real worker processes).
TESTED = "3.15"

_installed = False


class Unsupported(Exception):
    """This Keras cannot be fixed by `install()`; the message says why."""


def _trainer_module():
    try:
        from keras.src.backend.tensorflow import trainer
    except ImportError as e:
        raise Unsupported(f"keras.src.backend.tensorflow.trainer cannot be imported ({e})") from None
    missing = [name for name in ("reduce_per_replica", "_collective_all_reduce_multi_worker", "TensorFlowTrainer")
               if not hasattr(trainer, name)]
    cls = getattr(trainer, "TensorFlowTrainer", None)
    missing += [f"TensorFlowTrainer.{name}" for name in ("_maybe_symbolic_build", "_symbolic_build")
                if cls is not None and not hasattr(cls, name)]
    if missing:
        raise Unsupported(f"its TensorFlow trainer lacks {', '.join(missing)}")
    return trainer


def check() -> None:
    """Raise `Unsupported` when the installed Keras 3 cannot get the fix."""
    import keras

    if not keras.__version__.startswith("3."):
        raise Unsupported(f"keras {keras.__version__} is not Keras 3")
    _trainer_module()


def install() -> None:
    """Patch Keras 3's TensorFlow trainer (idempotent). Raises `Unsupported` when it cannot."""
    global _installed
    if _installed:
        return
    check()
    import keras
    import tensorflow as tf
    from keras.src import tree

    trainer = _trainer_module()
    multi_worker = trainer._collective_all_reduce_multi_worker
    original_reduce = trainer.reduce_per_replica
    original_build = trainer.TensorFlowTrainer._maybe_symbolic_build

    def reduce_per_replica(values, strategy, reduction):
        if reduction in ("auto", "mean") and multi_worker(strategy):
            return tree.map_structure(lambda v: strategy.reduce("MEAN", v, axis=None), values)
        return original_reduce(values, strategy, reduction)

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        strategy = self._distribute_strategy
        if strategy is None or iterator is None or not multi_worker(strategy):
            return original_build(self, iterator=iterator, data_batch=data_batch)
        if (self.steps_per_execution or 1) > 1:
            raise UserCodeError(steps_per_execution_message(self.steps_per_execution))
        if self.jit_compile is True and all("GPU" not in d.upper() for d in strategy.extended.worker_devices):
            raise UserCodeError(JIT_ON_CPU_MESSAGE)
        for _, _, it in iterator:
            batch = next(it)
            data_batch = tree.map_structure(
                lambda x: strategy.experimental_local_results(x)[0]
                if isinstance(x, tf.distribute.DistributedValues) else x,
                batch,
            )
            break
        with strategy.scope():
            self._symbolic_build(data_batch=data_batch)

    trainer.reduce_per_replica = reduce_per_replica
    trainer.TensorFlowTrainer._maybe_symbolic_build = _maybe_symbolic_build
    _installed = True
    log.info("Keras %s: Model.fit/evaluate made multi-worker safe (keras issue 20585; tested with %s)",
             keras.__version__, TESTED)


def steps_per_execution_message(steps: int) -> str:
    return (
        f"Keras 3 fit/evaluate with steps_per_execution={steps} cannot run under MultiWorkerMirroredStrategy "
        "(TensorFlow fails inside the multi-step loop); compile with steps_per_execution=1 (the default) "
        "for multi-worker runs, or use --keras tf_keras with a tf_keras module, or the Task API (--task)."
    )


JIT_ON_CPU_MESSAGE = (
    "Keras 3 fit/evaluate with jit_compile=True cannot run on CPU workers under MultiWorkerMirroredStrategy "
    "(XLA has no collective ops for CPU devices); compile with jit_compile=False for multi-worker CPU runs."
)


def unsupported_message(reason: str) -> str:
    """What a user whose Keras 3 cannot be fixed should do instead."""
    return (
        f"Keras 3 Model.fit cannot run under MultiWorkerMirroredStrategy with this Keras ({reason}). "
        "Use a tf_keras module with --keras tf_keras (TF_USE_LEGACY_KERAS=1), or the Task API (--task), "
        "whose own training loop works with Keras 3 on several workers; or train on one worker."
    )


def prepare(request: TrainRequest, strategy_name: str, cluster: Cluster, num_gpus: int = 0) -> None:
    """Fix Keras 3 fit for several workers now, or fail before training when it cannot be fixed."""
    if strategy_name != "multi_worker_mirrored" or not cluster.is_multi_worker:
        return
    program = request.program  # a run_fn module: the Task API's loop never gets here
    if request.keras == "keras3" and (program.steps_per_execution or 1) > 1:
        raise UserInputError("--steps-per-execution", steps_per_execution_message(program.steps_per_execution))
    if request.keras == "keras3" and program.jit_compile and not num_gpus:
        raise UserInputError("--jit-compile", JIT_ON_CPU_MESSAGE)
    try:
        install()
    except Unsupported as e:
        if request.keras == "keras3":
            raise UserInputError("--keras", unsupported_message(str(e))) from None
        log.warning("a Keras 3 model would not train here: %s", unsupported_message(str(e)))
