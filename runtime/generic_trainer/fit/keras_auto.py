"""`--keras auto`: the `tf.keras` TFX would give a module, decided from its source before TensorFlow
loads.

Under TFX, importing tensorflow_transform sets `TF_USE_LEGACY_KERAS=1` when it is unset
(tensorflow_transform's keras_lib), and TFX, its Transform and tfx_bsl bring it in: a module that
imports `tfx`, `tensorflow_transform` or `tfx_bsl` (itself, or a file beside it that it imports)
gets Keras 2 (tf_keras) as `tf.keras`; any other module gets TensorFlow's default, Keras 3. `choose`
reads the module and the files it imports from its own folder with `ast` (nothing is executed) and
says which, and why; `decide` is the one decision of a run, made at intake (a gs:// or s3://
module that is not mounted is fetched first). A module that cannot be read (a package that is not
on the path) gets Keras 3, and the reason says how to ask for tf_keras.
"""

from __future__ import annotations

import ast
import logging
import os
import sys
import tempfile
from collections.abc import Iterator

from generic_trainer.artifacts import storage
from generic_trainer.artifacts.storage_settings import DEFAULT_SETTINGS, StorageSettings
from generic_trainer.errors import UserInputError
from generic_trainer.fit import module_source

log = logging.getLogger(__name__)

TFX_PACKAGES = ("tfx", "tensorflow_transform", "tfx_bsl")
# in the reason while the module is not read: see decide
NOT_READ = "cannot be read before it is fetched"
_MAX_FILES = 200  # files of the module's own tree read, at most
_WHY_TF_KERAS = (
    "TFX gives such modules Keras 2 (tf_keras) as tf.keras: importing tensorflow_transform sets "
    "TF_USE_LEGACY_KERAS=1 when it is unset; pass --keras keras3 to give it Keras 3"
)


def choose(module_file: str, gcs_root: str = "/gcs") -> tuple[str, str]:
    """("tf_keras" or "keras3", why) for the run_fn module `module_file` (path, gs:// URI or dotted
    name)."""
    path = source_file(module_file, gcs_root)
    if path is None:
        return "keras3", (
            f"the module {module_file} {NOT_READ}, so its imports are not known; Keras 3 (pass "
            "--keras tf_keras for a module written for TFX's tf.keras)"
        )
    found = tfx_import(path)
    if found is None:
        return "keras3", (
            f"neither {os.path.basename(path)} nor a file of its own that it imports imports "
            f"{', '.join(TFX_PACKAGES)}: Keras 3, TensorFlow's tf.keras"
        )
    chain, package, line = found
    names = [os.path.basename(c) for c in chain]
    via = names[0] + "".join(f" imports {name}, which" for name in names[1:])
    return "tf_keras", f"{via} imports {package} (line {line}): {_WHY_TF_KERAS}"


def decide(
    module_file: str, gcs_root: str = "/gcs", settings: StorageSettings = DEFAULT_SETTINGS
) -> tuple[str, str]:
    """The one --keras auto decision of a run_fn module, made once at intake.

    Args:
        module_file: the module (path, gs://, s3:// or minio:// URI, or dotted name).
        gcs_root: where gs:// is mounted.
        settings: the request's storage settings: a remote module that is not mounted is fetched
            (into a temporary dir, removed) to read its imports.

    Returns:
        ("tf_keras" or "keras3", why), the reason starting with "--keras auto".
    """
    from generic_trainer.fit import user_module

    keras, why = choose(module_file, gcs_root)
    if NOT_READ not in why or "://" not in module_file:
        return keras, f"--keras auto: {why}"
    log.info(
        "--keras auto: the module %s %s: fetching it to read its imports", module_file, NOT_READ
    )
    with tempfile.TemporaryDirectory(prefix="generic-trainer-keras-") as tmp:
        try:
            path = user_module.fetch(module_file, tmp, settings)
        except UserInputError as e:
            return keras, f"--keras auto: {why}; fetching it failed: {e}"
        keras, why = choose(path or module_file)
    return keras, f"--keras auto (decided once fetched): {why}"


def source_file(module_file: str, gcs_root: str = "/gcs") -> str | None:
    """The local .py file of `module_file` without fetching or importing anything, or None."""
    if storage.is_gcs_uri(module_file) or storage.is_s3_uri(module_file):
        path = storage.local_path(module_file, gcs_root)
        return path if os.path.isfile(path) else None
    if module_file.endswith(".py") or os.sep in module_file:
        return os.path.abspath(module_file) if os.path.isfile(module_file) else None
    for root in [os.getcwd(), *sys.path]:
        path = _module_path(root or os.getcwd(), module_file)
        if path:
            return path
    return None


def tfx_import(path: str) -> tuple[list[str], str, int] | None:
    """(files from the module to the one that imports it, the TFX package, its line) for the first
    `tfx`,
    `tensorflow_transform` or `tfx_bsl` import of the module at `path` or of a file of its tree
    it imports."""
    roots = [os.path.dirname(path)]
    queue: list[list[str]] = [[path]]
    seen = {path}
    while queue and len(seen) <= _MAX_FILES:
        chain = queue.pop(0)
        for name, line, local in _imports(chain[-1], roots, main=len(chain) == 1):
            if name.split(".")[0] in TFX_PACKAGES:
                return chain, name.split(".")[0], line
            if local and local not in seen:
                seen.add(local)
                queue.append([*chain, local])
    return None


def _imports(path: str, roots: list[str], main: bool) -> Iterator[tuple[str, int, str | None]]:
    """(module name, line, its file in the module's own tree or None) of each import in the file at
    `path`."""
    try:
        tree = module_source.parse(path, compile_it=False)
    except UserInputError:
        if main:
            raise  # the module itself: exit 2 now, as its loader would say
        return  # a file beside it: importing it reports what is wrong, where it is imported
    here = os.path.dirname(path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, _local(alias.name, [here, *roots])
        elif isinstance(node, ast.ImportFrom):
            base = here
            for _ in range(max(node.level - 1, 0)):
                base = os.path.dirname(base)
            module = node.module or ""
            dirs = [base] if node.level else [here, *roots]
            if module:
                yield module, node.lineno, _local(module, dirs)
            for alias in node.names:  # `from pkg import submodule`
                name = f"{module}.{alias.name}" if module else alias.name
                local = _local(name, dirs)
                if local:
                    yield name, node.lineno, local


def _local(name: str, dirs: list[str]) -> str | None:
    for root in dirs:
        path = _module_path(root, name)
        if path:
            return path
    return None


def _module_path(root: str, name: str) -> str | None:
    base = os.path.join(root, *name.split("."))
    for candidate in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(candidate):
            return candidate
    return None
