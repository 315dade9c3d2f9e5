"""Lets TFX module files keep their `tfx` imports when TFX itself is not installed.

`install()` (called by `user_module` before it runs a module) appends a finder to the end of
`sys.meta_path`, so it is only asked about `tfx` after every real finder said no: where the
real `tfx` package is installed it is found first and this finder never installs. The finder
answers the import paths TFX module files use with small stand-in modules whose attributes
are the runtime's equivalents (`generic_trainer.tfx`, `fn_args`, `data`). TFX's example and
template modules also import their own helper files by their `tfx` path
(`from tfx.examples.mnist import mnist_utils_native_keras_base as base`,
`from tfx.experimental.templates.taxi.models import features`): such an import loads the file
when it sits beside a module `user_module` loaded (`add_module_dir`), or in a folder above it
whose trailing folder names are those of the import's package (`.../taxi/models/features.py`),
under its `tfx` name; the packages on the way are empty stand-ins. `tfx.proto.*_pb2` and
`tfx.v1.proto` serve TFX's messages, declared wire-compatible in `tfx_dsl.protos` (`FORWARDS`:
a stand-in with every name of a module), and `tfma.EvalConfig` and the other config names TFX's
files use are given to the real TFMA when it is imported (`tfma_names`). Any other `tfx` import
fails with a short ImportError: the import, why (`tfx_dsl.hook_refusals` for the ones refused on
purpose), what to do, and where the supported imports are listed (docs/guides/tfx.md). It stays
installed for the rest of the process, because modules also import `tfx` lazily inside `run_fn`
and keras deserialization may re-import them.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import os
import sys
import types
from typing import Any

from generic_trainer.tfx import FILEIO_NAMES, IO_UTILS_NAMES
from generic_trainer.tfx_dsl import hook_refusals
from generic_trainer.tfx_dsl.hook_paths import DSL_MODULES
from generic_trainer.tfx_dsl.protos import paths as proto_paths
from generic_trainer.tfx_dsl.protos import tfma_names

log = logging.getLogger(__name__)

_TFX = "generic_trainer.tfx"
_FN_ARGS = "generic_trainer.fit.fn_args"
_DATA = "generic_trainer.data"

# Stand-in module -> {attribute: (module, attribute)}; its submodules are the stand-ins named under
# it.
MODULES: dict[str, dict[str, tuple[str, str]]] = {
    "tfx": {},
    "tfx.v1": {},
    "tfx.v1.components": {
        "FnArgs": (_FN_ARGS, "FnArgs"),
        "TunerFnResult": (_FN_ARGS, "TunerFnResult"),
        "DataAccessor": (_DATA, "DataAccessor"),
    },
    "tfx.v1.utils": {
        "parse_pbtxt_file": (_TFX, "parse_pbtxt_file"),
        "write_pbtxt_file": (_TFX, "write_pbtxt_file"),
    },
    "tfx.v1.dsl": {},
    "tfx.v1.dsl.io": {},
    "tfx.v1.dsl.io.fileio": {name: (f"{_TFX}:fileio", name) for name in FILEIO_NAMES},
    "tfx.components": {},
    "tfx.components.trainer": {},
    "tfx.components.trainer.fn_args_utils": {
        "FnArgs": (_FN_ARGS, "FnArgs"),
        "DataAccessor": (_DATA, "DataAccessor"),
    },
    "tfx.components.trainer.executor": {
        "TrainerFnArgs": (_FN_ARGS, "FnArgs"),
        "GenericExecutor": ("generic_trainer.tfx_dsl.executors", "GenericExecutor"),
    },
    "tfx.components.transform": {},
    "tfx.components.transform.stats_options_util": {"StatsType": (_TFX, "StatsType")},
    "tfx.components.tuner": {},
    "tfx.components.tuner.component": {"TunerFnResult": (_FN_ARGS, "TunerFnResult")},
    "tfx.utils": {},
    "tfx.utils.io_utils": {name: (_TFX, name) for name in IO_UTILS_NAMES},
    "tfx.dsl": {},
    "tfx.dsl.io": {},
    "tfx.dsl.io.fileio": {name: (f"{_TFX}:fileio", name) for name in FILEIO_NAMES},
}
MODULES.update(proto_paths.modules())
# Stand-in module -> the module whose every public name it has (`tfx.proto.trainer_pb2`).
FORWARDS: dict[str, str] = proto_paths.forwards()
for _name, _attributes in DSL_MODULES.items():  # the pipeline DSL's paths (tfx_dsl/hook_paths.py)
    MODULES.setdefault(_name, {}).update(_attributes)
ROOTS = ("tfx", "ml_metadata")  # the top-level names the finder answers
TFX_VERSION = "1.21.0"  # `tfx.__version__` (TFX's pipelines name their image by it)
_MARK = "__generic_trainer_stand_in__"
_MODULE_DIRS: list[
    str
] = []  # folders of the modules user_module loaded, searched for `tfx.*` files
_TREE_MODULES: set[str] = set()  # the `tfx.*` names loaded from those folders


def add_module_dir(directory: str) -> None:
    """Let `tfx.*` imports load files beside the module in `directory` or in its tree (see the
    module doc)."""
    directory = os.path.abspath(directory)
    if directory not in _MODULE_DIRS:
        _MODULE_DIRS.append(directory)


def _candidates(folder: str, packages: list[str], leaf: str) -> list[tuple[int, str]]:
    """(score, file) for `leaf.py` reached from `folder`: its last names are packages[j:i] (score
    i - j) and the file lies in the rest of the packages below it (packages[i:]); going down takes
    two names matched at least (`examples/bert`), so one common name (`components`) is no tree."""
    names = folder.split(os.sep)[1:]
    found = []
    for i in range(1, len(packages) + 1):
        for j in range(i):
            matched = i - j <= len(names) and names[len(names) - (i - j) :] == packages[j:i]
            if matched and (i == len(packages) or i - j >= 2):
                found.append((i - j, os.path.join(folder, *packages[i:], leaf + ".py")))
    return found


def module_file(fullname: str) -> str | None:
    """The file a `tfx.a.b.leaf` import names in a loaded module's tree: beside the module, or in a
    folder above it whose last names are some of the import's package names and below which the
    rest of them lead to the file (`.../bert/cola/m.py` imports `tfx.examples.bert.utils.x`:
    `.../bert/utils/x.py`). None when there is none. Where several fit, the one matching most
    package names wins, then the module loaded last."""
    *packages, leaf = fullname.split(".")[1:] or [""]
    best: tuple[int, str] | None = None
    for directory in reversed(_MODULE_DIRS):
        folder = directory
        while leaf and os.path.dirname(folder) != folder:
            candidates = _candidates(folder, packages, leaf)
            if folder == directory:
                candidates.append((0, os.path.join(folder, leaf + ".py")))
            for score, candidate in candidates:
                if (best is None or score > best[0]) and os.path.isfile(candidate):
                    best = (score, candidate)
            folder = os.path.dirname(folder)
    return best[1] if best else None


def _may_be_tree_package(fullname: str) -> bool:
    """Whether an unknown `tfx.*` name may be a package on the way to a file of a module's tree."""
    parent = fullname.rpartition(".")[0]
    parent_is_leaf_stand_in = parent in MODULES and not _children(parent)
    return bool(_MODULE_DIRS) and not fullname.startswith("tfx.v1.") and not parent_is_leaf_stand_in


