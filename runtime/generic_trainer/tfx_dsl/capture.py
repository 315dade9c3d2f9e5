"""Running a user's TFX pipeline file and catching the Pipeline it hands to a runner.

`run_pipeline_file(path, args, home)` runs the file as `python FILE ARGS...` would (`__name__`
is `'__main__'`, `sys.argv` is `[FILE, *ARGS]` for absl flags, its folder first on `sys.path`,
`HOME` as given) with the `tfx` import hook installed. In capture mode (the default) every
runner's `.run(pipeline)` hands its pipeline to `take` and runs nothing; the function returns
what was taken. The runner classes (`generic_trainer.tfx_kfp.runners`) call `take(self,
pipeline)` first in `.run()` and return at once when it says True.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
import os
import runpy
import sys
import traceback
from collections.abc import Iterator, Sequence
from typing import Any

from generic_trainer import tfx_hook
from generic_trainer.errors import TrainerError, UserCodeError, UserInputError

_TAKEN: contextvars.ContextVar[list[CapturedRun] | None] = contextvars.ContextVar(
    "tfx_dsl_captured", default=None
)


@dataclasses.dataclass(frozen=True)
class CapturedRun:
    """One `runner.run(pipeline)` call the file made: the runner object and the Pipeline."""

    runner: Any
    pipeline: Any


def take(runner: Any, pipeline: Any) -> bool:
    """Called first by each runner's `.run()`: in capture mode record the call and return True
    (the runner then runs nothing); otherwise False.

    Args:
      runner: the runner object (`LocalDagRunner()`, `KubeflowV2DagRunner(...)`, ...).
      pipeline: the Pipeline handed to `.run()`.

    Returns:
      Whether the call was captured.
    """
    taken = _TAKEN.get()
    if taken is None:
        return False
    taken.append(CapturedRun(runner, pipeline))
    return True


def capturing() -> bool:
    """Whether a `run_pipeline_file` in capture mode is under way."""
    return _TAKEN.get() is not None


@contextlib.contextmanager
def _logging_state() -> Iterator[None]:
    """The root logger's level and handlers (and the `absl` logger's level) restored after the
    file ran: `absl.app.run` adds absl's handler and sets the root level from `--verbosity`,
    and taking its flags away after resets that level to WARNING, hiding the verb's own log."""
    root, absl_logger = logging.getLogger(), logging.getLogger("absl")
    level, handlers, absl_level = root.level, list(root.handlers), absl_logger.level
    try:
        yield
    finally:
        root.handlers[:] = handlers  # the same handlers in the same order (absl's taken away)
        root.setLevel(level)
        absl_logger.setLevel(absl_level)


@contextlib.contextmanager
def _process_state(path: str, args: Sequence[str], home: str | None) -> Iterator[None]:
    """sys.argv, sys.path[0], HOME and absl's flags as `python FILE ARGS` has them; restored
    after (logging too), with the modules the file's folder gave and the flags it defined taken
    away."""
    folder = os.path.dirname(path)
    saved_argv, saved_home = sys.argv, os.environ.get("HOME")
    saved_modules = set(sys.modules)
    flags = _absl_flags()
    was_parsed = flags.is_parsed() if flags is not None else False
    sys.argv = [path, *args]
    sys.path.insert(0, folder)
    if home is not None:
        os.environ["HOME"] = home
    try:
        yield
    finally:
        sys.argv = saved_argv
        with contextlib.suppress(ValueError):
            sys.path.remove(folder)
        if saved_home is None:
            os.environ.pop("HOME", None)
        else:
            os.environ["HOME"] = saved_home
        dropped = _forget_modules(folder, saved_modules)
        _forget_flags(dropped | {path}, was_parsed)


def _absl_flags() -> Any:
    try:
        from absl import flags
    except ImportError:
        return None
    return flags.FLAGS


def _from_folder(name: str, folder: str) -> bool:
    """Whether module `name` was imported through `folder` on sys.path: its top-level module or
    package lies directly in it (libraries in a venv below the folder do not)."""
    top = sys.modules.get(name.partition(".")[0])
    file = os.path.abspath(getattr(top, "__file__", None) or "/")
    place = os.path.dirname(file)
    if os.path.basename(file) == "__init__.py":
        place = os.path.dirname(place)
    return place == folder


def _forget_modules(folder: str, saved: set[str]) -> set[str]:
    """Drop the modules imported from `folder` (a second file's `pipeline` package is its own);
    returns their names."""
    folder = os.path.abspath(folder)
    dropped = {name for name in set(sys.modules) - saved if _from_folder(name, folder)}
    for name in dropped:
        del sys.modules[name]
    return dropped


def _forget_flags(owners: set[str], was_parsed: bool) -> None:
    """Remove the absl flags the file and its folder's modules (`owners`) defined, so running
    the file again defines them again (flags of libraries it imported stay)."""
    flags = _absl_flags()
    if flags is None:
        return
    for owner, defined in flags.flags_by_module_dict().items():
        if owner in owners:
            for flag in list(defined):  # deleting a flag edits this list
                with contextlib.suppress(AttributeError):
                    delattr(flags, flag.name)
    if not was_parsed and flags.is_parsed():
        disabled = logging.root.manager.disable
        logging.disable(logging.INFO)  # absl logs that the flags are unparsed: not news here
        try:
            flags.unparse_flags()
        finally:
            logging.disable(disabled)


def _run_file(path: str) -> None:
    """Run the file as `__main__`; its exceptions become a UserCodeError naming the file (the
    runtime's own errors, a runner's refusal or failed step, keep their message and exit code)."""
    try:
        runpy.run_path(path, run_name="__main__")
    except TrainerError:
        raise
    except SystemExit as stop:
        if stop.code not in (None, 0):
            raise UserCodeError(f"the pipeline file {path} exited with {stop.code}") from None
    except ImportError as error:
        raise UserInputError(path, f"the pipeline file's import failed: {error}") from None
    except UserInputError:
        raise  # a runner or node refused, naming what (a runner that cannot run here)
    except Exception as error:
        text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        raise UserCodeError(f"the pipeline file {path} raised {error!r}:\n{text}") from None


def run_pipeline_file(
    path: str, args: Sequence[str] = (), home: str | None = None, capture: bool = True
) -> list[CapturedRun]:
    """Run a TFX pipeline file with the `tfx` hook installed (see the module doc).

    Args:
      path: the pipeline file (a .py file).
      args: its command-line arguments (absl flags).
      home: HOME while it runs (TFX's examples find their data under it); None keeps HOME.
      capture: True: runners record their pipelines and run nothing; False: they run.

    Returns:
      The runner calls captured, in order (empty when not capturing).

    Raises:
      UserInputError: no such file, an import it needs cannot be given, or (capturing) it
        never handed a pipeline to a runner.
      UserCodeError: the file raised or exited non-zero.
    """
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise UserInputError(path, "no such pipeline file")
    tfx_hook.install()
    tfx_hook.add_module_dir(os.path.dirname(path))
    taken: list[CapturedRun] = []
    token = _TAKEN.set(taken if capture else None)
    try:
        with _logging_state(), _process_state(path, args, home):
            _run_file(path)
    finally:
        _TAKEN.reset(token)
    if capture and not taken:
        raise UserInputError(
            path,
            "the pipeline file ran to its end without handing a Pipeline to a runner "
            "(e.g. LocalDagRunner().run(pipeline) under `if __name__ == '__main__':`)",
        )
    return taken
