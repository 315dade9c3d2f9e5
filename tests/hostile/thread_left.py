"""Hostile: run_fn writes a good model, then leaves a non-daemon thread running that never ends."""

import threading
import time

import tiny_serving


def _sleep_forever():
    while True:
        time.sleep(3600)


def run_fn(fn_args):
    tiny_serving.save(fn_args.serving_model_dir)
    threading.Thread(
        target=_sleep_forever, name="hostile-sleeper"
    ).start()  # not a daemon: blocks a normal exit
