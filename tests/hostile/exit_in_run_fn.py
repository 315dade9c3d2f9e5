"""Hostile: run_fn ends the process instead of returning. custom_config {"exit": 0 | 7 | "a
message"}: a number
calls sys.exit(number), a string calls the builtin exit(string)."""

import sys


def run_fn(fn_args):
    code = fn_args.custom_config["exit"]
    if isinstance(code, str):
        exit(code)  # noqa: PLR1722 - the builtin on purpose: what a notebook-trained user writes
    sys.exit(code)
