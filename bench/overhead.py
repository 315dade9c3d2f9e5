"""Overhead benchmark: `generic-trainer train` against a plain hand-written Keras script.

Four modes (default: all), each writing its own section of bench/README.md:

  startup   `generic-trainer --help`, `train --help` and an argument error: wall time, and which
            heavy libraries each imports (python -X importtime), beside `python -c pass` and
            `python -c "import tensorflow"` (and tfx_bsl, what TFX modules add).
  overhead  the same model on the same generated penguin-like TFRecords, trained by
            plain        bench/overhead_plain.py: tf.data + model.fit + export, no generic-trainer;
            trainer      `generic-trainer train --module-file bench/overhead_module.py`, the module
                         using the same hand-written tf.data pipeline (the runtime's cost alone);
            accessor     the same with fn_args.data_accessor.tf_dataset_factory and tfx_bsl's
            options
                         (what TFX modules write);
            accessor_gt  the same with generic_trainer.data.DatasetOptions (no tfx_bsl import).
            Each run is its own process; repetitions run every variant once, in rotating order. Per
            run: wall time, time to the first training step (logged by both as seconds after process
            start), peak RSS (the child's ru_maxrss from wait4), CPU time (user+sys), steps/s.
            Medians, and medians of the per-repetition ratios to plain.
  steps     the runtime's own steps (request, checks, strategy, hooks, validation, publishing), each
            timed alone in fresh processes: steadier than two noisy end-to-end times.
  memory    `generic-trainer train` (accessor input) over --examples and over --large-examples
            (default 10x): peak RSS must not grow with the data (streamed, never materialized).

Data is generated once into bench/_work/overhead/ (gitignored) and reused.

  .venv/bin/python bench/overhead.py                                   # everything, README updated
  .venv/bin/python bench/overhead.py --mode overhead --examples 20000 --repeats 1 --no-readme   #
  quick
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
WORK = os.path.join(HERE, "_work", "overhead")
README = os.path.join(HERE, "README.md")
BIN = os.path.dirname(sys.executable)
TRAINER = os.path.join(BIN, "generic-trainer")
FIRST_STEP = re.compile(r"first training step done \((\d+(?:\.\d+)?) s after process start\)")
EPOCH_RATE = re.compile(r"epoch \d+/\d+ done in [\d.]+ s \(([\d.]+) steps/s\)")
HEAVY = (
    "tensorflow",
    "keras",
    "tensorflow_transform",
    "tfx_bsl",
    "kfp",
    "google.cloud.storage",
    "google.cloud.aiplatform",
    "keras_tuner",
    "apache_beam",
)
VARIANTS = ("plain", "trainer", "accessor", "accessor_gt")

sys.path.insert(0, HERE)


# ----------------------------------------------------------------------------------------- data


def ensure_data(n: int) -> str:
    """The generated data set of n training examples (generated on first use)."""
    path = os.path.join(WORK, f"penguin-{n}")
    if not os.path.exists(os.path.join(path, "DONE")):
        import overhead_model

        shutil.rmtree(path, ignore_errors=True)
        print(f"generating {n:,} examples into {path} ...", flush=True)
        start = time.perf_counter()
        # In a child process: the bench process itself stays free of TensorFlow.
        code = f"import overhead_model; overhead_model.generate({path!r}, {n})"
        subprocess.run([sys.executable, "-c", code], cwd=HERE, check=True, env=child_env())
        print(f"  done in {time.perf_counter() - start:.0f} s", flush=True)
        assert overhead_model  # imported only to fail early when the file is missing
    return path


# ------------------------------------------------------------------------------------- children


def child_env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TF_CONFIG", "CLUSTER_SPEC", "TF_USE_LEGACY_KERAS")
        and not k.startswith("AIP_")
    }
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    return env


def run_child(cmd: list[str], log_path: str, timeout: float = 3600) -> dict:
    """Run one child to completion; its wall time, first-step time, peak RSS and CPU time."""
    with open(log_path, "w") as out:
        load = os.getloadavg()[0]
        start = time.perf_counter()
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=child_env(), cwd=REPO
        )
        deadline = start + timeout
        seen, last_epoch_end = 0, float("nan")
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            with open(
                log_path, "rb"
            ) as f:  # when the last "epoch N/N done" line appears: the tail after it
                f.seek(seen)
                new = f.read()
            if b"\n" in new:
                complete = new[: new.rindex(b"\n") + 1]
                seen += len(complete)
                if EPOCH_RATE.search(complete.decode("utf-8", "replace")):
                    last_epoch_end = time.perf_counter() - start
            if time.perf_counter() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.02)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
    text = open(log_path).read()
    if proc.returncode != 0:
        sys.exit(
            f"{' '.join(cmd)} failed with exit code {proc.returncode}; log "
            f"{log_path}:\n{text[-3000:]}"
        )
    found = FIRST_STEP.search(text)
    return {
        "wall": wall,
        "first_step": float(found.group(1)) if found else float("nan"),
        "steps_per_s": float(EPOCH_RATE.findall(text)[-1])
        if EPOCH_RATE.search(text)
        else float("nan"),
        # seconds after start when the last epoch's line was seen (20 ms polls)
        "epoch_end": last_epoch_end,
        "rss_mb": usage.ru_maxrss / 1024,
        "cpu": usage.ru_utime + usage.ru_stime,
        "load": load,
        "accuracy": _accuracy(text),
    }


def _accuracy(text: str) -> float:
    """The final validation accuracy either side printed (a sanity check that both trained alike):
    the
    plain script's JSON has `val_accuracy` last, generic-trainer's metrics have it as `accuracy`."""
    m = re.findall(r'"(?:val_)?accuracy":\s*([0-9.]+)', text)
    return float(m[-1]) if m else float("nan")


def command(variant: str, data: str, model_dir: str, batch_size: int, epochs: int) -> list[str]:
    if variant == "plain":
        return [
            sys.executable,
            os.path.join(HERE, "overhead_plain.py"),
            "--examples",
            data,
            "--model-dir",
            model_dir,
            "--batch-size",
            str(batch_size),
            "--epochs",
            str(epochs),
        ]
    config = {
        "input": "tf_data" if variant == "trainer" else variant,
        "batch_size": batch_size,
        "epochs": epochs,
    }
    return [
        TRAINER,
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


def run_variant(variant: str, data: str, batch_size: int, epochs: int, tag: str) -> dict:
    runs = os.path.join(WORK, "runs")
    os.makedirs(runs, exist_ok=True)
    model_dir = os.path.join(runs, f"{tag}-{variant}")
    shutil.rmtree(model_dir, ignore_errors=True)
    try:
        result = run_child(
            command(variant, data, model_dir, batch_size, epochs), model_dir + ".log"
        )
        if not os.path.isfile(os.path.join(model_dir, "Format-Serving", "saved_model.pb")):
            sys.exit(f"{variant} wrote no serving model; log {model_dir}.log")
    finally:
        shutil.rmtree(model_dir, ignore_errors=True)
    print(
        f"  {tag:>8s} {variant:9s} wall {result['wall']:6.1f} s  first step "
        f"{result['first_step']:5.1f} s  "
        f"peak RSS {result['rss_mb']:6.0f} MB  CPU {result['cpu']:6.1f} s  val acc "
        f"{result['accuracy']:.3f}  "
        f"(load {result['load']:.1f})",
        flush=True,
    )
    return result


# ---------------------------------------------------------------------------------------- modes


def bench_overhead(
    n: int, repeats: int, batch_size: int, epochs: int, variants: tuple[str, ...]
) -> dict:
    data = ensure_data(n)
    print(
        f"overhead: {n:,} examples, batch {batch_size}, {epochs} epoch(s), {repeats} repeats of "
        f"{variants}"
    )
    results: dict[str, list[dict]] = {v: [] for v in variants}
    for rep in range(repeats):
        for variant in (
            variants[rep % len(variants) :] + variants[: rep % len(variants)]
        ):  # each takes every place
            results[variant].append(run_variant(variant, data, batch_size, epochs, f"rep{rep + 1}"))
    median = {
        v: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for v, rs in results.items()
    }
    return {
        "examples": n,
        "batch_size": batch_size,
        "epochs": epochs,
        "repeats": repeats,
        "runs": results,
        "median": median,
    }


def bench_memory(n_small: int, n_large: int, batch_size: int, variant: str = "accessor") -> dict:
    sizes = (n_small, n_large)
    paths = {n: ensure_data(n) for n in sizes}
    print(
        f"memory: {variant} over {n_small:,} and {n_large:,} examples, batch {batch_size}, 1 epoch"
    )
    results = {n: run_variant(variant, paths[n], batch_size, 1, f"{n // 1000}k") for n in sizes}
    return {"variant": variant, "batch_size": batch_size, "results": results}


def _timed(cmd: list[str], expect_rc: int | None = None) -> float:
    start = time.perf_counter()
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=child_env(), cwd=REPO, timeout=600
    )
    took = time.perf_counter() - start
    if expect_rc is not None and proc.returncode != expect_rc:
        sys.exit(
            f"{' '.join(cmd)}: exit code {proc.returncode}, expected "
            f"{expect_rc}\n{proc.stderr[-2000:]}"
        )
    return took


def _heavy_imports(args: list[str]) -> list[str]:
    """Heavy top-level packages the CLI imports for `args` (python -X importtime)."""
    code = "import sys; from generic_trainer.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code, *args],
        capture_output=True,
        text=True,
        env=child_env(),
        cwd=REPO,
        timeout=600,
    )
    names = {
        line.rsplit("|", 1)[-1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:")
    }
    return [h for h in HEAVY if h in names]


def bench_startup(repeats: int) -> dict:
    print(f"startup: {repeats} runs each")
    bad_args = [
        "train",
        "--examples",
        "/nonexistent/examples",
        "--module-file",
        "m.py",
        "--model-dir",
        "/tmp/x",
    ]
    cases = [
        ("`python -c pass` (interpreter alone)", [sys.executable, "-c", "pass"], 0, None),
        ("`generic-trainer --help`", [TRAINER, "--help"], 0, ["--help"]),
        ("`generic-trainer train --help`", [TRAINER, "train", "--help"], 0, ["train", "--help"]),
        (
            "`generic-trainer train --examples /nonexistent/examples ...` (exit 2)",
            [TRAINER, *bad_args],
            2,
            bad_args,
        ),
        (
            '`python -c "import tensorflow"` (for scale)',
            [sys.executable, "-c", "import tensorflow"],
            0,
            None,
        ),
        (
            '`python -c "import tensorflow; from tfx_bsl.public import tfxio"` (what a TFX module '
            "adds)",
            [sys.executable, "-c", "import tensorflow; from tfx_bsl.public import tfxio"],
            0,
            None,
        ),
    ]
    rows = []
    for label, cmd, rc, cli_args in cases:
        _timed(cmd)  # warm the page cache
        times = [_timed(cmd, rc) for _ in range(repeats)]
        heavy = _heavy_imports(cli_args) if cli_args is not None else None
        rows.append(
            {"label": label, "median": statistics.median(times), "max": max(times), "heavy": heavy}
        )
        print(
            f"  {label:70s} median {statistics.median(times):.2f} s  max {max(times):.2f} s  "
            f"heavy imports: {heavy if heavy is not None else '-'}",
            flush=True,
        )
    return {"repeats": repeats, "rows": rows}


STEPS_CHILD = r"""
import json, os, shutil, sys, time
data_dir, model_dir, work = sys.argv[1:4]
out = []
def step(name, fn, runtime=True):
    wall, cpu = time.perf_counter(), time.process_time()
    value = fn()
    out.append({"step": name, "wall": time.perf_counter() - wall,
                "cpu": time.process_time() - cpu, "runtime": runtime})
    return value
