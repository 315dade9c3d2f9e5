"""Where the time to the first training step goes (issue 26, item 6).

Each phase in a fresh process, median of --repeats runs:
  python        the interpreter alone
  cli           `import generic_trainer.cli` (what every verb loads before it knows what to do)
  tensorflow    `import tensorflow`
  devices       `import tensorflow` + `tf.config.list_physical_devices("GPU")` (CUDA and device
  registration) keras         `import tensorflow, keras`
then `generic-trainer train` on a minimal module (one Dense layer, keras only) and on the penguin
example (which imports keras_tuner, tensorflow_transform, tfx_bsl itself), reading the runtime's own
log: "resolved strategy" (TensorFlow and the devices are up), "calling run_fn" (the runtime's checks
done and the user's module imported) and "first training step done (N s after process start)".

  .venv/bin/python bench/startup.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PENGUIN = os.path.join(REPO, "examples", "penguin")
PHASES = {
    "python": "pass",
    "cli": "import generic_trainer.cli",
    "tensorflow": "import tensorflow",
    "devices": "import tensorflow as tf; tf.config.list_physical_devices('GPU')",
    "keras": "import tensorflow, keras",
}
MINIMAL = """
import keras

def run_fn(fn_args):
    from generic_trainer.data import DatasetOptions
    ds = fn_args.data_accessor.tf_dataset_factory(fn_args.train_files, DatasetOptions(batch_size=32,
                                                  label_key="species"), fn_args.schema_path)
    ds = ds.map(lambda f, y: (keras.ops.concatenate(
        [keras.ops.cast(f[k], "float32") for k in sorted(f) if f[k].dtype.is_floating], axis=1), y))
    inputs = keras.Input(shape=(4,))
    model = keras.Model(inputs, keras.layers.Dense(3)(inputs))
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(ds, steps_per_epoch=fn_args.train_steps, epochs=1)
    model.export(fn_args.serving_model_dir)
"""


def env() -> dict[str, str]:
    e = dict(os.environ)
    e.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    e["PYTHONPATH"] = os.path.join(REPO, "runtime") + os.pathsep + e.get("PYTHONPATH", "")
    return e


def phase(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=env(), capture_output=True)
    return time.perf_counter() - start


def train(module: str, out: str) -> dict[str, float]:
    """Seconds after process start of the runtime's milestones, from its log."""
    start = time.time()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "generic_trainer",
            "train",
            "--examples",
            f"{PENGUIN}/data",
            "--schema",
            f"{PENGUIN}/schema.pbtxt",
            "--module-file",
            module,
            "--model-dir",
            out,
            "--train-steps",
            "5",
            "--eval-steps",
            "1",
        ],
        env=env(),
        capture_output=True,
        text=True,
    )
    if proc.returncode:
        sys.exit(proc.stderr[-3000:])
    marks = {}
    for line in proc.stderr.splitlines():
        stamp = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ", line)
        if not stamp:
            continue
        t = datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp() - start
        for key, text in (
            ("request", "train request:"),
            ("strategy", "resolved strategy"),
            ("run_fn", "calling run_fn"),
            ("first_step", "first training step done"),
        ):
            if text in line and key not in marks:
                marks[key] = t
        found = re.search(r"first training step done \(([\d.]+) s after process start\)", line)
        if found:
            marks["first_step_runtime"] = float(found.group(1))
    return marks


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    times = {
        name: statistics.median(phase(code) for _ in range(args.repeats))
        for name, code in PHASES.items()
    }
    for name, seconds in times.items():
        print(f"| {name} | `{PHASES[name]}` | {seconds:.2f} |")
    with tempfile.TemporaryDirectory() as tmp:
        minimal = os.path.join(tmp, "minimal.py")
        with open(minimal, "w") as f:
            f.write(MINIMAL)
        for label, module in (
            ("minimal module", minimal),
            ("penguin example", f"{PENGUIN}/module.py"),
        ):
            runs = [
                train(module, os.path.join(tmp, f"m{i}-{label[0]}")) for i in range(args.repeats)
            ]
            med = {k: statistics.median(r[k] for r in runs if k in r) for k in runs[0]}
            print(
                f"| train, {label} | " + " | ".join(f"{k} {v:.1f}" for k, v in med.items()) + " |"
            )


if __name__ == "__main__":
    main()
