"""GPU utilisation sampled through NVML (nvidia-ml-py), for bench/gpu.py and bench/wide_mlp.py.

`NvmlSampler` samples every GPU's utilisation every `period` seconds while in its block, each
sample with its time (`time.perf_counter()`), so that a run's figures can be taken over its
training alone: a child process spends most of a short run importing TensorFlow and exporting,
when the GPU idles, and the mean over the whole process says little about the input pipeline.
"""

from __future__ import annotations

import statistics
import threading
import time

BUSY = 80.0  # utilisation (%) counted as "not input-bound"


class NvmlSampler:
    """GPU utilisation of every GPU (the highest of them), sampled through NVML every `period`
    seconds while in the block; no samples where NVML is missing or fails."""

    def __init__(self, period: float = 0.1, quiet: bool = False):
        self.period, self.quiet = period, quiet
        self.samples: list[tuple[float, float]] = []  # (time.perf_counter(), utilisation %)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> NvmlSampler:
        try:
            import pynvml  # nvidia-ml-py: imported here only (not in the lock)

            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
            handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except ImportError:
            self._say("GPU utilisation not sampled: no NVML (pip install nvidia-ml-py)")
            return self
        except Exception as e:  # noqa: BLE001 - pynvml.NVMLError (no driver, ...): no samples
            self._say(f"GPU utilisation not sampled: NVML failed ({e})")
            return self

        def sample() -> None:
            while not self._stop.wait(self.period):
                rates = [pynvml.nvmlDeviceGetUtilizationRates(h).gpu for h in handles]
                self.samples.append((time.perf_counter(), max(rates, default=0)))

        self._thread = threading.Thread(target=sample, name="nvml", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _say(self, text: str) -> None:
        if not self.quiet:
            print(f"  {text}", flush=True)

    def summary(self, window: tuple[float, float] | None = None) -> dict:
        """The samples' figures, over `window` (perf_counter times, both ends included) if given.

        Returns:
          gpu_util_mean: mean utilisation (%) over the window; gpu_busy_share: the share of its
          samples at or above BUSY; samples: how many; gpu_util_process: the mean over every
          sample of the block (NaN where there are none).
        """
        every = [u for _, u in self.samples]
        inside = [u for t, u in self.samples if window is None or window[0] <= t <= window[1]]
        nan = float("nan")
        return {
            "gpu_util_mean": statistics.mean(inside) if inside else nan,
            "gpu_busy_share": sum(u >= BUSY for u in inside) / len(inside) if inside else nan,
            "samples": len(inside),
            "gpu_util_process": statistics.mean(every) if every else nan,
        }


def devices() -> list[str]:
    """Each GPU's name, memory and the driver, as NVML reports them ([] without NVML)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        driver = pynvml.nvmlSystemGetDriverVersion()
        count = pynvml.nvmlDeviceGetCount()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        return [
            f"{pynvml.nvmlDeviceGetName(h)} ({pynvml.nvmlDeviceGetMemoryInfo(h).total / 2**30:.0f}"
            f" GiB, driver {driver})"
            for h in handles
        ]
    except Exception:  # noqa: BLE001 - no nvidia-ml-py, no driver: nothing to name
        return []