def parse():
    from generic_trainer import cli
    from generic_trainer.intake import fit_request
    args = cli.build_parser().parse_args([
        "train", "--examples", data_dir, "--module-file", "m.py",
        "--schema", os.path.join(data_dir, "schema.pbtxt"), "--model-dir", work,
    ])
    return fit_request.build_train_request(
        {k: v for k, v in vars(args).items() if v is not None}, environ={})
request = step("parse flags, build the request (cli, request)", parse)
def check():
    from generic_trainer.records import example_files, schemas
    files = example_files.split_file_patterns(request.examples, ("train", "eval"))
    example_files.check_readable(files)
    return schemas.load_schema(request.schema)
step("check examples, parse schema (data)", check)
step("import tensorflow (both sides pay it)", lambda: __import__("tensorflow"), runtime=False)
def strategy():
    from generic_trainer.fit import cluster
    c = cluster.resolve({})
    return cluster.create_strategy(cluster.choose_strategy("auto", cluster.count_gpus(), c), c, 0)
step("resolve cluster, create strategy (cluster)", strategy)
def fn_args_parts():
    from generic_trainer.fit import checkpointing
    from generic_trainer import data
    checkpointing.BackupAndRestore(os.path.join(work, "checkpoints"))
    return data.DataAccessor()
