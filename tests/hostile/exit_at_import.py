"""Hostile: ends the process with sys.exit(0) while being imported (before run_fn exists)."""

import sys

sys.exit(0)


def run_fn(fn_args):  # never reached
    raise AssertionError("unreachable")
