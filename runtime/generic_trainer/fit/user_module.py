"""Loads the user's module (local file, gs://, s3:// or minio:// URI, or dotted name) and finds its
functions.

A `--module-sha256` pin is checked on the file's bytes before anything of it runs. The
module's directory goes on `sys.path` so it can import files next to it (for gs://, s3:// and
minio:// modules the sibling `.py` files are downloaded beside it; s3:// and minio:// are read from
KFP's /s3 and /minio mounts when the file is there). Before the module runs, its `tfx` imports are
made to resolve to the runtime's equivalents when TFX is not installed (`tfx_hook`). Every verb and
script that runs a user module goes through `load_user_module` (or `checked_source`, then
`import_module`).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from types import ModuleType

from generic_trainer import tfx_hook
from generic_trainer.artifacts import downloads, files, storage
from generic_trainer.artifacts.storage_settings import DEFAULT_SETTINGS, StorageSettings
from generic_trainer.errors import UserCodeError, UserInputError
from generic_trainer.fit import module_source, user_code

INPUT = "--module-file"


def _looks_like_path(spec: str) -> bool:
    return spec.endswith(".py") or os.sep in spec or spec.startswith(".")


def fetch(spec: str, download_dir: str, settings: StorageSettings = DEFAULT_SETTINGS) -> str | None:
    """The local file behind `spec` (downloading a gs://, s3:// or minio:// one with `settings`, the
    request's),
    or None for a dotted module name."""
    if "://" in spec and not spec.endswith(".py"):
        raise UserInputError(
            INPUT,
            f"{spec} does not end in .py; expected a .py file (Python imports a module "
            "file by its .py name)",
        )
    if storage.is_gcs_uri(spec):
        try:
            return downloads.download_gcs(
                spec, download_dir, siblings_suffix=".py", settings=settings
            )
        except FileNotFoundError:
            raise UserInputError(INPUT, f"{spec} not found in Cloud Storage") from None
        except Exception as e:  # credentials, network: name the input, keep the cause short.
            raise UserInputError(
                INPUT, f"could not download {spec}: {type(e).__name__}: {e}"
            ) from None
    if storage.is_s3_uri(spec):
        return _fetch_s3(spec, download_dir, settings)
    if not _looks_like_path(spec):
        return None
    if not os.path.exists(spec):
        raise UserInputError(
            INPUT, f"{spec} does not exist (expected a .py file, a gs:// URI or a module name)"
        )
    if os.path.isdir(spec):
        raise UserInputError(INPUT, f"{spec} is a directory; expected a .py file")
    if not os.access(spec, os.R_OK):
        raise UserInputError(INPUT, f"{spec} is not readable")
    kind = files.special_kind(spec)
    if kind:
        raise UserInputError(INPUT, f"{spec} is a {kind}; expected a .py file")
    if not spec.endswith(".py"):
        raise UserInputError(
            INPUT,
            f"{spec} does not end in .py; Python imports a module file by its .py name "
            "(rename it, or give a module name on the Python path)",
        )
    return os.path.abspath(spec)


def _fetch_s3(spec: str, download_dir: str, settings: StorageSettings) -> str:
    """An s3:// or minio:// module: the file where KFP mounts it (/s3, /minio) if it is there, else
    downloaded."""
    mounted = storage.local_path(spec)
    if os.path.isfile(mounted):
        return mounted
    store = "MinIO" if spec.startswith("minio://") else "S3"
    try:
        return downloads.download_s3(spec, download_dir, siblings_suffix=".py", settings=settings)
    except ImportError:
        raise UserInputError(
            INPUT,
            f"{spec} is not mounted at {mounted}, and boto3 (not in the image) is not "
            "installed to download it: mount the bucket there, or install "
            "'generic-trainer[s3]' (boto3)",
        ) from None
    except FileNotFoundError:
        raise UserInputError(INPUT, f"{spec} not found in {store}") from None
    except Exception as e:  # credentials, endpoint, network: name the input, keep the cause short.
        raise UserInputError(
            INPUT, f"could not download {spec} from {store}: {type(e).__name__}: {e}"
        ) from None


def check_sha256(path: str | None, expected: str | None) -> None:
    """UserInputError unless the module file's sha256 is `expected` (None: unpinned)."""
    if not expected:
        return
    if path is None:
        raise UserInputError(
            "--module-sha256", "a hash pin needs a module file (path or gs:// URI)"
        )
    try:
        actual = hashlib.sha256(files.read_bounded(path)).hexdigest()
    except files.UnreadableFile as e:
        raise UserInputError(INPUT, str(e)) from None
    if actual != expected.lower():
        raise UserInputError(
            "--module-sha256",
            f"module file hash {actual} differs from the pinned {expected}; refusing to run it",
        )


def check_syntax(path: str | None) -> None:
    """Compile the module file without running it (`module_source.parse`: size, NUL bytes, its PEP
    263
    encoding, nesting bounded): errors surface as exit 2 before TensorFlow loads."""
    if path is not None:
        module_source.parse(path, INPUT)


def import_module(path: str | None, spec: str) -> ModuleType:
    """Import the module at `path` (or the dotted name `spec` when `path` is None).

    The module's folder goes first on `sys.path` (it may import files beside it), and its `tfx`
    imports resolve to the runtime's equivalents when TFX itself is not installed, including `tfx`
    paths to files beside it or in its tree (`tfx_hook.module_file`).
    """
    tfx_hook.install()
    if path is None:
        try:
            return user_code.call(
                importlib.import_module,
                spec,
                what=f"module {spec}",
                failed=f"importing module {spec} failed",
            )
        except UserCodeError as e:
            missing = e.__cause__
            if (
                isinstance(missing, ModuleNotFoundError)
                and missing.name
                and spec.startswith(missing.name)
            ):
                raise UserInputError(
                    INPUT,
                    f"no module named {spec!r} (not a file path, gs:// URI or installed module)",
                ) from None
            raise
    directory = os.path.dirname(path)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    tfx_hook.add_module_dir(
        directory
    )  # `from tfx.examples.x import sibling` loads the file beside it
    name = os.path.splitext(os.path.basename(path))[0]
    module_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module  # so pickling / Keras serialization can find the module's classes
    try:
        user_code.call(
            module_spec.loader.exec_module,
            module,
            what=f"module {path}",
            failed=f"importing module {path} failed",
        )
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def get_function(module: ModuleType, name: str, input_name: str) -> Callable:
    """The callable `name` of `module`, or an error listing what the module does define."""
    fn = getattr(module, name, None)
    if callable(fn):
        return fn
    defined = sorted(
        k
        for k, v in vars(module).items()
        if callable(v)
        and not k.startswith("_")
        and getattr(v, "__module__", None) == module.__name__
    )
    raise UserInputError(
        input_name,
        f"module {getattr(module, '__file__', module.__name__)} has no function {name!r}"
        + (f"; it defines {', '.join(defined)}" if defined else ""),
    )


def checked_source(
    spec: str,
    download_dir: str,
    sha256: str | None = None,
    settings: StorageSettings = DEFAULT_SETTINGS,
) -> str | None:
    """The user's module fetched and checked, not yet imported: the first three steps of
    `load_user_module`, for a verb that imports it later (train and tune once TensorFlow loads,
    evaluate in its sandbox).

    Args:
        spec: a .py path, a gs://, s3:// or minio:// URI, or a dotted module name.
        download_dir: where a remote module (and the .py files beside it) is downloaded.
        sha256: the --module-sha256 pin, checked on the file's bytes; None: unpinned.
        settings: the request's storage settings (the download's).

    Returns:
        The local .py file, or None for a dotted name.

    Raises:
        UserInputError: the module is missing, does not match its pin, or does not compile.
    """
    path = fetch(spec, download_dir, settings)
    check_sha256(path, sha256)
    check_syntax(path)
    return path


def load_user_module(
    spec: str,
    download_dir: str,
    sha256: str | None = None,
    settings: StorageSettings = DEFAULT_SETTINGS,
) -> ModuleType:
    """The one way a user's module is loaded: fetched, its sha256 pin and syntax checked
    (`checked_source`), then imported (`import_module`).

    Args:
        spec, download_dir, sha256, settings: as `checked_source`'s.

    Returns:
        The imported module.

    Raises:
        UserInputError: as `checked_source`; UserCodeError: importing it raised.
    """
    return import_module(checked_source(spec, download_dir, sha256, settings), spec)


def pickle_by_value(module: ModuleType) -> list[str]:
    """Have Beam pickle `module`, and the files beside it it imported (TFX's helper files loaded
    under their `tfx` names by the import hook), by value: Beam's multi_processing workers
    unpickling its functions then need neither its folder on their path nor the `tfx` hook.

    Args:
      module: the user module (imported by `import_module`).

    Returns:
      The names of the modules registered.
    """
    from apache_beam.internal.cloudpickle import cloudpickle

    folder = os.path.dirname(os.path.abspath(getattr(module, "__file__", "") or ""))
    names = [module.__name__]
    for name, other in list(sys.modules.items()):
        file = getattr(other, "__file__", None)
        if other is not module and file and os.path.dirname(os.path.abspath(file)) == folder:
            names.append(name)
    for name in names:
        cloudpickle.register_pickle_by_value(sys.modules[name])
    return names