step("fn_args parts: data accessor, backup callback (data, checkpointing)", fn_args_parts)
def hooks():
    from generic_trainer.fit import fit_hooks
    with fit_hooks.recording_fit("keras3", speed=fit_hooks.SpeedOptions()):
        pass
step("install and remove the fit/compile hooks (fit_hooks)", hooks)
staging = os.path.join(work, ".staging")
shutil.copytree(model_dir, staging)
def validate():
    from generic_trainer.artifacts import outputs
    return outputs.validate_serving_model(staging)
step("load the SavedModel, check serving_default (outputs)", validate)
def publish():
    from generic_trainer.artifacts import outputs
    from generic_trainer.artifacts import storage
    storage.publish_dir(staging, os.path.join(work, "Format-Serving"))
    outputs.write_metrics_file(os.path.join(work, "metrics.json"), {"accuracy": 0.9, "loss": 0.1})
    outputs.write_tensorboard_scalars(
        os.path.join(work, "logs"), {"accuracy": 0.9, "loss": 0.1}, step=100)
step("publish, metrics file, TensorBoard scalars (outputs)", publish)
print(json.dumps(out))
"""


def bench_steps(n: int, repeats: int) -> dict:
    """The runtime's own steps of a train run, each timed alone, in `repeats` fresh processes."""
    data = ensure_data(n)
    runs = os.path.join(WORK, "runs")
    model = os.path.join(runs, "steps-model")
    if not os.path.isdir(
        os.path.join(model, "Format-Serving")
    ):  # a serving model of the bench's model
        shutil.rmtree(model, ignore_errors=True)
        run_child(command("plain", data, model, 128, 1) + ["--train-steps", "20"], model + ".log")
    print(f"steps: the runtime's own steps, {repeats} fresh processes")
    per_step: dict[str, list[dict]] = {}
    for _ in range(repeats):
        work = os.path.join(runs, "steps-work")
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        proc = subprocess.run(
            [sys.executable, "-c", STEPS_CHILD, data, os.path.join(model, "Format-Serving"), work],
            capture_output=True,
            text=True,
            env=child_env(),
            cwd=REPO,
            timeout=600,
        )
        if proc.returncode != 0:
            sys.exit(f"steps child failed:\n{proc.stderr[-3000:]}")
        for row in json.loads(proc.stdout.strip().splitlines()[-1]):
            per_step.setdefault(row["step"], []).append(row)
        shutil.rmtree(work, ignore_errors=True)
    rows = [
        {
            "step": name,
            "runtime": rs[0]["runtime"],
            "wall": statistics.median(r["wall"] for r in rs),
            "cpu": statistics.median(r["cpu"] for r in rs),
        }
        for name, rs in per_step.items()
    ]
    for row in rows:
        print(f"  {row['step']:60s} wall {row['wall']:.3f} s  CPU {row['cpu']:.3f} s", flush=True)
    return {"repeats": repeats, "rows": rows}


