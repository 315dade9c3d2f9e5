"""bulk-infer against a plain Beam RunInference script: examples/s on the same model and data.

Writes N penguin examples (the bundled examples' records, repeated; gzipped TFRecords, 4 files per
split, 2/3 train and 1/3 eval) and trains a penguin model once with `generic-trainer train` (or
takes --model), then per repetition, each run a fresh process, in alternating order:

  verb:  generic-trainer bulk-infer --model M --examples E --inference-result OUT
         --beam-pipeline-args='<BEAM_ARGS>'   (every split: all N examples)
  plain: bench/bulk_infer_plain.py, the same model, files and Beam options: ReadFromTFRecord ->
         RunInference(tfx_bsl's CreateModelHandler) -> WriteToTFRecord of PredictionLog

Both write one gzipped file of N PredictionLogs (checked). Reported per run: examples/s over the
pipeline's own time (the verb's summary; the plain script's timing of the same span), examples
per CPU second of the whole process (user + system: what other work on the machine barely moves),
wall seconds and peak RSS (wait4).

  .venv/bin/python bench/bulk_infer.py --examples 300000 --repeats 2 [--model DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from data_verbs import GT, PENGUIN, REPO, load, timed  # noqa: E402

WORK = os.path.join(HERE, "_work", "bulk_infer")
BEAM_ARGS = "--direct_running_mode=in_memory --direct_num_workers=1"


def _records(path: str) -> list[bytes]:
    from generic_trainer.records.example_files import read_records

    return list(read_records(path))


def _write(path: str, records: list[bytes]) -> None:
    import tensorflow as tf

    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(path, "GZIP") as writer:
        for record in records:
            writer.write(record)


def make_examples(n: int, out: str, shards: int = 4) -> None:
    """N records in TFX layout, cycling through the bundled examples' records."""
    base = [r for s in ("train", "eval") for r in _records(_one(f"Split-{s}"))]
    for split, count in (("train", n - n // 3), ("eval", n // 3)):
        records = [base[i % len(base)] for i in range(count)]
        for k in range(shards):
            name = f"data_tfrecord-{k:05d}-of-{shards:05d}.gz"
            _write(os.path.join(out, f"Split-{split}", name), records[k::shards])


def _one(split_dir: str) -> str:
    (name,) = os.listdir(os.path.join(PENGUIN, "data", split_dir))
    return os.path.join(PENGUIN, "data", split_dir, name)


def train_model(out: str) -> str:
    timed(
        [GT, "train", "--examples", os.path.join(PENGUIN, "data"), "--schema"]
        + [
            os.path.join(PENGUIN, "schema.pbtxt"),
            "--module-file",
            os.path.join(PENGUIN, "module.py"),
        ]
        + ["--model-dir", out, "--train-steps", "300", "--eval-steps", "20"]
    )
    return out


def _count(result_dir: str) -> int:
    (name,) = os.listdir(result_dir)
    return len(_records(os.path.join(result_dir, name)))


def run_once(which: str, model: str, examples: str, out: str) -> dict:
    if which == "verb":
        cmd = [GT, "bulk-infer", "--model", model, "--examples", examples]
        cmd += ["--inference-result", out, f"--beam-pipeline-args={BEAM_ARGS}"]
    else:
        os.makedirs(out)
        cmd = [sys.executable, os.path.join(HERE, "bulk_infer_plain.py")]
        cmd += ["--model", os.path.join(model, "Format-Serving"), "--input"]
        cmd += [os.path.join(examples, "Split-*", "*.gz"), "--output"]
        cmd += [os.path.join(out, "prediction_logs"), f"--beam-args={BEAM_ARGS}"]
    started_load = load()
    r = timed(cmd)
    stdout = r.pop("stdout")
    summary = json.loads(stdout[stdout.index("{") :])
    n = _count(out)
    pipeline_s = n / summary["examples_per_second"] if which == "verb" else summary["pipeline_s"]
    shutil.rmtree(out)
    return {**r, "examples": n, "pipeline_s": pipeline_s, "load": started_load}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=300_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--model", help="a train model dir (default: train one here)")
    args = parser.parse_args()
    shutil.rmtree(WORK, ignore_errors=True)
    examples = os.path.join(WORK, "examples")
    make_examples(args.examples, examples)
    model = args.model or train_model(os.path.join(WORK, "model"))
    runs: dict[str, list[dict]] = {"verb": [], "plain": []}
    for rep in range(args.repeats):
        for which in ("verb", "plain") if rep % 2 == 0 else ("plain", "verb"):
            run = run_once(which, model, examples, os.path.join(WORK, f"{which}-{rep}"))
            assert run["examples"] == args.examples, run
            runs[which].append(run)
            print(json.dumps({"rep": rep, "which": which, **run}), flush=True)
    report(runs, args.examples)
    with open(os.path.join(WORK, "results.json"), "w", encoding="utf-8") as f:
        json.dump(runs, f, indent=2)


def report(runs: dict[str, list[dict]], n: int) -> None:
    """A markdown table: medians per variant, and the verb's ratio to the plain script."""

    def med(which: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[which])

    rows = {}
    for which in ("plain", "verb"):
        rows[which] = {
            "eps": statistics.median(n / r["pipeline_s"] for r in runs[which]),
            "eps_best": max(n / r["pipeline_s"] for r in runs[which]),
            "per_cpu": statistics.median(n / r["cpu_s"] for r in runs[which]),
            "wall": med(which, "wall_s"),
            "rss": med(which, "peak_rss_mib"),
        }
    print(
        "| variant | examples/s (pipeline, median) | best | examples per CPU s | wall s | RSS MiB |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for which, row in rows.items():
        ratio = {k: row[k] / rows["plain"][k] for k in row}
        tail = "" if which == "plain" else " ({:.3f})"
        print(
            f"| {which} | {row['eps']:,.0f}{tail.format(ratio['eps'])} "
            f"| {row['eps_best']:,.0f}{tail.format(ratio['eps_best'])} "
            f"| {row['per_cpu']:,.0f}{tail.format(ratio['per_cpu'])} "
            f"| {row['wall']:.1f} | {row['rss']:.0f} |"
        )
    print(f"\nrepo {REPO}, {n} examples, beam args {BEAM_ARGS!r}")


if __name__ == "__main__":
    main()
