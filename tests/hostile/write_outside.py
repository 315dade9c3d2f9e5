"""Hostile: run_fn writes a model outside its dirs, at serving_model_dir/../../Format-Serving (the
published
model's place when the staging dir sits inside the model dir), and none where it should."""

import os

import tiny_serving


def run_fn(fn_args):
    outside = os.path.normpath(
        os.path.join(fn_args.serving_model_dir, "..", "..", "Format-Serving")
    )
    tiny_serving.save(outside, marker="written outside fn_args.serving_model_dir")