# --------------------------------------------------------------------------------------- report


def machine() -> str:
    model = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            model = re.search(r"model name\s*:\s*(.*)", f.read()).group(1)
    except (OSError, AttributeError):
        pass
    try:
        with open("/proc/meminfo") as f:
            kib = int(re.search(r"MemTotal:\s*(\d+)", f.read()).group(1))
        mem = f"{kib / 2**20:.0f} GiB RAM"
    except (OSError, AttributeError):
        mem = "RAM unknown"
    versions = subprocess.run(
        [
            sys.executable,
            "-c",
            "import tensorflow as tf, keras; print(tf.__version__, keras.__version__)",
        ],
        capture_output=True,
        text=True,
        env=child_env(),
    ).stdout.split()
    tf_version, keras_version = (versions + ["?", "?"])[:2]
    return (
        f"nproc {len(os.sched_getaffinity(0))}, {model}, {mem}; Linux {platform.release()}; Python "
        f"{platform.python_version()}, tensorflow {tf_version}, keras {keras_version}; {gpus()}"
    )


def gpus() -> str:
    """The GPUs nvidia-smi lists, or 'no GPU'."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        out = ""
    return "GPUs: " + "; ".join(out.splitlines()) if out else "no GPU"


VARIANT_TEXT = {
    "plain": "`bench/overhead_plain.py`: tf.data + `model.fit` + export, no generic-trainer",
    "trainer": "`generic-trainer train`, the module using the very same tf.data pipeline: the "
    "runtime's own cost",
    "accessor": "the module reading through `fn_args.data_accessor.tf_dataset_factory` with "
    "tfx_bsl's "
    "`TensorFlowDatasetOptions`, as a TFX module is written (it imports tfx_bsl)",
    "accessor_gt": "the same with `generic_trainer.data.DatasetOptions` (same fields): no tfx_bsl "
    "import",
}


def paired(runs: dict[str, list[dict]], variant: str, key: str, diff: bool = False) -> float:
    """Median over repetitions of variant/plain (or variant - plain) for runs of the same
    repetition,
    which ran next to each other: steadier than the ratio of medians on a shared machine."""
    pairs = zip(runs[variant], runs["plain"], strict=True)
    return statistics.median((b[key] - a[key]) if diff else (b[key] / a[key]) for b, a in pairs)


def targets(r: dict) -> str:
    """Whether the trainer variant meets the issue's targets, from the paired figures."""
    if "trainer" not in r["runs"]:
        return ""
    runs = r["runs"]
    checks = [
        (
            f"wall time {paired(runs, 'trainer', 'wall'):.3f}x (target <= 1.05x)",
            paired(runs, "trainer", "wall") <= 1.05,
        ),
        (
            f"first-step delay {paired(runs, 'trainer', 'first_step', diff=True):+.1f} s (target "
            "<= +1.5 s)",
            paired(runs, "trainer", "first_step", diff=True) <= 1.5,
        ),
        (
            f"peak RSS {paired(runs, 'trainer', 'rss_mb'):.3f}x (target <= 1.10x)",
            paired(runs, "trainer", "rss_mb") <= 1.10,
        ),
    ]
    verdicts = [f"{text}: {'met' if ok else '**missed**'}" for text, ok in checks]
    return "Targets for *trainer* (paired medians): " + "; ".join(verdicts) + "."


