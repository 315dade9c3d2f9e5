"""`tfma.EvalConfig` and its parts, as TFX pipeline files write them, on the real TFMA 0.52.

TFX's pipeline files build their Evaluator's config as `tfma.EvalConfig(model_specs=[tfma.ModelSpec(
...)], slicing_specs=[tfma.SlicingSpec()], metrics_specs=[tfma.MetricsSpec(...)])`. TFMA 0.52 keeps
those messages in `tensorflow_model_analysis.proto.config_pb2` and no longer names them at its top
level (only `MetricDirection`). `install()` gives the real `tensorflow_model_analysis` module every
top-level message and enum of its `config_pb2` it lacks, when a file imports it (or at once when it
is already imported): the messages are TFMA's own. Importing TFMA imports TensorFlow and Beam:
nothing here imports it before a user's file does.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any

TFMA = "tensorflow_model_analysis"


def add_config_names(tfma: types.ModuleType, config_pb2: Any = None) -> list[str]:
    """Give `tfma` the top-level messages and enums of TFMA's `config_pb2` it lacks.

    Args:
      tfma: the `tensorflow_model_analysis` module.
      config_pb2: its `proto.config_pb2` module (imported from `tfma` when None).

    Returns:
      The names added (names `tfma` already has are left as they are).
    """
    if config_pb2 is None:
        config_pb2 = importlib.import_module(f"{TFMA}.proto.config_pb2")
    file = config_pb2.DESCRIPTOR
    names = [*file.message_types_by_name, *file.enum_types_by_name]
    added = [name for name in names if not hasattr(tfma, name)]
    for name in added:
        setattr(tfma, name, getattr(config_pb2, name))
    return added


class _AddingLoader(importlib.abc.Loader):
    """TFMA's own loader, adding the config names once the package has run."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def __getattr__(self, name: str) -> Any:  # the rest of the loader's API (resources, ...)
        return getattr(self.loader, name)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__loader__ = module.__spec__.loader = self.loader  # no trace of the wrapper left
        self.loader.exec_module(module)
        add_config_names(module)


class TfmaNamesFinder(importlib.abc.MetaPathFinder):
    """Answers the first `tensorflow_model_analysis` import with TFMA's own spec, its loader
    wrapped to add the config names; it then leaves `sys.meta_path`."""

    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != TFMA:
            return None
        uninstall()
        spec = importlib.util.find_spec(TFMA)
        if spec is not None and spec.loader is not None:
            spec.loader = _AddingLoader(spec.loader)
        return spec


def install() -> None:
    """Make `tfma.EvalConfig` and the other config names resolve (see the module doc)."""
    if TFMA in sys.modules:
        add_config_names(sys.modules[TFMA])
    elif not any(isinstance(finder, TfmaNamesFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, TfmaNamesFinder())


def uninstall() -> None:
    """Remove the finder (the names already added stay)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, TfmaNamesFinder)]
