"""import-examples and transform at scale: examples/s, peak RSS, and transform against plain
tft_beam.

Writes penguin-like CSV files (rows of examples/penguin/penguins.csv with jittered numbers) of each
size, then per size, every run a fresh process (peak RSS from wait4 of that process tree's main
process and its Beam workers' largest):

  1. `generic-trainer import-examples --input rows.csv --schema examples/penguin/schema.pbtxt`
  2. `generic-trainer transform` with examples/penguin/module_transform.py's preprocessing_fn
  (analyze
     train; transform and write train and eval)
  3. bench/transform_plain.py: the same tf.Transform work written directly against tft_beam

  .venv/bin/python bench/data_verbs.py --rows 100000 300000 [--repeats 2] [--write-readme]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PENGUIN = os.path.join(REPO, "examples", "penguin")
WORK = os.path.join(HERE, "_work", "data_verbs")
GT = os.path.join(os.path.dirname(sys.executable), "generic-trainer")


def write_csv(path: str, rows: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    with open(os.path.join(PENGUIN, "penguins.csv"), encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader)
        base = list(reader)
    floats = [
        header.index(c)
        for c in ("bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g")
    ]
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        for _ in range(rows):
            row = list(rng.choice(base))
            for i in floats:
                row[i] = f"{float(row[i]) * rng.uniform(0.97, 1.03):.2f}"
            writer.writerow(row)


def timed(cmd: list[str]) -> dict:
    """Wall and CPU seconds and peak RSS (MiB) of a fresh process (wait4: its own, or its largest
    reaped child's).

    CPU seconds (user + system, its reaped children included) barely depend on what else the machine
    runs; wall seconds do.
    """
    import tempfile

    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.monotonic()
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise RuntimeError(f"{cmd[:3]} failed ({proc.returncode}):\n{err.read()[-3000:]}")
        return {
            "wall_s": wall,
            "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_rss_mib": usage.ru_maxrss / 1024,
            "stdout": out.read(),
        }


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def bench_size(rows: int, repeats: int, plain_first: bool = False) -> dict:
    base = os.path.join(WORK, str(rows))
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(base)
    csv_path = os.path.join(base, "rows.csv")
    write_csv(csv_path, rows)
    result: dict = {
        "rows": rows,
        "csv_mib": os.path.getsize(csv_path) / 2**20,
        "load_before": load(),
        "runs": [],
    }
    for rep in range(repeats):
        run: dict = {}
        examples = os.path.join(base, f"examples-{rep}")
        r = timed(
            [
                GT,
                "import-examples",
                "--input",
                csv_path,
                "--schema",
                os.path.join(PENGUIN, "schema.pbtxt"),
                "--output",
                examples,
            ]
        )
        summary = json.loads(r.pop("stdout"))
        run["import"] = {**r, "verb_s": summary["seconds"], "counts": summary["num_examples"]}
        order = ["verb", "plain"] if (rep + plain_first) % 2 == 0 else ["plain", "verb"]
        for which in order:
            out = os.path.join(base, f"{which}-{rep}")
            if which == "verb":
                cmd = [
                    GT,
                    "transform",
                    "--examples",
                    examples,
                    "--schema",
                    os.path.join(examples, "schema.pbtxt"),
                    "--module-file",
                    os.path.join(PENGUIN, "module_transform.py"),
                    "--transform-graph",
                    os.path.join(out, "graph"),
                    "--transformed-examples",
                    os.path.join(out, "transformed"),
                ]
            else:
                cmd = [
                    sys.executable,
                    os.path.join(HERE, "transform_plain.py"),
                    examples,
                    os.path.join(examples, "schema.pbtxt"),
                    os.path.join(PENGUIN, "module_transform.py"),
                    out,
                    "--direct_running_mode=in_memory",
                    "--direct_num_workers=1",
                ]
            r = timed(cmd)
            r.pop("stdout")
            run[f"transform_{which}"] = r
        run["load_after"] = load()
        result["runs"].append(run)
        print(json.dumps({"rows": rows, "rep": rep, **run}), flush=True)
        for name in os.listdir(base):
            if name.endswith(f"-{rep}"):
                shutil.rmtree(os.path.join(base, name), ignore_errors=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument(
        "--repeats", type=int, default=1, help="runs per size; the transform order alternates"
    )
    parser.add_argument(
        "--plain-first", action="store_true", help="start with the plain script (default: the verb)"
    )
    parser.add_argument("--out", default=os.path.join(WORK, "results.json"))
    args = parser.parse_args()
    os.makedirs(WORK, exist_ok=True)
    results = [bench_size(rows, args.repeats, args.plain_first) for rows in args.rows]
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