def overhead_section(r: dict, header: str) -> str:
    m, runs = r["median"], r["runs"]
    lines = [
        "## Overhead: `generic-trainer train` vs a plain Keras script",
        "",
        f"Written by `bench/overhead.py --mode overhead`. {r['examples']:,} generated penguin-like "
        "training "
        f"examples (4 gzip shards) + {20_000:,} eval examples, batch {r['batch_size']}, "
        f"{r['epochs']} epoch(s), "
        "validation at the end of each epoch, serving SavedModel exported; every run a fresh "
        "process, "
        f"{r['repeats']} repetitions, each running every variant once, in rotating order (each "
        "variant "
        "takes every place in turn). Variants:",
        "",
        *[f"- *{v}*: {VARIANT_TEXT[v]};" for v in runs],
        "",
        "Figures are medians over the repetitions; in parentheses, the median over repetitions of "
        "the ratio "
        "(difference, for the first step) to the *plain* run of the same repetition. *Best*: the "
        "shortest "
        "time over the repetitions (other work on the machine only ever adds time), in parentheses "
        "the ratio "
        "(difference) to plain's best. First step: seconds from process start to the end of the "
        "first "
        "training step, as each logs it. Peak RSS: the child's `ru_maxrss` (wait4). CPU: user+sys "
        "seconds of "
        "the child. Steps/s: the last epoch's training steps over its time, validation included.",
        "",
        "| variant | wall, s | best wall, s | first step, s | best first step, s | peak RSS, MB | "
        "CPU, s | "
        "steps/s, median / best | val accuracy |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    best = {
        v: {k: min(x[k] for x in vruns) for k in ("wall", "first_step")}
        for v, vruns in runs.items()
    }
    for v in runs:
        med = m[v]
        b, b0 = best[v], best["plain"]
        if v == "plain":
            cells = [
                f"{med['wall']:.1f}",
                f"{b['wall']:.1f}",
                f"{med['first_step']:.1f}",
                f"{b['first_step']:.1f}",
                f"{med['rss_mb']:.0f}",
                f"{med['cpu']:.1f}",
            ]
        else:
            cells = [
                f"{med['wall']:.1f} ({paired(runs, v, 'wall'):.3f})",
                f"{b['wall']:.1f} ({b['wall'] / b0['wall']:.3f})",
                f"{med['first_step']:.1f} ({paired(runs, v, 'first_step', diff=True):+.1f})",
                f"{b['first_step']:.1f} ({b['first_step'] - b0['first_step']:+.1f})",
                f"{med['rss_mb']:.0f} ({paired(runs, v, 'rss_mb'):.3f})",
                f"{med['cpu']:.1f} ({paired(runs, v, 'cpu'):.3f})",
            ]
        top = max(x["steps_per_s"] for x in runs[v])
        lines.append(
            f"| {v} | {' | '.join(cells)} | {med['steps_per_s']:.0f} / {top:.0f} | "
            f"{med['accuracy']:.3f} |"
        )
    lines += [
        "",
        targets(r),
        "",
        "Every run (wall s / first step s / peak RSS MB / CPU s, and the 1-min load "
        "average when it started):",
        "",
    ]
    for variant, vruns in runs.items():
        cells = "; ".join(
            f"{x['wall']:.1f}/{x['first_step']:.1f}/{x['rss_mb']:.0f}/{x['cpu']:.1f} "
            f"(load {x['load']:.1f})"
            for x in vruns
        )
        lines.append(f"- {variant}: {cells}")
    return "\n".join(lines + ["", header])