_TFX_NAMES = "TFX's names"


def supported() -> str:
    """The supported imports, for error messages and the README: `tfx.x.y (A, B)`, one per leaf
    module."""
    leaves = [
        name for name in MODULES if not any(other.startswith(name + ".") for other in MODULES)
    ]
    return (
        "; ".join(f"{name} ({', '.join(MODULES[name]) or _TFX_NAMES})" for name in leaves)
        + "; and `from tfx import v1 as tfx`"
    )


SUPPORTED_WHERE = (
    'The tfx imports served here are listed in docs/guides/tfx.md ("Supported tfx imports")'
)


def unsupported_message(name: str) -> str:
    """The error for an import the hook does not serve: the import, why, what to do, where the
    supported imports are listed (not the list itself).

    Args:
      name: the dotted import that failed.

    Returns:
      The message.
    """
    why = hook_refusals.reason_for(name) or (
        "it is none of TFX 1.21's names this image serves (TFX itself is not installed here). "
        "Remove the import or use a served name; a `tfx` path to a file of your own "
        "(`from tfx.examples.penguin import penguin_utils_base`) loads that file when it sits "
        "beside the module or in a folder above it named as in the import"
    )
    return f"the module imports {name}, which generic-trainer does not provide: {why}. " + (
        SUPPORTED_WHERE
    )


