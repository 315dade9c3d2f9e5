"""Hostile sandbox children without TensorFlow (fast): run as
`python -m generic_trainer.judge.sandbox hostile_children:FUNCTION SPEC RESULT` with this
directory on PYTHONPATH."""

from __future__ import annotations

import time

from generic_trainer.judge import sandbox


def grow_memory(spec: dict) -> dict:
    """Allocates 16 MiB blocks until the address-space limit stops it (a MemoryError)."""
    held = []
    while True:
        held.append(bytearray(16 * 1024 * 1024))
        sandbox.progress(f"holding {len(held) * 16} MiB")


def hang_after_progress(spec: dict) -> dict:
    """Reports progress `spec["steps"]` times, `spec["every"]` s apart, then hangs without a
    word."""
    for i in range(spec["steps"]):
        sandbox.progress(f"step {i + 1}")
        time.sleep(spec["every"])
    while True:
        time.sleep(3600)


def answer(spec: dict) -> dict:
    return {"echo": spec}
