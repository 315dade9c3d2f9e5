"""Scalars read back from a run's TensorBoard event files (for the HTML reports' curves).

Both TF2 tensor summaries and TF1 `simple_value`s are read. Unreadable files are skipped with a
warning: a report is a view of the run, never a reason to fail it. The walk is iterative and
bounded (tree.py).
"""

from __future__ import annotations

import logging
import os

from generic_trainer.artifacts import tree

log = logging.getLogger("generic_trainer.artifacts.report")

Points = list[tuple[float, float]]


def read_scalars(log_dir: str) -> dict[str, dict[str, Points]]:
    """The scalars of every TensorBoard event file under `log_dir`.

    Args:
      log_dir: the directory (a missing one has none).

    Returns:
      {tag: {run: [(step, value), ...]}}; a run is the event file's directory relative to
      `log_dir` (Keras writes `train` and `validation`).
    """
    scalars: dict[str, dict[str, Points]] = {}
    if not log_dir or not os.path.isdir(log_dir):
        return scalars
    try:
        from tensorboard.backend.event_processing import event_file_loader
        from tensorboard.util import tensor_util
    except ImportError as e:  # pragma: no cover - tensorboard is a runtime dependency
        log.warning("report: cannot read TensorBoard logs (%s)", e)
        return scalars
    found = tree.walk(log_dir, "the TensorBoard logs", lenient=True)  # iterative, bounded
    for rel in sorted(f for f in found.files if ".tfevents." in os.path.basename(f)):
        run = os.path.dirname(rel) or "."
        try:
            for event in event_file_loader.EventFileLoader(os.path.join(log_dir, rel)).Load():
                for value in event.summary.value:
                    kind = value.WhichOneof("value")
                    if kind == "simple_value":
                        number = float(value.simple_value)
                    elif kind == "tensor" and value.metadata.plugin_data.plugin_name == "scalars":
                        array = tensor_util.make_ndarray(value.tensor)
                        if array.size != 1:
                            continue
                        number = float(array.reshape(()))
                    else:
                        continue
                    scalars.setdefault(value.tag, {}).setdefault(run, []).append(
                        (float(event.step), number)
                    )
        except Exception as e:  # a truncated or foreign file must not break the report
            log.warning(
                "report: skipped %s (%s: %s)", os.path.join(log_dir, rel), type(e).__name__, e
            )
    return scalars