def memory_section(r: dict, header: str) -> str:
    (n1, a), (n2, b) = sorted(r["results"].items())
    return "\n".join(
        [
            "## Memory: peak RSS does not grow with the data",
            "",
            "Written by `bench/overhead.py --mode memory`. `generic-trainer train` with "
            "`bench/overhead_module.py` "
            f"(`{r['variant']}` input: `fn_args.data_accessor.tf_dataset_factory`, shuffle buffer "
            "10,000), batch "
            f"{r['batch_size']}, one epoch over every training example, validation, export.",
            "",
            "| training examples | wall, s | peak RSS, MB | CPU, s |",
            "|---:|---:|---:|---:|",
            f"| {n1:,} | {a['wall']:.1f} | {a['rss_mb']:.0f} | {a['cpu']:.1f} |",
            f"| {n2:,} | {b['wall']:.1f} | {b['rss_mb']:.0f} | {b['cpu']:.1f} |",
            "",
            f"Peak RSS ratio {n2 // 1000:,}k / {n1 // 1000:,}k: "
            f"**{b['rss_mb'] / a['rss_mb']:.3f}** (target: within "
            "1.10). Examples are read as a stream (TFRecordDataset -> bounded shuffle buffer -> "
            "batches); nothing "
            "holds the data set.",
            "",
            header,
        ]
    )


def startup_section(r: dict, header: str) -> str:
    lines = [
        "## Start-up: help and argument errors without TensorFlow",
        "",
        "Written by `bench/overhead.py --mode startup`. Wall time of the console script, median "
        f"of {r['repeats']} "
        "runs after one warm-up; heavy libraries: which of "
        f"{', '.join(f'`{h}`' for h in HEAVY)} the same command imports (`python -X importtime`). "
        "Target: "
        "under 1 s, no TensorFlow.",
        "",
        "| command | median, s | max, s | heavy libraries imported |",
        "|---|---:|---:|---|",
    ]
    for row in r["rows"]:
        heavy = "-" if row["heavy"] is None else (", ".join(row["heavy"]) or "none")
        lines.append(f"| {row['label']} | {row['median']:.2f} | {row['max']:.2f} | {heavy} |")
    return "\n".join(lines + ["", header])


def steps_section(r: dict, header: str, plain_wall: float | None) -> str:
    own = [row for row in r["rows"] if row["runtime"]]
    wall, cpu = sum(row["wall"] for row in own), sum(row["cpu"] for row in own)
    lines = [
        "## The runtime's own steps, one by one",
        "",
        "Written by `bench/overhead.py --mode steps`. What `generic-trainer train` does besides "
        "running "
        "`run_fn`, each step timed alone (wall and CPU seconds, median of "
        f"{r['repeats']} fresh processes) on the overhead bench's data and a serving model of its "
        "model: "
        "steadier than the difference of two noisy end-to-end times.",
        "",
        "| step | wall, s | CPU, s |",
        "|---|---:|---:|",
    ]
    for row in r["rows"]:
        name = row["step"] if row["runtime"] else f"*{row['step']}*"
        lines.append(f"| {name} | {row['wall']:.3f} | {row['cpu']:.3f} |")
    lines.append(f"| **the runtime's steps together** | **{wall:.3f}** | **{cpu:.3f}** |")
    if plain_wall:
        lines += [
            "",
            f"Together {wall:.2f} s: {100 * wall / plain_wall:.1f}% of the plain script's median "
            "wall "
            f"time in the overhead bench ({plain_wall:.1f} s). The progress callback runs on "
            "Keras' "
            "asynchronous batch-end dispatch (`async_safe`), off the training loop.",
        ]
    return "\n".join(lines + ["", header])


