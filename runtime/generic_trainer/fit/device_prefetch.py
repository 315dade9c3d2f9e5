"""`model.fit`'s datasets copied to the GPU ahead of each step (`prefetch_to_device`).

On a one-GPU run under the default strategy the runtime's wrapped fit (`fit_hooks.py`) ends the
datasets it gets with `prefetch_to_device`: there, and not in the data accessor, because a module
may still transform the dataset the accessor returned, and nothing may follow that
transformation. `--prefetch-to-device off` turns it off (`cluster.prefetch_device`).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

log = logging.getLogger("generic_trainer.progress")


def is_dataset(x: Any) -> bool:
    """Whether x is a tf.data.Dataset (without importing TensorFlow when nothing has)."""
    tf = sys.modules.get("tensorflow")
    return tf is not None and isinstance(x, tf.data.Dataset)


class DevicePrefetch:
    """Ends the tf.data datasets `model.fit` gets (x, validation_data) with
    `prefetch_to_device(device)`, so the next batch is copied to the GPU while the step runs.
    Applied only where the dataset reaches fit: a module may still transform the dataset the data
    accessor returned, and nothing may follow prefetch_to_device in a pipeline (TensorFlow's rule:
    its elements live on the device)."""

    def __init__(self, device: str | None):
        self.device = device
        self.logged = False

    def apply(self, args: tuple, kwargs: dict[str, Any]) -> tuple:
        """(args, kwargs) with the datasets among x and validation_data prefetched to the device;
        not with a `class_weight` (Keras maps the dataset to add the weights, after it reached
        fit)."""
        if not self.device or kwargs.get("class_weight") is not None:
            return args, kwargs
        if args and is_dataset(args[0]):
            args = (self._on_device(args[0]), *args[1:])
        for key in ("x", "validation_data"):
            if is_dataset(kwargs.get(key)):
                kwargs[key] = self._on_device(kwargs[key])
        return args, kwargs

    def _on_device(self, dataset: Any) -> Any:
        import tensorflow as tf

        if _copied_to_a_device(dataset):
            return dataset  # the module prefetched it to a device itself
        if not self.logged:
            self.logged = True
            log.info(
                "prefetch to device: model.fit's batches are copied to %s ahead of each step "
                "(--prefetch-to-device off turns it off)",
                self.device,
            )
        return dataset.apply(tf.data.experimental.prefetch_to_device(self.device))


def _copied_to_a_device(dataset: Any) -> bool:
    """Whether the dataset ends with copy_to_device (prefetch_to_device is one, then a prefetch on
    the device). Looks at TensorFlow's dataset classes by name: if they change, this says False and
    the copy is added."""
    for _ in range(3):  # the dataset, its prefetch, an options dataset
        if type(dataset).__name__ == "_CopyToDeviceDataset":
            return True
        dataset = getattr(dataset, "_input_dataset", None)
    return False
