"""TFX-module benchmarks: what a TFX module file costs under generic-trainer. Two modes:

  transform    the input pipeline of a module asking the data accessor for the transformed schema:
               on-the-fly  raw examples + the transform graph, applied by the accessor in tf.data;
               materialised the same features read from transformed examples written beforehand
                           (Transform's `transformed_examples-*`, what TFX feeds its Trainer).
               Each run a fresh process reading one pass of the train split; per run: examples/s
               and CPU seconds (user+sys, all threads) per example, while reading only.
  tensorboard  a TFX-style module with its `TensorBoard(log_dir=fn_args.model_run_dir,
               update_freq="epoch")` callback through `generic-trainer train` (trainer_tb), against
               the plain Keras script without the callback (plain) and with it (plain_tb, plain
               Keras' cost of the callback), and the runtime without the callback (trainer, the
               runtime's own cost). Same model and data as bench/overhead.py.

Repetitions run every variant once, in rotating order; medians, and medians of the per-repetition
ratios to the first variant. Data lives in bench/_work/ (gitignored) and is reused.

  .venv/bin/python bench/tfx_module.py --mode transform --examples 200000 --repeats 3
  .venv/bin/python bench/tfx_module.py --mode tensorboard --examples 40000 --batch-size 32 --repeats
  3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import overhead  # noqa: E402  (data generation and child runs shared with bench/overhead.py)

WORK = os.path.join(HERE, "_work", "tfx_module")
TRANSFORM_MODULE = os.path.join(
    REPO, "examples", "penguin", "module_transform.py"
)  # z-scores + vocabularies

# One pass over a split through the accessor with the transformed schema, in a child process.
READ = r"""
import json, os, sys, time
os.environ["TF_USE_LEGACY_KERAS"] = "0"
import tensorflow as tf
from generic_trainer import data
GRAPH, PATTERN, BATCH = sys.argv[1], sys.argv[2], int(sys.argv[3])
accessor = data.DataAccessor(transform_graph=GRAPH)
schema = data.load_schema(os.path.join(GRAPH, "transformed_metadata", "schema.pbtxt"))
options = data.DatasetOptions(batch_size=BATCH, num_epochs=1, shuffle=True, label_key="species")
dataset = accessor.tf_dataset_factory([PATTERN], options, schema)
iterator = iter(dataset)
n = int(next(iterator)[1].shape[0])  # warm-up: graph built, transform loaded, first batch read
wall, cpu = time.perf_counter(), time.process_time()
for _, label in iterator:
    n += int(label.shape[0])
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
print("RESULT " + json.dumps({"examples": n, "wall": wall, "cpu": cpu}))
"""

# Writes the on-the-fly output as transformed examples (4 gzip shards, named as TFX's Transform
# does).
MATERIALISE = r"""
import os, sys
os.environ["TF_USE_LEGACY_KERAS"] = "0"
import tensorflow as tf
from generic_trainer import data
GRAPH, PATTERN, OUT, SHARDS = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
accessor = data.DataAccessor(transform_graph=GRAPH)
schema = data.load_schema(os.path.join(GRAPH, "transformed_metadata", "schema.pbtxt"))
options = data.DatasetOptions(batch_size=1024, num_epochs=1, shuffle=False)
os.makedirs(OUT)
writers = [
    tf.io.TFRecordWriter(
        os.path.join(OUT, f"transformed_examples-{i:05d}-of-{SHARDS:05d}.gz"), "GZIP")
    for i in range(SHARDS)
]
count = 0
for batch in accessor.tf_dataset_factory([PATTERN], options, schema):
    columns = {k: v.numpy().reshape(v.shape[0], -1) for k, v in batch.items()}
    for i in range(next(iter(columns.values())).shape[0]):
        feature = {}
        for k, v in columns.items():
            if v.dtype.kind == "f":
                feature[k] = tf.train.Feature(float_list=tf.train.FloatList(value=v[i]))
            else:
                feature[k] = tf.train.Feature(int64_list=tf.train.Int64List(value=v[i]))
        writers[count % SHARDS].write(
            tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
        count += 1
for w in writers:
    w.close()
print("materialised", count)
"""


def ensure_transform(n: int) -> tuple[str, str, str]:
    """(raw data dir, transform graph dir, materialised transformed examples dir) for n examples."""
    raw = overhead.ensure_data(n)
    root = os.path.join(WORK, f"transform-{n}")
    graph, materialised = (
        os.path.join(root, "transform_graph"),
        os.path.join(root, "materialised", "Split-train"),
    )
    if not os.path.exists(os.path.join(root, "DONE")):
        shutil.rmtree(root, ignore_errors=True)
        analyse = overhead.ensure_data(
            20_000
        )  # analysed on a small sample: same generator, same statistics
        print(f"transform graph from {analyse} ...", flush=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "generic_trainer",
                "transform",
                "--transform-graph",
                graph,
                "--examples",
                analyse,
                "--schema",
                os.path.join(analyse, "schema.pbtxt"),
                "--module-file",
                TRANSFORM_MODULE,
            ],
            check=True,
            env=overhead.child_env(),
        )
        print(f"materialising {n:,} transformed examples ...", flush=True)
        subprocess.run(
            [
                sys.executable,
                "-c",
                MATERIALISE,
                graph,
                os.path.join(raw, "Split-train", "*"),
                materialised,
                "4",
            ],
            check=True,
            env=overhead.child_env(),
        )
        open(os.path.join(root, "DONE"), "w").close()
    return raw, graph, materialised


def bench_transform(n: int, repeats: int, batch_size: int) -> dict:
    raw, graph, materialised = ensure_transform(n)
    patterns = {
        "on-the-fly": os.path.join(raw, "Split-train", "*"),
        "materialised": os.path.join(materialised, "*"),
    }
    variants = list(patterns)
    runs: dict[str, list[dict]] = {v: [] for v in variants}
    for rep in range(repeats):
        for variant in variants[rep % 2 :] + variants[: rep % 2]:
            load = os.getloadavg()[0]
            proc = subprocess.run(
                [sys.executable, "-c", READ, graph, patterns[variant], str(batch_size)],
                capture_output=True,
                text=True,
                env=overhead.child_env(),
                cwd=REPO,
            )
            if proc.returncode != 0:
                sys.exit(f"{variant} failed:\n{proc.stderr[-3000:]}")
            result = json.loads(proc.stdout.split("RESULT ", 1)[1])
            result.update(
                load=load,
                rate=result["examples"] / result["wall"],
                cpu_us=1e6 * result["cpu"] / result["examples"],
            )
            runs[variant].append(result)
            print(
                f"  rep {rep + 1} {variant:12s} {result['rate']:9,.0f} examples/s  "
                f"{result['cpu_us']:6.1f} us CPU/example  ({result['examples']:,} examples, load "
                f"{load:.1f})",
                flush=True,
            )
    return {"n": n, "batch_size": batch_size, "repeats": repeats, "runs": runs}


def bench_tensorboard(n: int, repeats: int, batch_size: int, epochs: int) -> dict:
    data = overhead.ensure_data(n)
    variants = ["plain", "plain_tb", "trainer", "trainer_tb"]
    runs: dict[str, list[dict]] = {v: [] for v in variants}
    out = os.path.join(WORK, "runs")
    os.makedirs(out, exist_ok=True)
    for rep in range(repeats):
        for variant in variants[rep % 4 :] + variants[: rep % 4]:
            model_dir = os.path.join(out, f"r{rep}-{variant}")
            shutil.rmtree(model_dir, ignore_errors=True)
            if variant.startswith("trainer"):
                config = {
                    "input": "tf_data",
                    "batch_size": batch_size,
                    "epochs": epochs,
                    "tensorboard": variant == "trainer_tb",
                }
                cmd = [
                    overhead.TRAINER,
                    "train",
                    "--examples",
                    data,
                    "--module-file",
                    os.path.join(HERE, "overhead_module.py"),
                    "--schema",
                    os.path.join(data, "schema.pbtxt"),
                    "--model-dir",
                    model_dir,
                    "--custom-config",
                    json.dumps(config),
                ]
            else:
                cmd = overhead.command("plain", data, model_dir, batch_size, epochs)
                if variant == "plain_tb":
                    cmd += ["--tensorboard", os.path.join(model_dir, "logs")]
            try:
                result = overhead.run_child(cmd, model_dir + ".log")
            finally:
                shutil.rmtree(model_dir, ignore_errors=True)
            runs[variant].append(result)
            print(
                f"  rep {rep + 1} {variant:10s} wall {result['wall']:6.1f} s  "
                f"{result['steps_per_s']:7.1f} steps/s"
                f"  CPU {result['cpu']:6.1f} s  first step {result['first_step']:5.1f} s  tail "
                f"{_tail(result):5.2f} s"
                f"  (load {result['load']:.1f})",
                flush=True,
            )
    return {"n": n, "batch_size": batch_size, "epochs": epochs, "repeats": repeats, "runs": runs}


def _paired(runs: dict[str, list[dict]], variant: str, base: str, key: str) -> float:
    return statistics.median(
        a[key] / b[key] for a, b in zip(runs[variant], runs[base], strict=True)
    )


def report_transform(result: dict) -> str:
    runs = result["runs"]
    lines = [
        "| input | examples/s | CPU us / example | paired ratio of examples/s | paired ratio of "
        "CPU / example |",
        "|---|---:|---:|---:|---:|",
    ]
    for variant in runs:
        rate = statistics.median(r["rate"] for r in runs[variant])
        cpu = statistics.median(r["cpu_us"] for r in runs[variant])
        lines.append(
            f"| {variant} | {rate:,.0f} | {cpu:.1f} | "
            f"{_paired(runs, variant, 'materialised', 'rate'):.2f} "
            f"| {_paired(runs, variant, 'materialised', 'cpu_us'):.2f} |"
        )
    return "\n".join(lines)


def _tail(run: dict) -> float:
    return run["wall"] - run.get("epoch_end", float("nan"))


def report_tensorboard(result: dict) -> str:
    """Per variant: medians of wall and CPU time and of each phase (process start -> first step, the
    training, the tail from the last epoch's line to process end: export, publishing, exit), best
    wall, and the ratios to plain: paired (median over repetitions of run / plain run of the same
    repetition)
    for wall and CPU, and best wall / best plain wall."""
    runs = result["runs"]
    best_plain = min(r["wall"] for r in runs["plain"])
    lines = [
        "| variant | wall, s | best wall, s | paired wall ratio | best-wall ratio | CPU, s | "
        "paired CPU ratio "
        "| first step, s | training, s | tail, s | steps/s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for variant in runs:
        rs = runs[variant]
        walls = [r["wall"] for r in rs]
        epoch_s = [r.get("epoch_end", float("nan")) - r["first_step"] for r in rs]
        lines.append(
            f"| {variant} | {statistics.median(walls):.1f} | {min(walls):.1f} | "
            f"{_paired(runs, variant, 'plain', 'wall'):.3f} | {min(walls) / best_plain:.3f} | "
            f"{statistics.median(r['cpu'] for r in rs):.1f} | "
            f"{_paired(runs, variant, 'plain', 'cpu'):.3f} | "
            f"{statistics.median(r['first_step'] for r in rs):.1f} | "
            f"{statistics.median(epoch_s):.1f} | "
            f"{statistics.median(_tail(r) for r in rs):.2f} | "
            f"{statistics.median(r['steps_per_s'] for r in rs):.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mode", choices=["transform", "tensorboard"], required=True)
    parser.add_argument("--examples", type=int, default=200_000)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    start = time.perf_counter()
    if args.mode == "transform":
        result = bench_transform(args.examples, args.repeats, args.batch_size)
        table = report_transform(result)
    else:
        result = bench_tensorboard(args.examples, args.repeats, args.batch_size, args.epochs)
        table = report_tensorboard(result)
    os.makedirs(WORK, exist_ok=True)
    with open(os.path.join(WORK, f"{args.mode}.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(
        f"\n{table}\n\n(took {time.perf_counter() - start:.0f} s; load average now "
        f"{' / '.join(f'{x:.1f}' for x in os.getloadavg())})"
    )


if __name__ == "__main__":
    main()
