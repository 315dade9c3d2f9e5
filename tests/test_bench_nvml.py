"""bench/nvml.py and bench/gpu.py's training window: the GPU figures of a run are taken over its
training, not over the imports and export around it (on an H200, 2026-11-27, the whole-process
mean was 2-4 % for runs whose training was a few seconds of a 20 s process)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import gpu  # noqa: E402
import nvml  # noqa: E402


def sampler_with(samples: list[tuple[float, float]]) -> nvml.NvmlSampler:
    sampler = nvml.NvmlSampler(quiet=True)
    sampler.samples = samples
    return sampler


def test_the_figures_are_taken_over_the_window_and_the_whole_process_beside_them():
    # 10 s of start-up at 0 %, 4 s of training at 90 % and 50 %, 2 s of export at 0 %
    samples = [(t / 10, 0.0) for t in range(100)]
    samples += [(10 + t / 10, 90.0 if t % 2 else 50.0) for t in range(40)]
    samples += [(14 + t / 10, 0.0) for t in range(20)]
    figures = sampler_with(samples).summary((10.0, 13.95))
    assert figures["samples"] == 40
    assert figures["gpu_util_mean"] == 70.0
    assert figures["gpu_busy_share"] == 0.5
    assert figures["gpu_util_process"] == (20 * 90 + 20 * 50) / 160


def test_no_window_takes_every_sample_and_no_samples_give_nan():
    assert sampler_with([(1.0, 10.0), (2.0, 30.0)]).summary()["gpu_util_mean"] == 20.0
    empty = sampler_with([]).summary((0.0, 1.0))
    assert empty["samples"] == 0 and math.isnan(empty["gpu_util_mean"])
    assert math.isnan(empty["gpu_busy_share"]) and math.isnan(empty["gpu_util_process"])


def test_the_training_window_runs_from_the_first_step_to_the_last_epoch():
    assert gpu.training_window(100.0, {"first_step": 14.5, "epoch_end": 19.0}) == (114.5, 119.0)
    nan = float("nan")
    assert gpu.training_window(100.0, {"first_step": nan, "epoch_end": 19.0}) is None
    assert gpu.training_window(100.0, {"first_step": 14.5, "epoch_end": nan}) is None
    assert gpu.training_window(100.0, {"first_step": 20.0, "epoch_end": 19.0}) is None


def test_without_nvml_the_sampler_takes_no_samples_and_names_no_gpu(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` raises ImportError
    with nvml.NvmlSampler(period=0.01, quiet=True) as sampler:
        pass
    assert sampler.samples == [] and nvml.devices() == []