def footer(cmd: str) -> str:
    load = os.getloadavg()
    return (
        f"Machine: {machine()}. Date: {datetime.date.today().isoformat()}. Load average when "
        "written: "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1/5/15 min; the machine is shared with "
        "other work, so "
        f"absolute times vary; compare figures within one section).\n\nCommand:\n\n    {cmd}\n"
    )


def _readme_plain_wall() -> float | None:
    """The plain script's median wall time in the overhead section of bench/README.md, if there is
    one."""
    try:
        text = open(README).read()
    except OSError:
        return None
    m = re.search(r"^\| plain \| ([\d.]+) \|", text, re.M)
    return float(m.group(1)) if m else None


def update_readme(name: str, section: str) -> None:
    """Replace the text between <!-- name:start --> and <!-- name:end --> (appended when absent)."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    text = open(README).read() if os.path.exists(README) else "# Benchmarks\n"
    block = f"{start}\n{section.rstrip()}\n{end}"
    if start in text and end in text:
        text = text[: text.index(start)] + block + text[text.index(end) + len(end) :]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    with open(README, "w") as f:
        f.write(text)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--mode", choices=("all", "startup", "steps", "overhead", "memory"), default="all"
    )
    parser.add_argument(
        "--examples", type=int, default=500_000, help="training examples (default 500000)"
    )
    parser.add_argument(
        "--large-examples", type=int, help="memory mode: the large data set (default 10x)"
    )
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument(
        "--repeats", type=int, default=8, help="overhead mode: runs of each variant"
    )
    parser.add_argument(
        "--startup-repeats", type=int, default=6, help="startup mode: runs of each command"
    )
    parser.add_argument(
        "--variants", default=",".join(VARIANTS), help=f"overhead mode: subset of {VARIANTS}"
    )
    parser.add_argument(
        "--no-readme", action="store_true", help="print only, leave bench/README.md alone"
    )
    parser.add_argument("--json", metavar="FILE", help="also write the raw results here")
    args = parser.parse_args(argv)
    variants = tuple(v for v in args.variants.split(",") if v)
    if "plain" not in variants or not set(variants) <= set(VARIANTS):
        parser.error(f"--variants: plain and any of {VARIANTS[1:]}")
    cmd_base = ".venv/bin/python bench/overhead.py"
    argv_text = " ".join(sys.argv[1:] if argv is None else argv)
    results = {}
    for mode in ("startup", "overhead", "steps", "memory"):
        if args.mode not in ("all", mode):
            continue
        if mode == "startup":
            results[mode] = r = bench_startup(args.startup_repeats)
            section = startup_section(
                r, footer(f"{cmd_base} --mode startup --startup-repeats {args.startup_repeats}")
            )
        elif mode == "steps":
            results[mode] = r = bench_steps(args.examples, args.startup_repeats)
            plain = (
                results.get("overhead", {}).get("median", {}).get("plain", {}).get("wall")
                or _readme_plain_wall()
            )
            section = steps_section(
                r,
                footer(
                    f"{cmd_base} --mode steps --examples {args.examples} "
                    f"--startup-repeats {args.startup_repeats}"
                ),
                plain,
            )
        elif mode == "overhead":
            results[mode] = r = bench_overhead(
                args.examples, args.repeats, args.batch_size, args.epochs, variants
            )
            section = overhead_section(
                r,
                footer(
                    f"{cmd_base} --mode overhead --examples {args.examples} --batch-size "
                    f"{args.batch_size} "
                    f"--epochs {args.epochs} --repeats {args.repeats} --variants "
                    f"{','.join(variants)}"
                ),
            )
        else:
            large = args.large_examples or args.examples * 10
            results[mode] = r = bench_memory(args.examples, large, args.batch_size)
            section = memory_section(
                r,
                footer(
                    f"{cmd_base} --mode memory --examples {args.examples} --large-examples {large} "
                    f"--batch-size {args.batch_size}"
                ),
            )
        print("\n" + section)
        if not args.no_readme:
            update_readme(mode, section)
            print(f"updated {README} ({mode})", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
    print(f"(command: {cmd_base} {argv_text})")


if __name__ == "__main__":
    main()
