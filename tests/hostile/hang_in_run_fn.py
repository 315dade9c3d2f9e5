"""Hostile: run_fn never returns (waits on an event nobody sets). It says so on stderr first."""

import sys
import threading


def run_fn(fn_args):
    print("hostile run_fn: hanging now", file=sys.stderr, flush=True)
    threading.Event().wait()
