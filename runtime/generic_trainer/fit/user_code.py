"""The one boundary between the runtime and user code: every call into a user's module goes through
here.

`call(fn, *args, what=...)` runs one piece of user code (run_fn, tuner_fn, the search it set up,
preprocessing_fn, a Task's methods, the module's import) and maps every way it can end, once:

- it returns: the value is returned;
- it raises a runtime error (`TrainerError`: a `Preempted` from the SIGTERM handler, ...):
unchanged;
- it calls `sys.exit()` / `exit()`: UserCodeError (exit 3) naming the code it asked for and the
line;
- TensorFlow's DataLossError while reading examples: UserInputError naming the examples input (exit
2);
- a lost peer (Unavailable, DeadlineExceeded, Aborted, Cancelled) where the run has peers:
ClusterError (5);
- any other exception, or a BaseException subclass that is not an Exception: UserCodeError (exit 3)
  with its type, message and traceback (an exception whose `__str__` raises is named by its type);
- KeyboardInterrupt: unchanged (the CLI ends with 130, as for Ctrl-C).

What cannot be caught in the process (`os._exit`, a signal, a crash, children left running) is the
supervisor's (generic_trainer.supervisor): `call` notes in the run record which user code runs, so
the supervisor can name it. `guard(what)` maps the ending ways (sys.exit, foreign BaseExceptions)
over a region where user code and the runtime's own code interleave (a Task's methods).
"""

from __future__ import annotations

import contextlib
import sys
import traceback
from collections.abc import Callable, Iterator
from typing import Any

from generic_trainer.artifacts import run_record
from generic_trainer.errors import ClusterError, TrainerError, UserCodeError, UserInputError

# TensorFlow's errors that mean a peer replica stopped or cannot be reached.
LOST_PEER_ERRORS = ("UnavailableError", "DeadlineExceededError", "AbortedError", "CancelledError")
Translate = Callable[[Exception], "TrainerError | None"]


def describe(exc: BaseException) -> str:
    """`Type: message`, even when the exception's `__str__` raises or returns no string."""
    try:
        text = str(exc)
    except BaseException as e:  # noqa: BLE001 - user code's __str__ may raise anything
        text = f"<its message could not be read: str() raised {type(e).__name__}>"
    return f"{type(exc).__name__}: {text}"


def format_traceback(exc: BaseException) -> str:
    """The full traceback of an exception user code raised, as printed (for UserCodeError
    messages)."""
    try:
        return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    except Exception as e:  # a traceback that cannot be formatted must not hide the error itself
        return f"(the traceback could not be formatted: {type(e).__name__})"


def exit_error(exc: SystemExit, what: str) -> UserCodeError:
    """User code that called `sys.exit()` / `exit()`, as a UserCodeError (exit 3) naming the code it
    asked for.

    `what` names the code that ran (`run_fn`, `tuner_fn`, `module m.py`). The process must not end
    with the code the module chose: 0 would claim a success without a model, any other code would be
    unexplained.
    """
    try:
        asked = "sys.exit()" if exc.code is None else f"sys.exit({exc.code!r})"
    except Exception:  # a code whose repr raises
        asked = f"sys.exit(<a {type(exc.code).__name__}>)"
    frames = [
        f for f in traceback.extract_tb(exc.__traceback__) if "_sitebuiltins" not in f.filename
    ]
    where = f" at {frames[-1].filename} line {frames[-1].lineno}" if frames else ""
    return UserCodeError(
        f"{what} called {asked}{where} before the run finished (no model or outputs were "
        "published); user code must return or raise, not end the process, so the run ends with "
        "exit code 3 (user code)"
    )


def _tf_error(exc: BaseException, names: tuple[str, ...]) -> bool:
    """Whether `exc` is one of TensorFlow's errors `names` (without importing TensorFlow)."""
    if "tensorflow" not in sys.modules:
        return False
    import tensorflow as tf

    return isinstance(exc, tuple(getattr(tf.errors, n) for n in names))


def error_for(
    exc: BaseException,
    what: str,
    failed: str | None = None,
    data_input: str | None = None,
    lost_peer: Callable[[Exception], str] | None = None,
    translate: Translate | None = None,
    hint: Callable[[Exception], str] | None = None,
) -> BaseException:
    """The error the run ends with for `exc`, raised by the user code `what` (see `call` for the
    rest)."""
    if isinstance(exc, (TrainerError, KeyboardInterrupt)):
        return exc
    if isinstance(exc, SystemExit):
        return exit_error(exc, what)
    if not isinstance(exc, Exception):
        return UserCodeError(
            f"{failed or what + ' raised'} {describe(exc)} (a BaseException that is not an "
            f"Exception: raise an Exception subclass)\n{format_traceback(exc)}"
        )
    if data_input and _tf_error(exc, ("DataLossError",)):
        return UserInputError(
            data_input, f"corrupt TFRecord data while training: {getattr(exc, 'message', exc)}"
        )
    if lost_peer is not None and _tf_error(exc, LOST_PEER_ERRORS):
        return ClusterError(lost_peer(exc))
    mapped = _safely(translate, exc)
    if mapped is not None:
        return mapped
    head = f"{failed}:" if failed else f"{what} raised"
    return UserCodeError(
        f"{head} {describe(exc)}{_safely(hint, exc) or ''}\n{format_traceback(exc)}"
    )


def _safely(helper: Callable[[Exception], Any] | None, exc: Exception) -> Any:
    """helper(exc), or None when there is none or it fails on this exception (its `__str__` raises,
    ...)."""
    try:
        return helper(exc) if helper is not None else None
    except Exception:
        return None


def call(
    fn: Callable[..., Any],
    *args: Any,
    what: str,
    failed: str | None = None,
    data_input: str | None = None,
    lost_peer: Callable[[Exception], str] | None = None,
    translate: Translate | None = None,
    hint: Callable[[Exception], str] | None = None,
    **kwargs: Any,
) -> Any:
    """`fn(*args, **kwargs)`, user code named `what`, with every way it ends mapped (module
    docstring).

    failed: the head of the message for an exception (default "<what> raised"); data_input: the
    input blamed for corrupt TFRecord data; lost_peer(exc): the message when a peer was lost (None:
    the run has no peers); translate(exc): a mapping tried first (None to fall through); hint(exc):
    appended.
    """
    run_record.enter(what)
    try:
        return fn(*args, **kwargs)
    except BaseException as e:  # noqa: BLE001 - the boundary: every ending is mapped here
        mapped = error_for(e, what, failed, data_input, lost_peer, translate, hint)
        if mapped is e:
            raise
        raise mapped from (None if isinstance(e, SystemExit) else e)
    finally:
        run_record.leave(what)


def call_raw(fn: Callable[..., Any], *args: Any, what: str, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)` noted in the run record as the user code `what`, its exceptions
    unmapped: for code a library calls back (tf.Transform traces preprocessing_fn), whose caller
    keeps what it raised
    and maps it with `error_for` once the library has stopped."""
    run_record.enter(what)
    try:
        return fn(*args, **kwargs)
    finally:
        run_record.leave(what)


@contextlib.contextmanager
def guard(what: str) -> Iterator[None]:
    """Over a region mixing user code with the runtime's: `sys.exit()` and foreign BaseExceptions
    become
    UserCodeError (exit 3) naming `what`; exceptions are left to the region's own handling."""
    try:
        yield
    except Exception:
        raise
    except BaseException as e:  # noqa: BLE001 - SystemExit and BaseException subclasses of user code
        mapped = error_for(e, what)
        if mapped is e:
            raise
        raise mapped from (None if isinstance(e, SystemExit) else e)
