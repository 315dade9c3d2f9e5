"""fit/user_code: the one boundary every call into user code goes through, and how each way user
code ends
maps to an exit code (no TensorFlow: the mapping itself; the CLI runs are in test_hostile.py)."""

from __future__ import annotations

import sys

import pytest
from generic_trainer.artifacts import run_record
from generic_trainer.errors import EXIT_USER_CODE, Preempted, UserCodeError, UserInputError
from generic_trainer.fit import user_code


class BadStr(Exception):
    def __str__(self):
        raise ValueError("no message for you")


class NotAnException(BaseException):
    pass


def _raises(exc: BaseException):
    def user_fn(*args, **kwargs):
        raise exc

    return user_fn


def test_a_return_value_passes_through_with_its_arguments():
    assert user_code.call(lambda a, b=0: a + b, 2, b=3, what="run_fn") == 5


@pytest.mark.parametrize(
    "code, asked", [(0, "sys.exit(0)"), (None, "sys.exit()"), ("bye", "sys.exit('bye')")]
)
def test_sys_exit_is_a_user_code_failure_naming_the_code(code, asked):
    with pytest.raises(UserCodeError) as raised:
        user_code.call(lambda: sys.exit(code), what="tuner_fn")
    assert raised.value.exit_code == EXIT_USER_CODE
    assert str(raised.value).startswith(f"tuner_fn called {asked} at {__file__} line ")


def test_an_exception_is_a_user_code_failure_with_its_type_message_and_traceback():
    with pytest.raises(UserCodeError) as raised:
        user_code.call(_raises(KeyError("species")), what="preprocessing_fn")
    message = str(raised.value)
    assert message.splitlines()[0] == "preprocessing_fn raised KeyError: 'species'"
    assert "Traceback (most recent call last)" in message and "in user_fn" in message


def test_an_exception_whose_str_raises_is_named_by_its_type():
    with pytest.raises(UserCodeError) as raised:
        user_code.call(
            _raises(BadStr()), what="run_fn", hint=lambda e: f" ({e})"
        )  # the hint fails too
    first = str(raised.value).splitlines()[0]
    assert first == "run_fn raised BadStr: <its message could not be read: str() raised ValueError>"
    assert raised.value.exit_code == EXIT_USER_CODE


def test_a_base_exception_that_is_not_an_exception_is_a_user_code_failure():
    with pytest.raises(UserCodeError) as raised:
        user_code.call(_raises(NotAnException("stop everything")), what="run_fn")
    assert str(raised.value).startswith(
        "run_fn raised NotAnException: stop everything (a BaseException that is not an Exception"
    )


def test_runtime_errors_and_keyboard_interrupt_pass_through_unchanged():
    preempted = Preempted("preempted: SIGTERM")
    with pytest.raises(Preempted) as raised:
        user_code.call(_raises(preempted), what="run_fn")
    assert raised.value is preempted
    with pytest.raises(KeyboardInterrupt):
        user_code.call(_raises(KeyboardInterrupt()), what="run_fn")


def test_translate_and_the_message_head_are_the_callers():
    bad = UserInputError("--examples", "record 3 is not a tf.Example")
    with pytest.raises(UserInputError) as raised:
        user_code.call(_raises(ValueError("x")), what="run_fn", translate=lambda e: bad)
    assert raised.value is bad
    with pytest.raises(UserCodeError, match=r"^the search failed: ValueError: x\n"):
        user_code.call(
            _raises(ValueError("x")),
            what="the search",
            failed="the search failed",
            translate=lambda e: None,
        )


def test_guard_maps_endings_and_leaves_exceptions_to_the_region():
    with pytest.raises(UserCodeError, match=r"^the Task t.py:T called sys.exit\(5\)"):
        with user_code.guard("the Task t.py:T"):
            sys.exit(5)
    with pytest.raises(ValueError):
        with user_code.guard("the Task t.py:T"):
            raise ValueError("handled by the region")


def test_the_run_record_says_which_user_code_was_running(tmp_path, monkeypatch):
    path = tmp_path / "record.jsonl"
    monkeypatch.setenv(run_record.RECORD_ENV, str(path))
    assert run_record.claim() == str(path) and run_record.RECORD_ENV not in __import__("os").environ
    try:
        user_code.call(lambda: None, what="module m.py")
        seen = []

        def run_fn():  # what the supervisor reads back if the process died right here
            seen.append(run_record.RunRecord.read(str(path)))

        user_code.call(run_fn, what="run_fn")
    finally:
        run_record.claim({})
    during, after = seen[0], run_record.RunRecord.read(str(path))
    assert during.calling == ["run_fn"] and during.end is None
    assert after.calling == [] and after.last_called == "run_fn"
