"""Hostile: run_fn changes the working directory before it exports, and returns metrics JSON cannot
carry
(NaN, infinity), a name that would forge a log line, and a value that is not a number."""

import os
import tempfile

import tiny_serving


def run_fn(fn_args):
    os.chdir(tempfile.mkdtemp(prefix="hostile-cwd-"))
    tiny_serving.save(fn_args.serving_model_dir)
    return {
        "loss": float("nan"),
        "auc": float("inf"),
        "acc\nERROR forged: line\x00": 0.5,
        "notes": "text",
        "fine": 1.0,
    }