def _children(name: str) -> list[str]:
    return [
        other.rsplit(".", 1)[1]
        for other in MODULES
        if other.startswith(name + ".") and "." not in other[len(name) + 1 :]
    ]


def _resolve(target: tuple[str, str]) -> Any:
    module_name, attribute = target
    module_name, _, inner = module_name.partition(":")
    value = importlib.import_module(module_name)
    if inner:
        value = getattr(value, inner)
    return getattr(value, attribute)


def _module_getattr(name: str):
    def __getattr__(attribute: str) -> Any:  # noqa: N807 - PEP 562 module __getattr__
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        if attribute in _children(name):
            return importlib.import_module(f"{name}.{attribute}")
        if attribute in MODULES.get(name, {}):
            return _resolve(MODULES[name][attribute])
        if module_file(f"{name}.{attribute}"):
            return importlib.import_module(f"{name}.{attribute}")
        # ImportError, not AttributeError: `from tfx.x import Y` then shows this message, not
        # Python's generic one.
        raise ImportError(unsupported_message(f"{name}.{attribute}"), name=f"{name}.{attribute}")

    return __getattr__


class _StandInLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = types.ModuleType(
            spec.name, f"generic-trainer's stand-in for {spec.name} (TFX is not installed)"
        )
        module.__getattr__ = _module_getattr(spec.name)
        module.__all__ = sorted(MODULES.get(spec.name, {})) + _children(spec.name)
        if spec.name in FORWARDS:
            names = vars(importlib.import_module(FORWARDS[spec.name]))
            module.__dict__.update({k: v for k, v in names.items() if not k.startswith("_")})
            module.__all__ = sorted(k for k in names if not k.startswith("_"))
        setattr(module, _MARK, True)
        if spec.name in ("tfx", "tfx.v1"):
            module.__version__ = TFX_VERSION
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


class TfxFinder(importlib.abc.MetaPathFinder):
    """Answers `tfx` and the supported `tfx.*` imports with stand-ins; refuses other `tfx.*`
    imports."""

    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        root = fullname.partition(".")[0]
        if root not in ROOTS:
            return None
        if fullname != root and not getattr(sys.modules.get(root), _MARK, False):
            return None  # the real package (imported some other way): not ours to answer
        if fullname not in MODULES:
            if hook_refusals.reason_for(fullname):
                raise ModuleNotFoundError(unsupported_message(fullname), name=fullname)
            path = module_file(fullname) if root == "tfx" else None
            if path is not None:
                log.info("import %s: loading %s (a file of the module's own tree)", fullname, path)
                _TREE_MODULES.add(fullname)
                return importlib.util.spec_from_file_location(fullname, path)
            on_the_way = hook_refusals.on_the_way(fullname)
            if root != "tfx" or not (on_the_way or _may_be_tree_package(fullname)):
                raise ModuleNotFoundError(unsupported_message(fullname), name=fullname)
            return importlib.machinery.ModuleSpec(fullname, _StandInLoader(), is_package=True)
        is_package = bool(_children(fullname))
        return importlib.machinery.ModuleSpec(fullname, _StandInLoader(), is_package=is_package)


def install() -> bool:
    """Resolve `tfx` imports to the runtime when TFX is not importable; True when the stand-ins are
    in use."""
    if any(isinstance(finder, TfxFinder) for finder in sys.meta_path):
        return True
    if "tfx" in sys.modules or importlib.util.find_spec("tfx") is not None:
        log.info("the tfx package is installed: module files import the real TFX")
        return False
    sys.meta_path.append(TfxFinder())
    tfma_names.install()  # `tfma.EvalConfig`, ... as TFX's files write them, on TFMA 0.52
    return True


def uninstall() -> None:
    """Remove the finder, the stand-in modules and the tree files loaded by `tfx` paths (tests)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, TfxFinder)]
    tfma_names.uninstall()
    for name in [n for n in sys.modules if n.partition(".")[0] in ROOTS]:
        if getattr(sys.modules[name], _MARK, False) or name in _TREE_MODULES:
            del sys.modules[name]
    _MODULE_DIRS.clear()
    _TREE_MODULES.clear()
