"""The runtime's equivalents of the TFX APIs that module files use (`tfx.v1` and a few others).

`from generic_trainer import tfx` gives the `tfx.v1` surface: `tfx.components.FnArgs`,
`tfx.components.TunerFnResult`, `tfx.components.DataAccessor`, `tfx.utils.parse_pbtxt_file` /
`write_pbtxt_file` and `tfx.dsl.io.fileio`. Module files need not change their imports at all:
when TFX itself is not installed, `tfx_imports` resolves `from tfx import v1 as tfx`,
`tfx.components.trainer.fn_args_utils`, `tfx.utils.io_utils`, ... to what is defined here.
Nothing heavy is imported until used.
"""

from __future__ import annotations

import enum
import os
import types
from typing import Any

from generic_trainer.fit.fn_args import FnArgs, TunerFnResult


class StatsType(enum.Enum):
    """TFX's `stats_options_util.StatsType`, the first argument of `stats_options_updater_fn`."""

    UNKNOWN = 0
    PRE_TRANSFORM = 1
    POST_TRANSFORM = 2


def _data_accessor_class() -> Any:
    from generic_trainer.data import DataAccessor

    return DataAccessor


def parse_pbtxt_file(path: str, message: Any) -> Any:
    """Parse the text proto at `path` into `message` and return it (tfx.utils.parse_pbtxt_file)."""
    from google.protobuf import text_format

    return text_format.Parse(read_string_file(path), message)


def write_pbtxt_file(path: str, message: Any) -> None:
    """Write `message` as a text proto at `path` (tfx.utils.write_pbtxt_file)."""
    from google.protobuf import text_format

    write_string_file(path, text_format.MessageToString(message))


def read_string_file(path: str) -> str:
    """The text of the file at `path` (tfx.utils.io_utils.read_string_file)."""
    import tensorflow as tf

    with tf.io.gfile.GFile(path, "r") as f:
        return f.read()


def write_string_file(path: str, content: str) -> None:
    """Write `content` to `path`, creating its directory (tfx.utils.io_utils.write_string_file)."""
    import tensorflow as tf

    tf.io.gfile.makedirs(os.path.dirname(path) or ".")
    with tf.io.gfile.GFile(path, "w") as f:
        f.write(content)


def copy_file(src: str, dst: str, overwrite: bool = False) -> None:
    """Copy one file, creating the destination's directory (tfx.utils.io_utils.copy_file)."""
    import tensorflow as tf

    tf.io.gfile.makedirs(os.path.dirname(dst) or ".")
    tf.io.gfile.copy(src, dst, overwrite=overwrite)


def copy_dir(src: str, dst: str) -> None:
    """Copy a directory tree into `dst`, replacing it (tfx.utils.io_utils.copy_dir)."""
    import tensorflow as tf

    if tf.io.gfile.exists(dst):
        tf.io.gfile.rmtree(dst)
    for dirpath, _, filenames in tf.io.gfile.walk(src):
        target = os.path.join(dst, os.path.relpath(dirpath, src))
        tf.io.gfile.makedirs(target)
        for name in filenames:
            tf.io.gfile.copy(
                os.path.join(dirpath, name), os.path.join(target, name), overwrite=True
            )


def get_only_uri_in_dir(dir_path: str) -> str:
    """The path of the single file in `dir_path` (tfx.utils.io_utils.get_only_uri_in_dir)."""
    import tensorflow as tf

    files = tf.io.gfile.listdir(dir_path)
    if len(files) != 1:
        raise RuntimeError(f"only one file per dir is supported: {dir_path} holds {sorted(files)}")
    return os.path.join(dir_path, files[0].rstrip("/"))


def all_files_pattern(file_pattern: str) -> str:
    """The glob of every file under `file_pattern` (tfx.utils.io_utils.all_files_pattern)."""
    return os.path.join(file_pattern, "*")


class _FileIO(types.ModuleType):
    """`tfx.dsl.io.fileio`: TFX's filesystem calls, answered by `tf.io.gfile` (local paths and
    gs://)."""

    _GFILE_NAMES = {
        "open": "GFile",
        "copy": "copy",
        "exists": "exists",
        "glob": "glob",
        "isdir": "isdir",
        "listdir": "listdir",
        "makedirs": "makedirs",
        "mkdir": "mkdir",
        "remove": "remove",
        "rename": "rename",
        "rmtree": "rmtree",
        "stat": "stat",
        "walk": "walk",
    }

    def __getattr__(self, name: str) -> Any:
        if name not in self._GFILE_NAMES:
            raise AttributeError(
                f"tfx.dsl.io.fileio has no {name!r} here; supported: {', '.join(self._GFILE_NAMES)}"
            )
        import tensorflow as tf

        return getattr(tf.io.gfile, self._GFILE_NAMES[name])

    def __dir__(self) -> list[str]:
        return sorted(self._GFILE_NAMES)


fileio = _FileIO("fileio", _FileIO.__doc__)
FILEIO_NAMES = tuple(_FileIO._GFILE_NAMES)
IO_UTILS_NAMES = (
    "parse_pbtxt_file",
    "write_pbtxt_file",
    "read_string_file",
    "write_string_file",
    "copy_file",
    "copy_dir",
    "get_only_uri_in_dir",
    "all_files_pattern",
)


class _Components(types.SimpleNamespace):
    @property
    def DataAccessor(self) -> Any:  # noqa: N802 - TFX's name
        return _data_accessor_class()


components = _Components(FnArgs=FnArgs, TunerFnResult=TunerFnResult)
utils = types.SimpleNamespace(parse_pbtxt_file=parse_pbtxt_file, write_pbtxt_file=write_pbtxt_file)
dsl = types.SimpleNamespace(io=types.SimpleNamespace(fileio=fileio))

__all__ = ["components", "utils", "dsl", "parse_pbtxt_file", "write_pbtxt_file", "fileio"]
