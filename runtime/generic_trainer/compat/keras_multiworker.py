"""Keras 3 `Model.fit` / `evaluate` made to work under a multi-worker MultiWorkerMirroredStrategy.

Keras 3 (TensorFlow backend, keras issue 20585) fails there in two places, both in
`keras/src/backend/tensorflow/trainer.py`, both only when the strategy spans several workers:

1. `TensorFlowTrainer._maybe_symbolic_build` builds the model from one batch that it gets by
   `strategy.reduce("MEAN", batch)`; on several workers that all-reduce is handed a tuple of
   PerReplica values and fails with "Attempt to convert a value (PerReplica...) to a Tensor".
   The build needs only the batch's structure and shapes, so this replica's own slice does.
2. `reduce_per_replica(..., reduction="mean")`, which turns each step's metric values into one,
   calls `strategy.reduce("MEAN", v, axis=0)`: scalars have no axis 0 ("Invalid reduction
   dimension 0"). The mean over replicas is `axis=None`, what MirroredStrategy's branch computes.

`MultiWorkerFit` replaces exactly these two functions with versions that differ only on a
multi-worker MultiWorkerMirroredStrategy and otherwise call the originals, while the block of
`patched()` runs (both are looked up when `fit` traces its step function, inside the block).

Two things stay broken, and `fit` / `evaluate` stop before their first step with a UserCodeError
saying so: `compile(steps_per_execution=N)` with N > 1 (the multi-step tf.while_loop with collective
ops inside fails: "You must feed a value for placeholder tensor"), and `jit_compile=True` on CPU
workers (XLA has no collectives for CPU devices).
"""

from __future__ import annotations

from typing import Any

from generic_trainer.compat.base import Patch, Versions
from generic_trainer.errors import UserCodeError

TRAINER_FUNCTIONS = (
    "reduce_per_replica",
    "_collective_all_reduce_multi_worker",
    "TensorFlowTrainer",
)
TRAINER_METHODS = ("_maybe_symbolic_build", "_symbolic_build")


def steps_per_execution_message(steps: int) -> str:
    """Why `steps_per_execution` > 1 cannot run on several workers, and what to do."""
    return (
        f"Keras 3 fit/evaluate with steps_per_execution={steps} cannot run under "
        "MultiWorkerMirroredStrategy "
        "(TensorFlow fails inside the multi-step loop); compile with steps_per_execution=1 (the "
        "default) "
        "for multi-worker runs, or use --keras tf_keras with a tf_keras module, or the Task API "
        "(--task)."
    )


JIT_ON_CPU_MESSAGE = (
    "Keras 3 fit/evaluate with jit_compile=True cannot run on CPU workers under "
    "MultiWorkerMirroredStrategy "
    "(XLA has no collective ops for CPU devices); compile with jit_compile=False for multi-worker "
    "CPU runs."
)


def _trainer_module() -> Any:
    from keras.src.backend.tensorflow import trainer

    return trainer


class MultiWorkerFit(Patch):
    """Keras 3's `reduce_per_replica` and `TensorFlowTrainer._maybe_symbolic_build`, multi-worker
    safe."""

    versions = (Versions("keras", "3.15", "3.16"),)
    lost = "Keras 3 Model.fit cannot run under MultiWorkerMirroredStrategy"
    required = True

    def missing(self) -> list[str]:
        import keras

        if not keras.__version__.startswith("3."):
            return [f"Keras 3 (keras {keras.__version__} is installed)"]
        try:
            trainer = _trainer_module()
        except ImportError as e:
            return [f"keras.src.backend.tensorflow.trainer ({e})"]
        out = [name for name in TRAINER_FUNCTIONS if not hasattr(trainer, name)]
        cls = getattr(trainer, "TensorFlowTrainer", None)
        return out + [
            f"TensorFlowTrainer.{name}"
            for name in TRAINER_METHODS
            if cls is not None and not hasattr(cls, name)
        ]

    def replacements(self) -> list[tuple[Any, str, Any]]:
        trainer = _trainer_module()
        return [
            (trainer, "reduce_per_replica", _reduce_per_replica(trainer)),
            (trainer.TensorFlowTrainer, "_maybe_symbolic_build", _maybe_symbolic_build(trainer)),
        ]


def _reduce_per_replica(trainer: Any) -> Any:
    from keras.src import tree

    multi_worker, original = trainer._collective_all_reduce_multi_worker, trainer.reduce_per_replica

    def reduce_per_replica(values, strategy, reduction):
        if reduction in ("auto", "mean") and multi_worker(strategy):
            return tree.map_structure(lambda v: strategy.reduce("MEAN", v, axis=None), values)
        return original(values, strategy, reduction)

    return reduce_per_replica


def _maybe_symbolic_build(trainer: Any) -> Any:
    import tensorflow as tf
    from keras.src import tree

    multi_worker = trainer._collective_all_reduce_multi_worker
    original = trainer.TensorFlowTrainer._maybe_symbolic_build

    def maybe_symbolic_build(self, iterator=None, data_batch=None):
        strategy = self._distribute_strategy
        if strategy is None or iterator is None or not multi_worker(strategy):
            return original(self, iterator=iterator, data_batch=data_batch)
        if (self.steps_per_execution or 1) > 1:
            raise UserCodeError(steps_per_execution_message(self.steps_per_execution))
        if self.jit_compile is True and all(
            "GPU" not in d.upper() for d in strategy.extended.worker_devices
        ):
            raise UserCodeError(JIT_ON_CPU_MESSAGE)
        for _, _, it in iterator:
            data_batch = tree.map_structure(lambda x: _local_value(strategy, x, tf), next(it))
            break
        with strategy.scope():
            self._symbolic_build(data_batch=data_batch)

    return maybe_symbolic_build


def _local_value(strategy: Any, x: Any, tf: Any) -> Any:
    """This replica's own slice of a distributed value (x itself when it is not one)."""
    if isinstance(x, tf.distribute.DistributedValues):
        return strategy.experimental_local_results(x)[0]
    return x
