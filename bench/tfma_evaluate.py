"""`generic-trainer evaluate` against a plain `tfma.run_model_analysis` script, in one run.

The same SavedModel, EvalConfig and data for both: the bundled penguin eval split (95 examples) and
200,000 examples made by repeating it. The EvalConfig is the one evaluate runs for the short form
below (read back from its metrics file), so plain TFMA computes exactly the same metrics. Each
command runs as a child of a small wrapper that reports its wall time and the peak RSS of the
whole process tree it waited for (RUSAGE_CHILDREN: evaluate's sandboxed TFMA process included).
For the record the previous, hand-written evaluator runs too when `--old-trainer` names its CLI.

    .venv/bin/python bench/tfma_evaluate.py --model DIR [--repeats 2] [--old-trainer PATH]

Prints a markdown table; ratios are evaluate / plain TFMA, paired in each repeat, medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PENGUIN = os.path.join(REPO, "examples", "penguin")
GT = os.path.join(os.path.dirname(sys.executable), "generic-trainer")
CONFIG = {
    "label_key": "species",
    "slices": [["island"]],
    "metrics": ["accuracy", "loss", "auc"],
    "thresholds": {"accuracy": {"lower_bound": 0.5}},
}
WRAPPER = (
    "import resource, subprocess, sys, time\n"
    "t = time.monotonic()\n"
    "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)"
    ".returncode\n"
    "print(rc, time.monotonic() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
)
PLAIN = """
import json, sys
import tensorflow_model_analysis as tfma
from google.protobuf import json_format
from tensorflow_model_analysis.proto import config_pb2
model, config, data, out = sys.argv[1:]
eval_config = json_format.ParseDict(json.load(open(config)), config_pb2.EvalConfig())
shared = tfma.default_eval_shared_model(eval_saved_model_path=model, eval_config=eval_config)
tfma.run_model_analysis(eval_shared_model=shared, eval_config=eval_config, data_location=data,
                        output_path=out, file_format="tfrecords")
"""


def measured(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in MiB) of `cmd` and everything it started."""
    out = subprocess.run(
        [sys.executable, "-c", WRAPPER, *cmd], capture_output=True, text=True, check=True
    ).stdout.split()
    if out[0] != "0":
        raise SystemExit(f"{cmd[:2]} failed (exit {out[0]})")
    return float(out[1]), float(out[2]) / 1024


def repeated_split(examples: str, out: str, count: int) -> str:
    """An Examples dir whose eval split repeats the penguin eval records up to `count`."""
    sys.path.insert(0, os.path.join(REPO, "runtime"))
    from generic_trainer.records import example_files

    source = os.path.join(examples, "Split-eval")
    records = [
        r
        for name in sorted(os.listdir(source))
        for r in example_files.read_records(os.path.join(source, name))
    ]
    import tensorflow as tf

    os.makedirs(os.path.join(out, "Split-eval"))
    options = tf.io.TFRecordOptions(compression_type="GZIP")
    path = os.path.join(out, "Split-eval", "data-00000-of-00001.gz")
    with tf.io.TFRecordWriter(path, options) as writer:
        for i in range(count):
            writer.write(records[i % len(records)])
    return out


def evaluate_cmd(gt: str, model: str, examples: str, out: str) -> list[str]:
    return [
        gt, "evaluate", "--model", model, "--examples", examples,
        "--eval-config", json.dumps(CONFIG), "--blessing-dir", f"{out}/blessing",
        "--metrics-file", f"{out}/metrics.json", "--timeout", "3000",
    ]  # fmt: skip


def bench(args: argparse.Namespace, name: str, examples: str, work: str) -> list[str]:
    """One data set: the table rows of every repeat's paired measurements."""
    times: dict[str, list[float]] = {"evaluate": [], "plain": [], "old": []}
    peaks: dict[str, list[float]] = {"evaluate": [], "plain": [], "old": []}
    for i in range(args.repeats):
        out = os.path.join(work, f"{name}-{i}")
        wall, peak = measured(evaluate_cmd(GT, args.model, examples, f"{out}/gt"))
        times["evaluate"].append(wall)
        peaks["evaluate"].append(peak)
        with open(f"{out}/gt/metrics.json", encoding="utf-8") as f:
            config = json.load(f)["tfma_eval_config"]
        with open(f"{out}/config.json", "w", encoding="utf-8") as f:
            json.dump(config, f)
        serving = os.path.join(args.model, "Format-Serving")
        data = os.path.join(examples, "Split-eval", "*")
        cmd = [sys.executable, "-c", PLAIN, serving, f"{out}/config.json", data, f"{out}/plain"]
        wall, peak = measured(cmd)
        times["plain"].append(wall)
        peaks["plain"].append(peak)
        if args.old_trainer:
            wall, peak = measured(
                evaluate_cmd(args.old_trainer, args.model, examples, f"{out}/old")
            )
            times["old"].append(wall)
            peaks["old"].append(peak)
    ratio_t = statistics.median(
        a / b for a, b in zip(times["evaluate"], times["plain"], strict=True)
    )
    ratio_m = statistics.median(
        a / b for a, b in zip(peaks["evaluate"], peaks["plain"], strict=True)
    )
    old = (
        f"{statistics.median(times['old']):.1f} s, {statistics.median(peaks['old']):.0f} MiB"
        if times["old"]
        else "not run"
    )
    return [
        f"| {name} | {statistics.median(times['evaluate']):.1f} | "
        f"{statistics.median(times['plain']):.1f} | **{ratio_t:.3f}** | "
        f"{statistics.median(peaks['evaluate']):.0f} | {statistics.median(peaks['plain']):.0f} | "
        f"**{ratio_m:.3f}** | {old} |"
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a penguin model dir (Format-Serving)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--count", type=int, default=200_000)
    parser.add_argument("--old-trainer", help="the previous generic-trainer CLI, for the record")
    parser.add_argument("--work", default=None)
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="tfma-bench-")
    big = repeated_split(os.path.join(PENGUIN, "data"), os.path.join(work, "big"), args.count)
    rows = [
        "| data | evaluate s | plain TFMA s | wall ratio | evaluate peak MiB | plain peak MiB "
        "| RSS ratio | previous evaluator |",
        "|---|---|---|---|---|---|---|---|",
    ]
    rows += bench(args, "penguin eval (95)", os.path.join(PENGUIN, "data"), work)
    rows += bench(args, f"generated ({args.count:,})", big, work)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
