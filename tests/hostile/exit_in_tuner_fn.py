"""Hostile: tuner_fn ends the process with sys.exit(7) instead of returning a TunerFnResult."""

import sys


def tuner_fn(fn_args):
    sys.exit(7)
