"""Wide-MLP benchmark: does the data accessor keep an accelerator fed? (issue 26)

A GPU-sized model (4 x Dense(2048) on 100 float features, batch 2048) trained with `model.fit` on
generated gzip tf.Examples, fed three ways:
  accessor  generic_trainer.data.DataAccessor().tf_dataset_factory (shuffle 10000, repeat, batch,
  parse) raw       a hand-written tf.data pipeline doing the same work (TFRecordDataset -> shuffle
  -> repeat ->
            batch -> parse_example -> prefetch)
  input     the accessor's batches alone, no model: how fast the input side can go
Prints examples/s (after the first, compiling epoch) and, where NVML or `nvidia-smi` answers, the
mean GPU utilisation while training. On a CPU host use a smaller model (--width 256) and fewer
examples.

  .venv/bin/python bench/wide_mlp.py                                   # GPU host: the issue's case
  .venv/bin/python bench/wide_mlp.py --examples 50000 --width 256 --batch-size 512 --steps 40   #
  CPU
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import input_pipeline as ip  # noqa: E402  (beside this file)
from nvml import NvmlSampler  # noqa: E402

FEATURES = 100


def table() -> list[tuple[str, str, bool]]:
    return [(f"f{i:03d}", "FLOAT", True) for i in range(FEATURES)] + [(ip.LABEL, "INT", True)]


class GpuSampler:
    """Mean GPU utilisation while running: NVML every 100 ms (bench/nvml.py, nvidia-ml-py), else
    `utilization.gpu` from nvidia-smi every second; None with neither."""

    def __init__(self):
        self.nvml, self.exe = NvmlSampler(quiet=True), shutil.which("nvidia-smi")
        self.samples, self._stop = [], threading.Event()

    def __enter__(self):
        self.nvml.__enter__()
        if self.nvml._thread is None and self.exe:
            threading.Thread(target=self._run, daemon=True).start()
        return self

    def _run(self):
        while not self._stop.wait(1.0):
            out = subprocess.run(
                [self.exe, "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
            ).stdout.split()
            if out:
                self.samples.append(float(out[0]))

    def __exit__(self, *exc):
        self._stop.set()
        self.nvml.__exit__(*exc)

    def mean(self) -> float | None:
        samples = [u for _, u in self.nvml.samples] or self.samples
        return statistics.mean(samples) if samples else None


def datasets(path: str, batch_size: int):
    import tensorflow as tf
    from generic_trainer.data import DataAccessor, DatasetOptions, load_schema

    pattern = os.path.join(path, "Split-train", "*")
    files = sorted(tf.io.gfile.glob(pattern))
    spec = ip.hand_spec(table())

    def parse(serialized):
        features = tf.io.parse_example(serialized, spec)
        return features, features.pop(ip.LABEL)

    def accessor():
        options = DatasetOptions(batch_size=batch_size, label_key=ip.LABEL)
        return DataAccessor().tf_dataset_factory([pattern], options, load_schema(path))

    def raw():
        ds = (
            tf.data.TFRecordDataset(files, "GZIP")
            .shuffle(10_000)
            .repeat()
            .batch(batch_size, drop_remainder=True)
        )
        return ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)

    return {"accessor": accessor, "raw": raw}


def model(width: int):
    import keras

    inputs = {f"f{i:03d}": keras.Input(shape=(1,), name=f"f{i:03d}") for i in range(FEATURES)}
    x = keras.layers.Normalization()(keras.layers.Concatenate()(list(inputs.values())))
    for _ in range(4):
        x = keras.layers.Dense(width, activation="relu")(x)
    m = keras.Model(inputs, keras.layers.Dense(3)(x))
    m.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return m


def train(make, width: int, steps: int, batch_size: int) -> tuple[float, float | None]:
    """Examples/s of the second and later epochs of `steps` steps each (the first compiles), GPU
    utilisation."""
    m = model(width)
    ds = make()
    m.fit(ds, steps_per_epoch=steps, epochs=1, verbose=0)
    with GpuSampler() as gpu:
        start = time.perf_counter()
        m.fit(ds, steps_per_epoch=steps, epochs=2, verbose=0)
        seconds = time.perf_counter() - start
    return 2 * steps * batch_size / seconds, gpu.mean()


def input_only(make, steps: int, batch_size: int) -> float:
    it = iter(make())
    next(it)
    start = time.perf_counter()
    for _ in range(2 * steps):
        next(it)
    return 2 * steps * batch_size / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--examples", type=int, default=500_000)
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=2048)
    parser.add_argument("--steps", type=int, default=100, help="steps per timed epoch")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    path = os.path.join(ip.WORK, f"wide-mlp-{args.examples}")
    if not os.path.exists(os.path.join(path, "DONE")):
        print(f"generating {args.examples} examples into {path} ...", flush=True)
        ip.generate(path, table(), args.examples)
    import tensorflow as tf

    makers = datasets(path, args.batch_size)
    results: dict[str, list] = {"accessor": [], "raw": [], "input": []}
    for rep in range(args.repeats):
        for name in ("accessor", "raw") if rep % 2 == 0 else ("raw", "accessor"):
            rate, util = train(makers[name], args.width, args.steps, args.batch_size)
            results[name].append((rate, util))
            print(
                f"  rep {rep + 1} {name:8s} {rate:10,.0f} examples/s"
                + (f", GPU {util:.0f}%" if util is not None else ""),
                flush=True,
            )
        results["input"].append((input_only(makers["accessor"], args.steps, args.batch_size), None))
        print(
            f"  rep {rep + 1} input    {results['input'][-1][0]:10,.0f} examples/s"
            " (accessor alone)",
            flush=True,
        )
    gpus = [d.name for d in tf.config.list_physical_devices("GPU")]
    print(
        f"\nwide MLP: {FEATURES} float features, 4 x Dense({args.width}), batch {args.batch_size}, "
        f"{args.examples} examples; devices: {gpus or 'CPU only'}"
    )
    for name, values in results.items():
        rate = statistics.median(v[0] for v in values)
        utils = [v[1] for v in values if v[1] is not None]
        print(
            f"| {name} | {rate:,.0f} |" + (f" {statistics.mean(utils):.0f}% |" if utils else " - |")
        )


if __name__ == "__main__":
    main()
