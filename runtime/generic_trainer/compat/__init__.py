"""Every patch of Keras, TensorFlow or keras-tuner internals, in one room.

A floor under everything else: it imports only the libraries and `errors`. Each module is one
library patch, a `Patch` (`base.py`) declaring the library versions it was written for, the
internals it needs and what a run loses without it; `patched(*patches)` applies a set and undoes
them on exit, exceptions included. What the runtime does with the patched behaviour (progress
lines, histories, answers to a module's strategy, messages) stays with its callers in `fit/`,
`tuning/` and `tune.py`.

- `model_methods.py`: `Model.fit` / `Model.compile` of Keras 3 and tf_keras wrapped at class level
  (`fit/fit_hooks.py`: progress, histories, speed defaults).
- `tensorboard_hooks.py`: a Keras 3 TensorBoard callback's idle batch hooks taken out
(`fit/fit_hooks.py`).
- `keras_multiworker.py`: Keras 3's TensorFlow trainer made multi-worker safe (keras issue 20585).
- `keras_resume.py`: where tf_keras / Keras 3 `fit` starts, Keras 3 steps skipped, what tf_keras
asks
  of a callback, an optimizer's variables made before the first step (`fit/checkpointing.py`).
- `strategy_classes.py`: `tf.distribute` strategy classes answered by stand-ins
(`fit/module_strategy.py`).
- `keras2_saving.py`: Keras 3's `save_model` answering Keras 2 SavedModel saves
(`fit/keras2_saving.py`).
- `keras_tuner.py`: a tuner's hooks, an oracle's methods and retry queue, the oracle client's wait
  (`tune.py`, `tuning/trial_log.py`).
- `tf_coordination.py`: TensorFlow's coordination service given a registration deadline while a
  multi-worker strategy starts (`fit/cluster.py`).

Not patches, so not here: imports of private modules that are only read (`task/export.py`'s
`keras.src.export.export_utils`, `artifacts/process_exit.py`'s writer classes) and
`tuning/oracle_server.py`'s subclass of keras-tuner's `OracleServicer`.

`tests/test_compat.py` checks, for each patch, that the internals it relies on are still there and
behave as assumed, so a library upgrade that changes them fails a test, not a run.
"""

from generic_trainer.compat.base import Patch, Unsupported, Versions, patched

__all__ = ["Patch", "Unsupported", "Versions", "patched"]
